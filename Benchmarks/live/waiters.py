#!/usr/bin/env python3
"""Idle waiting pulls on one notesyncd: memory per waiter, and push/pull latency with and without them.

Starts a release notesyncd (SQLite, fresh data directory) with room for the waiters (--max-connections,
--max-waiters), signs up enough accounts (64 waiters each, the default per-account limit), then in one sitting:

  A. baseline: single-note pushes and incremental pulls of a separate account, p50/p99 latency;
  B. opens N connections each holding `GET /v1/notes/changes?wait=55` (asyncio, in a child process), checks that
     none was answered or refused, reads the daemon's RSS (/proc/PID/status VmRSS) and runs phase A's
     measurement again while they wait;
  C. closes the waiters and runs the measurement a third time.

Prints one JSON object. Needs `ulimit -n` above N + a few hundred in both this process and the daemon (the script
raises its soft limit to the hard limit; the daemon inherits it).

  python3 Benchmarks/live/waiters.py --daemon .build/release/notesyncd --waiters 10000
"""
import argparse, asyncio, http.client, json, multiprocessing, os, random, resource, subprocess, sys, tempfile, time

from notesync_http import account as signed_up, call as request, connect, percentile


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def account(port, name):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    token = signed_up(conn, name)
    conn.close()
    return token


def measure(port, token, count, rng):
    """`count` single-note pushes, each followed by an incremental pull: latencies in ms."""
    conn = connect(port)
    _, page = request(conn, "GET", "/v1/notes/changes?limit=1000", token=token)
    cursor = page["cursor"]
    while page["hasMore"]:
        _, page = request(conn, "GET", f"/v1/notes/changes?since={cursor}&limit=1000", token=token)
        cursor = page["cursor"]
    pushes, pulls = [], []
    origin = str(rng.randrange(1, 2**62))
    for i in range(count):
        change = {"clientID": str(rng.randrange(1, 2**62)), "origin": origin, "editID": str(rng.randrange(1, 2**62)),
                  "text": f"note {i}\n", "deleted": False}
        t = time.perf_counter()
        status, _ = request(conn, "POST", "/v1/notes/push", {"changes": [change]}, token=token)
        pushes.append((time.perf_counter() - t) * 1000)
        assert status == 200, status
        t = time.perf_counter()
        status, page = request(conn, "GET", f"/v1/notes/changes?since={cursor}", token=token)
        pulls.append((time.perf_counter() - t) * 1000)
        assert status == 200 and len(page["changes"]) == 1, (status, page)
        cursor = page["cursor"]
    conn.close()

    return {"push_p50_ms": percentile(pushes, 0.5), "push_p99_ms": percentile(pushes, 0.99),
            "pull_p50_ms": percentile(pulls, 0.5), "pull_p99_ms": percentile(pulls, 0.99)}


async def hold(port, tokens, per_token, ready, release, idle):
    """Opens len(tokens) * per_token waiting pulls; reports how many are held, then waits for `release`."""
    writers, readers = [], []
    for token in tokens:
        for _ in range(per_token):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            if not idle:
                writer.write(f"GET /v1/notes/changes?wait=55 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
            writers.append(writer)
            readers.append(reader)
    for writer in writers:
        await writer.drain()
    await asyncio.sleep(1.0)
    answered = 0
    for reader in readers:
        # Anything already readable means the daemon answered (429, or a page) instead of holding the pull.
        if reader._buffer or reader.at_eof():
            answered += 1
    ready.put({"opened": len(writers), "answered_early": answered})
    await asyncio.get_running_loop().run_in_executor(None, release.get)
    for writer in writers:
        writer.close()


def holder(port, tokens, per_token, ready, release, idle):
    asyncio.run(hold(port, tokens, per_token, ready, release, idle))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--waiters", type=int, default=10000)
    parser.add_argument("--per-account", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--port", type=int, default=18480)
    parser.add_argument("--idle", action="store_true", help="open the connections but send nothing (what a connection alone costs)")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    data = tempfile.mkdtemp(prefix="notesyncd-waiters.")
    accounts = (args.waiters + args.per_account - 1) // args.per_account
    daemon = subprocess.Popen(
        [args.daemon, "--port", str(args.port), "--data-dir", data, "--bcrypt-cost", "4", "--log-level", "error",
         "--max-connections", str(args.waiters + 1000), "--max-waiters", str(args.waiters),
         "--max-waiters-per-account", str(args.per_account)],
        # Sign-up is closed by default; the environment (not the flag) opens it so that older binaries still start.
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, NOTESYNCD_SIGN_UP="open"))
    try:
        while "notesyncd listening" not in daemon.stdout.readline():
            assert daemon.poll() is None, "notesyncd exited"
        rng = random.Random(19)
        bench = account(args.port, "bench")
        tokens = [account(args.port, f"waiter{i}") for i in range(accounts)]
        per_token = args.per_account
        rss_idle = rss_kib(daemon.pid)
        result = {"waiters": accounts * per_token, "accounts": accounts, "fd_limit": hard, "idle_connections_only": args.idle}
        result["A_baseline"] = measure(args.port, bench, args.requests, rng)
        rss_before = rss_kib(daemon.pid)
        ready, release = multiprocessing.Queue(), multiprocessing.Queue()
        child = multiprocessing.Process(target=holder, args=(args.port, tokens, per_token, ready, release, args.idle))
        child.start()
        held = ready.get(timeout=120)
        time.sleep(1.0)
        rss_with = rss_kib(daemon.pid)
        result["held"] = held
        result["B_with_waiters"] = measure(args.port, bench, args.requests, rng)
        result["rss_kib"] = {"idle_after_signups": rss_idle, "before_waiters": rss_before, "with_waiters": rss_with,
                             "after_phase_B": rss_kib(daemon.pid)}
        result["kib_per_waiter"] = round((rss_with - rss_before) / max(1, held["opened"]), 2)
        release.put(True)
        child.join(timeout=120)
        time.sleep(1.0)
        result["C_after"] = measure(args.port, bench, args.requests, rng)
        result["rss_kib"]["after_waiters_closed"] = rss_kib(daemon.pid)
        result["loadavg"] = open("/proc/loadavg").read().split()[:3]
        print(json.dumps(result, indent=1))
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        subprocess.run(["rm", "-rf", data])


if __name__ == "__main__":
    main()
