#!/usr/bin/env python3
"""End-to-end encryption's two performance targets (issue 32), measured as whole `notes` processes against a release
`notesyncd` (SQLite, a temporary data directory) on loopback, each against a baseline in the same sitting.

1. Throughput: an encrypted account's push and pull against a plaintext account's (target: >= 0.8x). Each round
   makes one account of each kind (in turn: plaintext first in even rounds, encrypted first in odd ones), on a fresh
   device each: `notes signup` (with or without `--no-encryption`), `notes import` of an export of N notes (made by
   Benchmarks/cli/make-export.py: tags on most notes), then timed:
   - push: `notes sync`, which sends the N notes in the client's batches (1,000 a request by default);
   - pull: `notes login --no-carry` on a second fresh device, the first sign-in, which brings all N notes.
   The KDF is a fixed cost per sign-in, not per note: an encrypted first sign-in runs Argon2id once (the prelogin's
   parameters, the client's default cost). It is timed alone in every round (the same libsodium `crypto_pwhash`
   the client calls, through ctypes, with the account's own salt and cost) and subtracted from the encrypted pull
   for the "excluding the KDF" figure; the push runs no KDF (the keys are on the device since sign-up).
2. Password change: an encrypted account filled with M notes (default 100,000) through the client (import, then one
   sync), and a one-note encrypted account as the baseline; `notes password --password-stdin` timed on each, in
   turn, RUNS times (the password goes back and forth between two values). On main the command runs Argon2id twice
   (the current password's AuthKey, then the new password's keys), so the target reads: time - 2 x KDF <= 1 s. The
   server's bcrypt cost is the daemon's default (12) here, as a deployment's is. Around every change the server's
   counts are read (`notesyncd stats --json`: notes, applied edits, history versions) and the account's newest
   change sequence (the SQLite store, read-only): the command itself must re-upload 0 notes. At the end a fresh
   device signs in with the final password and must hold all M notes.

Every command's CPU (user + system, through wait4) is reported beside its wall time, and in the password part the
daemon's CPU during the command (/proc/PID/stat): on a shared machine they are steadier than the wall clock.
Prints the median (min–max) of each figure and the ratios, run by run; `--json FILE` also writes every figure.
`--bcrypt-cost 4` shows the password change without most of the server's hashing.

  swift build -c release --product notesyncd && swift build -c release --product notes
  python3 Benchmarks/encryption/bench.py --bin .build/release
  python3 Benchmarks/encryption/bench.py --bin .build/release --notes 20000 --runs 5 --password-notes 100000
"""
import argparse
import base64
import ctypes
import ctypes.util
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "signin"))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import notesync_http  # noqa: E402  (the live benchmarks' HTTP helpers)
from signin import Daemon, run_child  # noqa: E402  (a release notesyncd on a free port; a timed child)

PASSWORD = "correct horse battery"
OTHER_PASSWORD = "staple battery horse"
MAKE_EXPORT = os.path.join(HERE, "..", "cli", "make-export.py")


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def spread(values, digits=2):
    """`median (min–max)` of `values`."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def run(argv, env, stdin=None):
    """Runs one command to its end, untimed; returns its stdout. Exits the benchmark if it fails."""
    process = subprocess.run(argv, env=env, input=stdin.encode() if stdin else None, capture_output=True)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {process.returncode}: {process.stderr.decode(errors='replace').strip()}")
    return process.stdout.decode(errors="replace")


def timed(argv, env, stdin=None):
    """Runs one command; returns (wall seconds, user + system CPU seconds, stdout), the CPU through wait4."""
    elapsed, usage, out = run_child(argv, env, stdin)
    return elapsed, usage.ru_utime + usage.ru_stime, out


class Sodium:
    """libsodium's Argon2id (`crypto_pwhash`, the call PasswordKDF makes: 32 bytes out, Argon2id 1.3), timed alone."""

    ALG_ARGON2ID13 = 2

    def __init__(self):
        name = ctypes.util.find_library("sodium")
        if not name:
            raise SystemExit("libsodium not found (apt-get install libsodium-dev, as scripts/ do)")
        self.lib = ctypes.CDLL(name)
        if self.lib.sodium_init() < 0:
            raise SystemExit("sodium_init failed")
        self.lib.crypto_pwhash.argtypes = [ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_ulonglong,
                                           ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_int]

    def kdf_seconds(self, password, kdf):
        """One Argon2id of `password` with a prelogin answer's `kdf` ({salt, opsLimit, memLimit}): (wall, CPU) seconds
        (Argon2id here runs on one thread, as the client's does)."""
        salt = base64.urlsafe_b64decode(kdf["salt"] + "=" * (-len(kdf["salt"]) % 4))
        out = ctypes.create_string_buffer(32)
        data = password.encode()
        started, cpu = time.perf_counter(), time.process_time()
        status = self.lib.crypto_pwhash(out, 32, data, len(data), salt, kdf["opsLimit"], kdf["memLimit"],
                                        self.ALG_ARGON2ID13)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        if status != 0:
            raise SystemExit("crypto_pwhash failed (out of memory?)")
        return elapsed, cpu


