#!/usr/bin/env python3
"""A/B latency of one-note pushes on two running daemons under the same load: one client alternates its requests
between them (standard library only). Start each daemon on its own port and data directory, with `--sign-up open`
(it signs up its account), then:

  python3 Benchmarks/loadgen/wrk/interleave.py http://127.0.0.1:PORT_A http://127.0.0.1:PORT_B [N]

Prints p50, p90 and mean latency per daemon over N pushes each (default 2,000; the first 50 are warm-up).
"""

import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import helper  # noqa: E402


def main():
    urls, n = sys.argv[1:3], int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    clients = []
    for url in urls:
        c = helper.Client(url)
        c.call("POST", "/v1/accounts", {"username": "interleave", "password": "bench-password"}, ok=(201, 409))
        origin = str(random.randrange(1, 2**62))
        out = c.call("POST", "/v1/sessions", {"username": "interleave", "password": "bench-password",
                                              "deviceName": "interleave", "origin": origin})
        clients.append((helper.Client(url, out["token"]), origin))
    latencies = [[], []]
    base = 10**17 + random.randrange(10**16)
    for i in range(n):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            client, origin = clients[k]
            change = {"clientID": str(base + i * 1024), "editID": str(base + i * 1024 + 1), "origin": origin,
                      "text": "x" * 200}
            start = time.perf_counter()
            client.call("POST", "/v1/notes/push", {"changes": [change]})
            latencies[k].append(time.perf_counter() - start)
    for url, values in zip(urls, latencies):
        values = sorted(values[50:])
        print(f"{url}  p50 {1000 * values[len(values) // 2]:.3f} ms  p90 {1000 * values[int(len(values) * 0.9)]:.3f} ms"
              f"  mean {1000 * statistics.mean(values):.3f} ms")


if __name__ == "__main__":
    main()
