#!/usr/bin/env python3
"""`notes history` of a note with N versions, as whole processes (Docs/PERFORMANCE.md, issue 31).

Starts a release `notesyncd` on a free port with a temporary data directory, gives one note N versions (one push per
version over HTTP, each a fast-forward edit of the one before rewriting one of its 20 lines and changing its tag), signs a fresh `notes` home in (the sign-in pulls the
note, never its history), then times:
- the first `notes history ID`, which fetches the N versions and keeps them (`note_versions`);
- `notes history ID` again, RUNS times (after one warm-up), which reads them from the device: the budget is 100 ms;
- `notes --version` (process start) and `notes show ID` (a local read) in turn with it, as baselines.
Prints the median, minimum and maximum wall time and the median CPU time (user + system) of each.

usage: history.py BIN_DIR [N=1000] [RUNS=11]     (BIN_DIR holds release `notes` and `notesyncd`)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from timing import timed

PASSWORD = "correct horse battery"


def call(base, method, path, body=None, token=None):
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(request) as answer:
        data = answer.read()
        return json.loads(data) if data else None


def main():
    bin_dir = os.path.abspath(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 11
    notes = os.path.join(bin_dir, "notes")
    with tempfile.TemporaryDirectory(prefix="notes-history-bench-") as work:
        daemon = subprocess.Popen(
            [os.path.join(bin_dir, "notesyncd"), "--port", "0", "--data-dir", os.path.join(work, "data"), "--sign-up", "open",
             "--bcrypt-cost", "4", "--log-level", "error"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = daemon.stdout.readline()
            base = line.strip().rsplit(" ", 1)[-1]
            call(base, "POST", "/v1/accounts", {"username": "history", "password": PASSWORD})
            token = call(base, "POST", "/v1/sessions", {"username": "history", "password": PASSWORD, "deviceName": "bench"})["token"]
            origin = 5044031582654955520
            client_id = (250_000_000_000 << 22) | 7
            started = time.perf_counter()
            # A note of 20 lines of about 50 bytes; each version rewrites one of them (a long-lived note edited often).
            lines = [f"line {index}: the benchmark note as it was first written" for index in range(20)]
            text, server_id = "", None
            for version in range(1, count + 1):
                lines[version % 20] = f"line {version % 20}: rewritten by version {version} of the benchmark note"
                new = "\n".join(lines) + "\n"
                change = {"clientID": str(client_id), "origin": str(origin), "editID": str(((250_000_000_001 + version) << 22) | 7),
                          "text": new, "tags": [f"v{version % 7}"], "baseTags": [f"v{(version - 1) % 7}"] if version > 1 else []}
                if server_id:
                    change.update({"serverID": server_id, "baseVersion": version - 1, "baseText": text})
                result = call(base, "POST", "/v1/notes/push", {"changes": [change]}, token)["results"][0]
                if result["status"] not in ("created", "updated"):
                    sys.exit(f"push {version} answered {result}")
                server_id, text = result["serverID"], new
            print(f"{count} versions pushed in {time.perf_counter() - started:.1f} s (last text {len(text)} bytes)")
            env = dict(os.environ, NOTES_HOME=os.path.join(work, "home"))
            env.pop("VISUAL", None)
            subprocess.run([notes, "login", "--server", base, "-u", "history", "--password-stdin"], input=PASSWORD + "\n",
                           env=env, text=True, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            listed = json.loads(subprocess.run([notes, "list", "--json"], env=env, check=True, stdout=subprocess.PIPE).stdout)
            note = listed[0]["id"]
            wall, cpu, output = timed([notes, "history", note, "--json"], env)
            fetched = json.loads(output)
            print(f"first `notes history`: {wall:.1f} ms wall, {cpu:.1f} ms CPU, fetched {fetched['fetched']} versions")
            commands = {
                "notes --version (baseline: process start)": [notes, "--version"],
                "notes show ID (a local read)": [notes, "show", note],
                f"notes history ID ({count} versions, kept here)": [notes, "history", note],
                f"notes history ID --json": [notes, "history", note, "--json"],
            }
            times = {name: [] for name in commands}
            cpus = {name: [] for name in commands}
            for round_ in range(runs + 1):
                for name, argv in commands.items():
                    wall, cpu, output = timed(argv, env)
                    if round_ > 0:
                        times[name].append(wall)
                        cpus[name].append(cpu)
            again = json.loads(timed([notes, "history", note, "--json"], env)[2])
            if again["fetched"] != 0 or len(again["versions"]) != count:
                sys.exit(f"asking again fetched {again['fetched']} versions and shows {len(again['versions'])}")
            print(f"{'command':50} {'median ms':>9} {'min':>7} {'max':>7} {'CPU ms':>7}")
            for name, values in times.items():
                print(f"{name:50} {statistics.median(values):9.1f} {min(values):7.1f} {max(values):7.1f} {statistics.median(cpus[name]):7.1f}")
        finally:
            daemon.terminate()
            daemon.wait()


if __name__ == "__main__":
    main()
