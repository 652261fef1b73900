#!/usr/bin/env python3
"""Propagation: device A writes a note; how long until device B, running `notes watch`, has it in its local store.

Starts release notesyncd daemons (one on SQLite, or --daemons 2 on a shared PostgreSQL --database), signs up one
account, signs device B in with the real `notes` binary (its own --home) and runs `notes watch --json` on it,
connected to the last daemon. Device A pushes one note at a time through the protocol (`POST /v1/notes/push`) to the
first daemon. The time runs from just before A's push is sent until B's watch prints the `synced` line of the sync
that stored the note: the watch prints it after that sync's transactions committed, so the note is in B's local
store by then. The next note is written only after that. At the end `notes list --json` on B must show every note.

  python3 Benchmarks/live/propagation.py --bin .build/release --notes 1000
  python3 Benchmarks/live/propagation.py --bin .build/release --notes 1000 --daemons 2 --database postgres://...

Prints one JSON object (p50/p90/p99/max in ms).
"""
import argparse, json, os, random, shutil, subprocess, tempfile, time

from notesync_http import PASSWORD, account, call, connect, percentile


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="directory holding release notesyncd and notes")
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--daemons", type=int, default=1)
    parser.add_argument("--database", default=None)
    parser.add_argument("--port", type=int, default=18580)
    args = parser.parse_args()
    if args.daemons > 1 and not (args.database or "").startswith("postgres"):
        raise SystemExit("--daemons 2 needs --database postgres://...")
    scratch = tempfile.mkdtemp(prefix="notes-propagation.")
    daemons, watch = [], None
    try:
        urls = []
        for i in range(args.daemons):
            port = args.port + i
            command = [os.path.join(args.bin, "notesyncd"), "--port", str(port), "--data-dir", os.path.join(scratch, f"data{i}"),
                       "--bcrypt-cost", "4", "--log-level", "error"]
            if args.database:
                command += ["--database", args.database]
            # Sign-up is closed by default; the environment (not the flag) opens it so that older binaries still start.
            env = dict(os.environ, NOTESYNCD_SIGN_UP="open")
            daemon = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
            daemons.append(daemon)
            assert "listening" in daemon.stdout.readline()
            urls.append(f"http://127.0.0.1:{port}")
        a = connect(args.port)
        username = "prop" + str(random.randrange(10**9))
        token = account(a, username, device="A")

        notes = os.path.join(args.bin, "notes")
        home = os.path.join(scratch, "b")
        login = subprocess.run([notes, "login", "--server", urls[-1], "--username", username, "--password-stdin", "--home", home],
                               input=PASSWORD + "\n", text=True, capture_output=True)
        assert login.returncode == 0, login.stderr
        watch = subprocess.Popen([notes, "watch", "--json", "--home", home], stdout=subprocess.PIPE, text=True, bufsize=1)
        first = json.loads(watch.stdout.readline())
        assert first["event"] == "synced", first

        rng = random.Random(19)
        origin = str(rng.randrange(1, 2**62))
        latencies, extra_lines = [], 0
        for i in range(args.notes):
            change = {"clientID": str(rng.randrange(1, 2**62)), "origin": origin, "editID": str(rng.randrange(1, 2**62)),
                      "text": f"propagated {i}\n", "deleted": False}
            t0 = time.perf_counter()
            status, _ = call(a, "POST", "/v1/notes/push", {"changes": [change]}, token=token)
            assert status == 200, status
            while True:
                line = json.loads(watch.stdout.readline())
                if line["event"] == "synced" and line["applied"] >= 1:
                    break
                extra_lines += 1
                if os.environ.get("PROPAGATION_DEBUG"):
                    print("other:", line, file=__import__("sys").stderr)
            latencies.append((time.perf_counter() - t0) * 1000)
        listed = subprocess.run([notes, "list", "--json", "--home", home], text=True, capture_output=True)
        count = len(json.loads(listed.stdout))
        latencies.sort()

        def pct(p):
            return percentile(latencies, p, digits=2)

        print(json.dumps({
            "daemons": args.daemons, "database": "postgres" if args.database else "sqlite", "notes": args.notes,
            "notes_on_b": count, "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99),
            "max_ms": round(latencies[-1], 2), "mean_ms": round(sum(latencies) / len(latencies), 2),
            "other_lines": extra_lines, "loadavg": open("/proc/loadavg").read().split()[:3]}))
    finally:
        if watch:
            watch.send_signal(2)
            try:
                watch.wait(timeout=30)
            except subprocess.TimeoutExpired:
                watch.kill()
        for daemon in daemons:
            daemon.terminate()
            daemon.wait(timeout=60)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