def cpu_seconds(pid):
    """A process's user + system CPU seconds so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prelogin(port, username):
    conn = notesync_http.connect(port)
    status, body = notesync_http.call(conn, "POST", "/v1/prelogin", {"username": username})
    conn.close()
    if status != 200:
        raise SystemExit(f"prelogin: {status} {body}")
    return body


def measure_kdf(sodium, port, username, password, figures):
    """Times the KDF alone with `username`'s prelogin parameters, into `figures` (kdf, kdf_cpu, kdfCost)."""
    answer = prelogin(port, username)
    if not answer.get("encrypted"):
        raise SystemExit(f"{username} is not encrypted: {answer}")
    wall, cpu = sodium.kdf_seconds(password, answer["kdf"])
    figures["kdf"].append(wall)
    figures["kdf_cpu"].append(cpu)
    figures["kdfCost"] = {k: answer["kdf"][k] for k in ("opsLimit", "memLimit")}


def kdf_line(figures):
    """The report's line on the KDF alone."""
    cost = figures["kdfCost"]
    return (f"KDF alone (Argon2id, ops {cost['opsLimit']}, {cost['memLimit'] >> 20} MiB): {spread(figures['kdf'], 3)} s, "
            f"CPU {spread(figures['kdf_cpu'], 3)} s")


class Bench:
    def __init__(self, bin_dir, scratch):
        self.bin = os.path.abspath(bin_dir)
        self.notes = os.path.join(self.bin, "notes")
        self.scratch = scratch
        self.homes = 0

    def env(self):
        self.homes += 1
        env = dict(os.environ, NOTES_HOME=os.path.join(self.scratch, f"home{self.homes}"))
        env.pop("VISUAL", None)
        env.pop("EDITOR", None)
        return env

    def start(self, name, notes, bcrypt_cost):
        daemon = Daemon(self.bin, os.path.join(self.scratch, name), None, notes)
        command = daemon.command
        command[command.index("--bcrypt-cost") + 1] = str(bcrypt_cost)
        command += ["--max-bytes-per-account", str(1 << 40)]
        url = daemon.start()
        return daemon, url

    def export(self, count):
        path = os.path.join(self.scratch, f"export-{count}.json")
        if not os.path.exists(path):
            subprocess.run([sys.executable, MAKE_EXPORT, str(count), path], check=True)
        return path

    def signup(self, url, username, encrypted, password=PASSWORD):
        """A fresh device signed up to a new account; returns its environment."""
        env = self.env()
        argv = [self.notes, "signup", "--server", url, "--username", username, "--password-stdin"]
        if not encrypted:
            argv.append("--no-encryption")
        run(argv, env, password + "\n")
        return env

    def filled(self, url, username, encrypted, count):
        """A device signed up to a new account with `count` notes imported and not yet pushed."""
        env = self.signup(url, username, encrypted)
        run([self.notes, "import", self.export(count)], env)
        return env

    def push(self, env):
        """`notes sync` of the imported notes: (wall, CPU, the sync's report). The sync's pull that follows its push
        may bring the account's own new notes back (`pulled`): it does in both kinds of account alike."""
        elapsed, cpu, out = timed([self.notes, "sync", "--json"], env)
        return elapsed, cpu, json.loads(out)

    def first_sign_in(self, url, username, password=PASSWORD):
        """`notes login --no-carry` on a fresh device: (wall, CPU, its environment)."""
        env = self.env()
        elapsed, cpu, _ = timed([self.notes, "login", "--server", url, "--username", username, "--password-stdin",
                                 "--no-carry"], env, password + "\n")
        return elapsed, cpu, env

    def status(self, env):
        """`notes status --json` of a device."""
        return json.loads(run([self.notes, "status", "--json"], env))

    def drop(self, env):
        shutil.rmtree(env["NOTES_HOME"], ignore_errors=True)


