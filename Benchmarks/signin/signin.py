#!/usr/bin/env python3
"""The million-note account (issue 30): a first sign-in and a re-sign-in of an account of N notes, timed as whole
`notes` processes against a release `notesyncd` on loopback, with the disk's floor measured in the same sitting.

For each build (--bin, and --vs for a second one to compare with, run by run in turn):
1. start its `notesyncd` on a fresh data directory (SQLite, or --database postgres://...), sign up an account and
   fill it with N notes through the protocol (`POST /v1/notes/push`, batches of 1,000), then restart the daemon so
   its peak memory counts only the sign-ins;
2. each round: `notes login --no-carry` on a fresh NOTES_HOME (the first sign-in: every note pulled), then
   `notes logout` and `notes login` again on the same home (the re-sign-in: the notes are still on the device and
   nothing changed on the server).
The floor, measured in every round too: Python's sqlite3 writes the same N texts into a fresh WAL database with an
FTS5 index over them, in one transaction (what a first sign-in cannot avoid writing).

Prints, per build and measure, the median (min–max) wall time of RUNS rounds, the ratio of the median to the floor's
median, the client's peak RSS (the largest of the runs) and the daemon's peak RSS above its idle size.

  swift build -c release --product notes && swift build -c release --product notesyncd
  python3 Benchmarks/signin/signin.py --bin .build/release --notes 200000 --runs 3
  python3 Benchmarks/signin/signin.py --bin .build/release --vs ../old/.build/release --notes 200000 --runs 3
"""
import argparse
import os
import random
import resource
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "live"))
import notesync_http  # noqa: E402  (the live benchmarks' HTTP helpers)

PASSWORD = notesync_http.PASSWORD
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu garden meeting budget travel recipe idea draft "
         "letter invoice house river mountain coffee morning evening report plan list book film music").split()


def texts(count, seed=30):
    """N note texts of 5 to 40 words (about 150 bytes on average), the first line a short title."""
    rng = random.Random(seed)
    for i in range(count):
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5)))
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 35)))
        yield f"{title} {i}\n{body}\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A release notesyncd on a free loopback port with open sign-up and cheap password hashes."""

    def __init__(self, bin_dir, data_dir, database, notes):
        self.command = [os.path.join(bin_dir, "notesyncd"), "--data-dir", data_dir, "--bcrypt-cost", "4",
                        "--log-level", "error", "--max-notes-per-account", str(max(1_000_000, 2 * notes))]
        if database:
            self.command += ["--database", database]
        self.process = None
        self.port = None

    def start(self):
        self.port = free_port()
        env = dict(os.environ, NOTESYNCD_SIGN_UP="open")
        self.process = subprocess.Popen(self.command + ["--port", str(self.port)], stdout=subprocess.PIPE, text=True, env=env)
        line = self.process.stdout.readline()
        if "listening" not in line:
            raise SystemExit(f"notesyncd did not start: {line!r}")
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.process:
            self.process.terminate()
            self.process.wait(timeout=120)
            self.process = None

    def memory_kib(self, field):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0


class Flakes:
    """MiniFlake IDs as a device mints them (41-bit milliseconds since 2018-03-01, 12-bit sequence, 10-bit instance):
    roughly time-ordered, so a device's notes arrive in the order of their IDs, as real accounts' do. With
    `random_ids`, uniformly random 62-bit IDs instead (the worst case for the client's indexes)."""

    EPOCH_MS = 1_519_862_400_000

    def __init__(self, rng, random_ids=False, start_ms=None):
        self.rng, self.random_ids = rng, random_ids
        self.ms = (start_ms if start_ms is not None else int(time.time() * 1000)) - self.EPOCH_MS
        self.sequence, self.instance = 0, rng.randrange(1024)

    def next(self):
        if self.random_ids:
            return str(self.rng.randrange(1, 2**62))
        if self.sequence == 4096:
            self.ms, self.sequence = self.ms + 1, 0
        value = (self.ms << 22) | (self.sequence << 10) | self.instance
        self.sequence += 1
        return str(value)


def fill(port, username, count, random_ids=False):
    """Signs up `username` and pushes `count` notes in batches of 1,000 (as one device, whose client and edit IDs
    are MiniFlakes; see ``Flakes``)."""
    conn = notesync_http.connect(port)
    token = notesync_http.account(conn, username, device="filler")
    rng = random.Random(7)
    flakes = Flakes(rng, random_ids)
    origin = str(rng.randrange(1, 2**62))
    batch = []
    for text in texts(count):
        batch.append({"clientID": flakes.next(), "origin": origin, "editID": flakes.next(), "text": text, "deleted": False})
        if len(batch) == 1000 or len(batch) == count:
            push(conn, batch, token)
            batch = []
    if batch:
        push(conn, batch, token)
    conn.close()


def push(conn, batch, token):
    status, body = notesync_http.call(conn, "POST", "/v1/notes/push", {"changes": batch}, token=token)
    if status != 200:
        raise SystemExit(f"push: {status} {str(body)[:300]}")


def rss_of_last_child(argv, env, stdin=None):
    """Runs a command and returns (wall seconds, its own peak RSS in KiB, stdout) through wait4."""
    elapsed, usage, out = run_child(argv, env, stdin)
    return elapsed, usage.ru_maxrss, out


