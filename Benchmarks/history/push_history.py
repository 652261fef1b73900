#!/usr/bin/env python3
"""Pushing an edit to a note with a long history against pushing to a note with one version (Docs/PERFORMANCE.md,
"Note history"), through a real notesyncd over HTTP, in one sitting.

Starts NOTESYNCD (SQLite in a temporary directory, or --database URL), signs up, creates note L and pushes VERSIONS - 1
edits to it (so L has VERSIONS versions) and note S (one version), then pushes ROUNDS edits to each, alternating
L S L S ... so a drift in the machine's speed touches both alike, each push one change of a 400-byte text on the
version the client holds (a fast-forward: lock, load the note, plan, write the note, its version and the account's
totals). Prints the median, p10 and p90 of each push's round trip and the ratio of the medians (L over S), then the
same for a history page of the long note (`GET /v1/notes/{serverID}/versions?limit=100` from its middle) against the
short one's, for scale.

usage: push_history.py NOTESYNCD [VERSIONS=1000] [ROUNDS=300] [--database postgres://...]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def main():
    arguments = [a for a in sys.argv[1:] if not a.startswith("--database")]
    database = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--database=")), None)
    binary = os.path.abspath(arguments[0])
    versions = int(arguments[1]) if len(arguments) > 1 else 1000
    rounds = int(arguments[2]) if len(arguments) > 2 else 300
    with tempfile.TemporaryDirectory(prefix="history-bench-") as work:
        store = ["--database", database] if database else ["--data-dir", os.path.join(work, "data")]
        out = open(os.path.join(work, "daemon.out"), "w+")
        daemon = subprocess.Popen(
            [binary, "--port", "0", "--sign-up", "open", "--bcrypt-cost", "4", "--log-level", "warning"] + store,
            stdout=out, stderr=subprocess.DEVNULL)
        try:
            url = None
            for _ in range(600):
                out.seek(0)
                for line in out.read().splitlines():
                    if line.startswith("notesyncd listening on "):
                        url = line.split(" on ", 1)[1]
                if url:
                    break
                time.sleep(0.1)
            if not url:
                sys.exit("notesyncd did not start")
            run(url, versions, rounds, "postgres" if database else "sqlite")
        finally:
            daemon.terminate()
            daemon.wait()


def run(url, versions, rounds, backend):
    opener = urllib.request.build_opener()

    def call(method, path, body=None, token=None):
        request = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode())
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", "Bearer " + token)
        with opener.open(request) as response:
            data = response.read()
            return json.loads(data) if data else None

    call("POST", "/v1/accounts", {"username": "bench", "password": "correct horse battery"})
    token = call("POST", "/v1/sessions", {"username": "bench", "password": "correct horse battery", "deviceName": "bench"})["token"]
    edit = [1000]

    def text(n):
        return (f"edit {n}\n" + "lorem ipsum dolor sit amet " * 15)[:400]

    def push(client, server=None, version=None):
        edit[0] += 1
        change = {"clientID": str(client), "origin": "7001", "editID": str(edit[0]), "text": text(edit[0])}
        if server:
            change.update(serverID=server, baseVersion=version)
        started = time.perf_counter()
        result = call("POST", "/v1/notes/push", {"changes": [change]}, token)["results"][0]
        elapsed = (time.perf_counter() - started) * 1000
        assert result["status"] in ("created", "updated"), result
        return result["serverID"], result["version"], elapsed

    long_id, long_version, _ = push(1)
    started = time.perf_counter()
    for _ in range(versions - 1):
        long_id, long_version, _ = push(1, long_id, long_version)
    print(f"{backend}: seeded note L with {long_version} versions in {time.perf_counter() - started:.1f} s")
    short_id, short_version, _ = push(2)
    timings = {"L": [], "S": []}
    for _ in range(rounds):
        long_id, long_version, elapsed = push(1, long_id, long_version)
        timings["L"].append(elapsed)
        short_id, short_version, elapsed = push(2, short_id, short_version)
        timings["S"].append(elapsed)
    report(f"push an edit ({rounds} each, alternating)", timings, {"L": f"to L ({versions}+ versions)", "S": "to S (1+ versions)"})

    pages = {"L": [], "S": []}
    for _ in range(rounds):
        for name, server, after in (("L", long_id, versions // 2), ("S", short_id, 0)):
            started = time.perf_counter()
            page = call("GET", f"/v1/notes/{server}/versions?after={after}&limit=100", None, token)
            pages[name].append((time.perf_counter() - started) * 1000)
            assert page["versions"], page
    report("a history page of 100 versions (S: all it has)", pages, {"L": "L, from its middle", "S": "S"})


def report(title, timings, labels):
    print(title)
    medians = {}
    for name, values in timings.items():
        values = sorted(values)
        medians[name] = statistics.median(values)
        p10 = values[len(values) // 10]
        p90 = values[len(values) * 9 // 10]
        print(f"  {labels[name]:28} median {medians[name]:7.2f} ms  p10 {p10:7.2f}  p90 {p90:7.2f}")
    print(f"  ratio of the medians L/S: {medians['L'] / medians['S']:.2f}")


if __name__ == "__main__":
    main()