def check_holds(bench, env, count, encrypted):
    """Exits unless the device holds `count` notes of an account encrypted as said, nothing pending."""
    status = bench.status(env)
    if status["notes"] != count or status["pending"] != 0 or status.get("encrypted") != encrypted:
        raise SystemExit(f"expected {count} notes, none pending, encrypted {encrypted}; the device says {status}")


def throughput(bench, sodium, count, runs):
    daemon, url = bench.start("throughput", count * runs * 2, bcrypt_cost=4)
    figures = {"plaintext": {"push": [], "pull": [], "push_cpu": [], "pull_cpu": []},
               "encrypted": {"push": [], "pull": [], "push_cpu": [], "pull_cpu": [], "kdf": [], "kdf_cpu": []}}
    bench.export(count)
    try:
        for index in range(runs):
            modes = ("plaintext", "encrypted") if index % 2 == 0 else ("encrypted", "plaintext")
            for mode in modes:
                encrypted = mode == "encrypted"
                username = f"{mode[:5]}{index}x{random.randrange(10**6)}"
                device = bench.filled(url, username, encrypted, count)
                wall, cpu, synced = bench.push(device)
                figures[mode].setdefault("echoed", []).append(synced.get("pulled"))
                figures[mode]["push"].append(wall)
                figures[mode]["push_cpu"].append(cpu)
                wall, cpu, fresh = bench.first_sign_in(url, username)
                figures[mode]["pull"].append(wall)
                figures[mode]["pull_cpu"].append(cpu)
                check_holds(bench, device, count, encrypted)
                check_holds(bench, fresh, count, encrypted)
                if encrypted:
                    measure_kdf(sodium, daemon.port, username, PASSWORD, figures[mode])
                bench.drop(device)
                bench.drop(fresh)
            print(f"throughput round {index + 1}/{runs} done (load {load()})", file=sys.stderr)
    finally:
        daemon.stop()
    return figures