def run_child(argv, env, stdin=None):
    """Runs a command to its end and returns (wall seconds, its own resource usage from wait4, stdout); exits the
    benchmark if the command fails."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if stdin:
        process.stdin.write(stdin.encode())
        process.stdin.close()
    out = process.stdout.read()
    err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {process.returncode}: {err.decode(errors='replace').strip()}")
    return elapsed, usage, out.decode(errors="replace")


def floor(directory, count):
    """The disk's floor: the same texts into a fresh WAL database with an FTS5 index, one transaction."""
    path = os.path.join(directory, "floor.sqlite")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    started = time.perf_counter()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text BLOB NOT NULL)")
    db.execute("CREATE VIRTUAL TABLE notes_search USING fts5(text, content='notes', content_rowid='id')")
    db.execute("BEGIN")
    for i, text in enumerate(texts(count), start=1):
        data = text.encode()
        db.execute("INSERT INTO notes (id, text) VALUES (?, ?)", (i, data))
        db.execute("INSERT INTO notes_search (rowid, text) VALUES (?, ?)", (i, text))
    db.execute("COMMIT")
    db.close()
    return time.perf_counter() - started


class Build:
    def __init__(self, name, bin_dir, scratch, database, notes):
        self.name = name
        self.notes = os.path.join(os.path.abspath(bin_dir), "notes")
        self.scratch = os.path.join(scratch, name)
        os.makedirs(self.scratch)
        # On PostgreSQL both builds share the database, each with its own account.
        self.daemon = Daemon(os.path.abspath(bin_dir), os.path.join(self.scratch, "data"), database, notes)
        self.username = f"bench{name}{random.randrange(10**6)}"
        self.first, self.again, self.client_rss = [], [], 0
        self.idle_rss = 0

    def prepare(self, count, random_ids=False):
        self.daemon.start()
        started = time.perf_counter()
        fill(self.daemon.port, self.username, count, random_ids)
        print(f"{self.name}: filled {count} notes in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        self.daemon.stop()
        self.url = self.daemon.start()
        self.idle_rss = self.daemon.memory_kib("VmRSS")

    def round(self, index):
        home = os.path.join(self.scratch, f"home{index}")
        env = dict(os.environ, NOTES_HOME=home)
        env.pop("VISUAL", None)
        login = [self.notes, "login", "--server", self.url, "--username", self.username, "--password-stdin", "--no-carry", "--json"]
        elapsed, rss, out = rss_of_last_child(login, env, PASSWORD + "\n")
        self.first.append(elapsed)
        self.client_rss = max(self.client_rss, rss)
        subprocess.run([self.notes, "logout"], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed, rss, out = rss_of_last_child(login, env, PASSWORD + "\n")
        self.again.append(elapsed)
        self.client_rss = max(self.client_rss, rss)
        listed = subprocess.run([self.notes, "status", "--json"], env=env, capture_output=True, text=True, check=True)
        shutil.rmtree(home, ignore_errors=True)
        return listed.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="directory holding release notes and notesyncd")
    parser.add_argument("--vs", help="a second build's directory, measured in turn with the first")
    parser.add_argument("--notes", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--database", help="postgres://... (default: each daemon's own SQLite)")
    parser.add_argument("--random-ids", action="store_true",
                        help="fill with uniformly random client IDs instead of a device's time-ordered MiniFlakes")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="notes-signin-bench.")
    builds = [Build("A", args.bin, scratch, args.database, args.notes)]
    if args.vs:
        builds.append(Build("B", args.vs, scratch, args.database, args.notes))
    floors = []
    try:
        for build in builds:
            build.prepare(args.notes, args.random_ids)
        for index in range(args.runs):
            floors.append(floor(scratch, args.notes))
            for build in builds:
                build.round(index)
            print(f"round {index + 1}/{args.runs} done (load {open('/proc/loadavg').read().split()[0]})", file=sys.stderr)
        floor_median = statistics.median(floors)
        print(f"{args.notes} notes ({'random' if args.random_ids else 'MiniFlake'} client IDs), {args.runs} rounds, {'PostgreSQL' if args.database else 'SQLite'}; "
              f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
        print(f"{'measure':44} {'median s':>9} {'min':>7} {'max':>7} {'vs floor':>9}")
        print(f"{'floor (sqlite3, WAL + FTS5, one transaction)':44} {floor_median:9.2f} {min(floors):7.2f} {max(floors):7.2f} {1:8.2f}x")
        for build in builds:
            label = f"{build.name} ({os.path.dirname(build.notes)})"
            for name, values in (("first sign-in", build.first), ("re-sign-in", build.again)):
                median = statistics.median(values)
                print(f"{label + ' ' + name:44} {median:9.2f} {min(values):7.2f} {max(values):7.2f} {median / floor_median:8.2f}x")
            server_peak = build.daemon.memory_kib("VmHWM")
            print(f"  {build.name}: client peak RSS {build.client_rss / 1024:.0f} MiB; "
                  f"daemon idle {build.idle_rss / 1024:.0f} MiB, peak {server_peak / 1024:.0f} MiB "
                  f"(+{(server_peak - build.idle_rss) / 1024:.0f} MiB)")
        if len(builds) == 2:
            for name, a, b in (("first sign-in", builds[0].first, builds[1].first), ("re-sign-in", builds[0].again, builds[1].again)):
                ratios = [x / y for x, y in zip(a, b)]
                print(f"A/B {name}: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    finally:
        for build in builds:
            build.daemon.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
