#!/usr/bin/env python3
"""Attachments (issue 33): a large file through a release `notesyncd` on loopback, as whole processes.

In one sitting, on one fresh data directory (SQLite, or --database postgres://...):
1. curl: the file's chunks (split and hashed beforehand, not timed) PUT by one curl process over one keep-alive
   connection, to a fresh account: the floor of the same bytes to the same daemon.
2. upload: `AttachmentTransfer upload` (NotesClient: reads and hashes the file into its chunk cache, asks `missing`,
   PUTs one chunk at a time) to another fresh account. Ratio = curl's time / upload's time (target >= 0.7).
   Runs 1 and 2 alternate --runs times, each on fresh accounts; medians are reported. With --baseline-client, a
   second build's upload runs after them in every round (the before of a change, in the same sitting).
3. resume: a fresh account's upload killed (SIGKILL) once half the chunks are acknowledged, then run again: chunks
   sent by the second run (target: <= 1 more than the remaining half).
4. the same file again (a second note): chunks sent (target 0).
5. download: `AttachmentTransfer download` on a fresh home (every chunk fetched, checked, assembled).
Peak resident memory: each client process's and each curl's (wait4's ru_maxrss) and the daemon's (VmHWM, which
counts its whole life, so it is read after each phase on a daemon started for the benchmark). The load average
(1, 5, 15 minutes) is recorded at the start and the end: the machine may be shared.

  swift build -c release --product notesyncd
  swift build -c release --package-path Benchmarks --scratch-path Benchmarks/.build-bench --product AttachmentTransfer
  python3 Benchmarks/attachments/bench.py --daemon .build/release/notesyncd \
      --client Benchmarks/.build-bench/release/AttachmentTransfer --size-mib 1024 --runs 3
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

PASSWORD = "correct horse battery"
MIB = 1 << 20


def vmhwm_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run_client(client, args, kill_after_chunks=None):
    """Runs AttachmentTransfer; returns (wall seconds, peak RSS KiB, stdout lines, exit status)."""
    started = time.monotonic()
    process = subprocess.Popen([client] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stdout:
        lines.append(line.strip())
        if kill_after_chunks is not None and line.startswith("chunk ") and int(line.split()[1]) >= kill_after_chunks:
            process.send_signal(signal.SIGKILL)
            break
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = status
    elapsed = time.monotonic() - started
    error = process.stderr.read()
    if kill_after_chunks is None and status != 0:
        sys.exit(f"AttachmentTransfer {' '.join(args)} failed: {error}")
    run_client.cpu = usage.ru_utime + usage.ru_stime
    return elapsed, usage.ru_maxrss, lines, status


def sign_in_token(url, username):
    request = urllib.request.Request(
        url + "/v1/sessions", data=json.dumps({"username": username, "password": PASSWORD}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)["token"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--database", default="sqlite")
    parser.add_argument("--work", default=None, help="directory for the data (default: a temporary one)")
    parser.add_argument("--baseline-client", action="append", default=[],
                        help="another AttachmentTransfer build, run after --client in every round (before/after in one "
                             "sitting); may be given more than once")
    options = parser.parse_args()

    work = options.work or tempfile.mkdtemp(prefix="attach-bench-")
    os.makedirs(work, exist_ok=True)
    source = os.path.join(work, "file.bin")
    pieces = os.path.join(work, "pieces")
    os.makedirs(pieces, exist_ok=True)
    hashes = []
    with open(source, "wb") as out:
        for _ in range(options.size_mib):
            chunk = os.urandom(MIB)
            out.write(chunk)
            digest = hashlib.sha256(chunk).hexdigest()
            hashes.append(digest)
            with open(os.path.join(pieces, digest), "wb") as piece:
                piece.write(chunk)

    data = os.path.join(work, "data")
    daemon = subprocess.Popen(
        [options.daemon, "--port", "0", "--data-dir", data, "--database", options.database, "--sign-up", "open",
         "--bcrypt-cost", "4", "--log-level", "error", "--max-bytes-per-account", str(64 << 30)],
        stdout=subprocess.PIPE, text=True)
    url = daemon.stdout.readline().strip().split(" ")[-1]
    results = {"size_mib": options.size_mib, "database": options.database.split("@")[-1], "curl": [], "upload": [],
               "load_average_start": os.getloadavg()}
    homes = [0]

    def fresh_account():
        homes[0] += 1
        home = os.path.join(work, f"home{homes[0]}")
        run_client(options.client, ["signup", home, url, f"user{homes[0]}", PASSWORD])
        return home, f"user{homes[0]}"

    try:
        for run in range(options.runs):
            _, username = fresh_account()
            token = sign_in_token(url, username)
            config = os.path.join(work, "curl.conf")
            with open(config, "w") as conf:
                for index, digest in enumerate(hashes):
                    if index:
                        conf.write("next\n")
                    conf.write(f'url = "{url}/v1/chunks/{digest}"\nupload-file = "{os.path.join(pieces, digest)}"\n'
                               f'header = "Authorization: Bearer {token}"\n'
                               'header = "Content-Type: application/octet-stream"\n'
                               # curl sends `Expect: 100-continue` with each PUT; notesyncd answers it at once.
                               'silent\noutput = "/dev/null"\n')
            started = time.monotonic()
            curl = subprocess.Popen(["curl", "--config", config])
            _, status, usage = os.wait4(curl.pid, 0)
            results["curl"].append(time.monotonic() - started)
            results.setdefault("curl_rss_kib", []).append(usage.ru_maxrss)
            if status != 0:
                sys.exit(f"curl failed: status {status}")

            results.setdefault("curl_cpu_s", []).append(usage.ru_utime + usage.ru_stime)

            home, _ = fresh_account()
            elapsed, rss, lines, _ = run_client(options.client, ["upload", home, source, os.path.join(work, "manifest.json")])
            results["upload"].append(elapsed)
            results.setdefault("upload_rss_kib", []).append(rss)
            results.setdefault("upload_cpu_s", []).append(run_client.cpu)
            print(f"run {run + 1}: curl {results['curl'][-1]:.2f} s, upload {elapsed:.2f} s "
                  f"(CPU {run_client.cpu:.2f} s; {lines[-1]})", flush=True)
            for index, baseline in enumerate(options.baseline_client):
                home, _ = fresh_account()
                elapsed, rss, lines, _ = run_client(baseline, ["upload", home, source, os.path.join(work, "manifest-b.json")])
                results.setdefault(f"baseline{index + 1}_upload", []).append(elapsed)
                results.setdefault(f"baseline{index + 1}_upload_cpu_s", []).append(run_client.cpu)
                results.setdefault(f"baseline{index + 1}_upload_rss_kib", []).append(rss)
                print(f"run {run + 1}: baseline {index + 1} upload {elapsed:.2f} s (CPU {run_client.cpu:.2f} s)", flush=True)
        results["daemon_vmhwm_after_uploads_kib"] = vmhwm_kib(daemon.pid)

        # Resume after a kill at 50 %.
        home, _ = fresh_account()
        half = len(hashes) // 2
        _, _, killed_lines, _ = run_client(
            options.client, ["upload", home, source, os.path.join(work, "m2.json")], kill_after_chunks=half)
        acknowledged = max(int(line.split()[1]) for line in killed_lines if line.startswith("chunk "))
        _, _, lines, _ = run_client(options.client, ["upload", home, source, os.path.join(work, "m2.json")])
        resumed = json.loads(lines[-1])
        results["resume"] = {"chunks": len(hashes), "acknowledged_before_kill": acknowledged,
                             "sent_after": resumed["transferred"], "skipped_after": resumed["skipped"],
                             "more_than_remaining": resumed["transferred"] - (len(hashes) - acknowledged)}
        # The same file again.
        _, _, lines, _ = run_client(options.client, ["upload", home, source, os.path.join(work, "m3.json")])
        results["second_note_chunks_sent"] = json.loads(lines[-1])["transferred"]

        # Download into an empty chunk cache: the uploading device's home without its cache (same session).
        device = os.path.join(work, "device")
        saved = os.path.join(work, "saved.bin")
        shutil.copytree(home, device, ignore=shutil.ignore_patterns("chunks"))
        elapsed, rss, lines, _ = run_client(options.client, ["download", device, os.path.join(work, "m2.json"), saved])
        results["download"] = {"seconds": elapsed, "rss_kib": rss, "summary": json.loads(lines[-1])}
        with open(saved, "rb") as a, open(source, "rb") as b:
            same = hashlib.sha256(a.read()).digest() == hashlib.sha256(b.read()).digest()
        results["download"]["identical"] = same
        results["daemon_vmhwm_end_kib"] = vmhwm_kib(daemon.pid)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()

    results["load_average_end"] = os.getloadavg()
    curl = statistics.median(results["curl"])
    upload = statistics.median(results["upload"])
    results["ratio_curl_over_upload"] = curl / upload
    for index in range(len(options.baseline_client)):
        times = results[f"baseline{index + 1}_upload"]
        results[f"ratio_curl_over_baseline{index + 1}_upload"] = curl / statistics.median(times)
        results[f"ratio_upload_over_baseline{index + 1}_run_by_run"] = [a / b for a, b in zip(results["upload"], times)]
    print(json.dumps(results, indent=2))
    if not options.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