def report_throughput(figures, count, runs):
    plain, enc = figures["plaintext"], figures["encrypted"]
    kdf, kdf_cpu = statistics.median(enc["kdf"]), statistics.median(enc["kdf_cpu"])
    print(f"\n## Throughput: {count} notes pushed (`notes sync`) and pulled (first `notes login`), {runs} rounds, "
          f"SQLite; load average {load()}")
    print(kdf_line(enc))
    print(f"{'measure':40} {'wall s, median (min–max)':>28} {'notes/s (median)':>17} {'CPU s (median)':>15}")
    rows = [("plaintext push", plain["push"], plain["push_cpu"]), ("encrypted push", enc["push"], enc["push_cpu"]),
            ("plaintext pull", plain["pull"], plain["pull_cpu"]), ("encrypted pull", enc["pull"], enc["pull_cpu"]),
            ("encrypted pull, excluding the KDF", [x - kdf for x in enc["pull"]], [x - kdf_cpu for x in enc["pull_cpu"]])]
    for name, walls, cpus in rows:
        print(f"{name:40} {spread(walls):>28} {count / statistics.median(walls):17.0f} {statistics.median(cpus):15.2f}")
    ratios = {
        "push": [p / e for p, e in zip(plain["push"], enc["push"])],
        "pull": [p / e for p, e in zip(plain["pull"], enc["pull"])],
        "pull excluding the KDF": [p / (e - kdf) for p, e in zip(plain["pull"], enc["pull"])],
        "push, CPU": [p / e for p, e in zip(plain["push_cpu"], enc["push_cpu"])],
        "pull, CPU": [p / e for p, e in zip(plain["pull_cpu"], enc["pull_cpu"])],
        "pull excluding the KDF, CPU": [p / (e - kdf_cpu) for p, e in zip(plain["pull_cpu"], enc["pull_cpu"])],
    }
    print(f"notes the push's sync pulled back, round by round: plaintext {plain['echoed']}, encrypted {enc['echoed']}")
    print("encrypted throughput / plaintext throughput, round by round (target >= 0.80):")
    for name, values in ratios.items():
        print(f"  {name:24} {spread(values, 3)}")
    return ratios


def server_counts(bench, data_dir, username):
    """The store's counts (`notesyncd stats --json`) and the account's newest change sequence and version sum."""
    out = run([os.path.join(bench.bin, "notesyncd"), "stats", "--json", "--data-dir", data_dir], dict(os.environ))
    stats = json.loads(out)
    db = sqlite3.connect(f"file:{os.path.join(data_dir, 'notesyncd.sqlite')}?mode=ro", uri=True)
    try:
        seq, versions = db.execute(
            "SELECT max(n.change_seq), sum(n.version) FROM notes n JOIN accounts a ON a.id = n.account_id "
            "WHERE a.username = ?", (username,)).fetchone()
    finally:
        db.close()
    return {"notes": stats["notes"], "appliedEdits": stats["appliedEdits"], "noteVersions": stats["noteVersions"],
            "changeSeq": seq or 0, "versionSum": versions or 0}


def password_change(bench, sodium, count, runs, bcrypt_cost):
    daemon, url = bench.start("password", count + 10, bcrypt_cost=bcrypt_cost)
    data_dir = daemon.command[daemon.command.index("--data-dir") + 1]
    figures = {"big": [], "small": [], "big_cpu": [], "small_cpu": [], "big_daemon_cpu": [], "small_daemon_cpu": [],
               "kdf": [], "kdf_cpu": [], "deltas": []}
    try:
        big_user, small_user = f"big{random.randrange(10**6)}", f"small{random.randrange(10**6)}"
        started = time.perf_counter()
        big = bench.filled(url, big_user, True, count)
        fill_wall, _, _ = bench.push(big)
        print(f"filled {count} encrypted notes in {time.perf_counter() - started:.1f} s (the sync: {fill_wall:.1f} s)",
              file=sys.stderr)
        figures["fill_sync"] = fill_wall
        small = bench.filled(url, small_user, True, 1)
        bench.push(small)
        passwords = {big_user: PASSWORD, small_user: PASSWORD}
        for index in range(runs):
            for name, user, env in (("big", big_user, big), ("small", small_user, small)):
                current = passwords[user]
                new = OTHER_PASSWORD if current == PASSWORD else PASSWORD
                before = server_counts(bench, data_dir, user)
                daemon_cpu = cpu_seconds(daemon.process.pid)
                wall, cpu, _ = timed([bench.notes, "password", "--password-stdin"], env, f"{current}\n{new}\n")
                daemon_cpu = cpu_seconds(daemon.process.pid) - daemon_cpu
                after = server_counts(bench, data_dir, user)
                passwords[user] = new
                figures[name].append(wall)
                figures[name + "_cpu"].append(cpu)
                figures[name + "_daemon_cpu"].append(daemon_cpu)
                if name == "big":
                    figures["deltas"].append({k: after[k] - before[k] for k in before})
            measure_kdf(sodium, daemon.port, big_user, passwords[big_user], figures)
            print(f"password round {index + 1}/{runs} done (load {load()})", file=sys.stderr)
        wall, _, fresh = bench.first_sign_in(url, big_user, passwords[big_user])
        check_holds(bench, fresh, count, True)
        figures["fresh_sign_in"] = wall
        figures["total"] = server_counts(bench, data_dir, big_user)
    finally:
        daemon.stop()
    return figures


def report_password(figures, count, runs, bcrypt_cost):
    kdf, kdf_cpu = statistics.median(figures["kdf"]), statistics.median(figures["kdf_cpu"])
    print(f"\n## Password change: `notes password --password-stdin`, {count} notes against 1 note, {runs} runs each, "
          f"bcrypt cost {bcrypt_cost}; load average {load()}")
    print(kdf_line(figures) + "; the command runs it twice (the current password, the new one)")
    print(f"{'measure':44} {'wall s':>24} {'notes CPU s':>24} {'notesyncd CPU s':>24}")
    for name, label in (("big", f"{count} notes"), ("small", "1 note")):
        print(f"{label:44} {spread(figures[name], 3):>24} {spread(figures[name + '_cpu'], 3):>24} "
              f"{spread(figures[name + '_daemon_cpu'], 3):>24}")
    print(f"{f'{count} notes minus 2 KDF runs (target <= 1 s)':44} {spread([x - 2 * kdf for x in figures['big']], 3):>24} "
          f"{spread([x - 2 * kdf_cpu for x in figures['big_cpu']], 3):>24}")
    print(f"{f'{count} notes minus 1 note, run by run':44} "
          f"{spread([b - s for b, s in zip(figures['big'], figures['small'])], 3):>24} "
          f"{spread([b - s for b, s in zip(figures['big_cpu'], figures['small_cpu'])], 3):>24} "
          f"{spread([b - s for b, s in zip(figures['big_daemon_cpu'], figures['small_daemon_cpu'])], 3):>24}")
    totals = {k: sum(d[k] for d in figures["deltas"]) for k in figures["deltas"][0]}
    print(f"server's changes across the {runs} password changes of the {count}-note account: " +
          ", ".join(f"{k} {v:+d}" for k, v in totals.items()) +
          (" (nothing re-uploaded)" if not any(totals.values()) else " (NOT ZERO: the command changed notes)"))
    print(f"then a fresh device signed in with the last password and holds all {count} notes "
          f"({figures['fresh_sign_in']:.2f} s); the fill's sync pushed {count} notes in {figures['fill_sync']:.2f} s")
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="directory holding release notes and notesyncd")
    parser.add_argument("--notes", type=int, default=20_000, help="notes pushed and pulled per round (default 20,000)")
    parser.add_argument("--runs", type=int, default=3, help="throughput rounds, each plaintext and encrypted (default 3)")
    parser.add_argument("--password-notes", type=int, default=100_000,
                        help="notes of the account whose password changes (default 100,000; 0 skips that part)")
    parser.add_argument("--password-runs", type=int, default=5, help="password changes of each account (default 5)")
    parser.add_argument("--bcrypt-cost", type=int, default=12,
                        help="the daemon's bcrypt cost for the password part (default 12, the daemon's own default)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args()
    sodium = Sodium()
    scratch = tempfile.mkdtemp(prefix="notes-e2ee-bench.")
    bench = Bench(args.bin, scratch)
    results = {"load_at_start": load()}
    try:
        if not args.skip_throughput:
            figures = throughput(bench, sodium, args.notes, args.runs)
            results["throughput"] = figures
            results["throughput_ratios"] = report_throughput(figures, args.notes, args.runs)
        if args.password_notes > 0:
            figures = password_change(bench, sodium, args.password_notes, args.password_runs,
                                      args.bcrypt_cost)
            results["password"] = figures
            results["password_changes"] = report_password(figures, args.password_notes, args.password_runs,
                                                          args.bcrypt_cost)
        results["load_at_end"] = load()
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(results, handle, indent=1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
