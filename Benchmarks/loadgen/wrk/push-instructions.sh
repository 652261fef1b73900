#!/usr/bin/env bash
# Instructions the daemon executes per push, counted by valgrind's callgrind (repeatable whatever else the machine
# runs, unlike CPU time on a loaded machine): starts DAEMON under callgrind with ARGS, runs a fixed push workload
# twice as large in a second run, and prints the difference per push: (Ir(2N) - Ir(N)) / N, so start-up and
# shutdown cancel out. Used for the cost of --metrics-address (Docs/PERFORMANCE.md).
#
#   push-instructions.sh DAEMON [ARGS...]       env: N (default 200 single-note pushes + N/10 pushes of 100 notes)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
daemon="$1"; shift
n="${N:-200}"
work="$(mktemp -d /tmp/notesyncd-ir.XXXXXX)"
trap 'rm -rf "$work"' EXIT
count() {  # count PUSHES -> total Ir of one daemon run
  local pushes="$1" port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
  rm -rf "$work/data" "$work/cg.out"
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$daemon" --data-dir "$work/data" --port "$port" \
    --bcrypt-cost 4 --log-level warning --sign-up open "$@" >"$work/out" 2>"$work/log" &
  local pid=$!
  for _ in $(seq 1 600); do grep -q "listening on" "$work/out" 2>/dev/null && break; sleep 0.1; done
  python3 - "http://127.0.0.1:$port" "$pushes" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[0] and __import__("os").environ.get("HERE", "."))
import helper
url, n = sys.argv[1], int(sys.argv[2])
c = helper.Client(url)
c.call("POST", "/v1/accounts", {"username": "ir", "password": "bench-password"}, ok=(201,))
origin = str(random.randrange(1, 2**62))
token = c.call("POST", "/v1/sessions", {"username": "ir", "password": "bench-password", "origin": origin})["token"]
c = helper.Client(url, token)
base = 10**17
k = 0
for i in range(n):
    c.call("POST", "/v1/notes/push", {"changes": [{"clientID": str(base + k * 1024), "editID": str(base + k * 1024 + 1),
                                                   "origin": origin, "text": "x" * 200}]})
    k += 1
for i in range(n // 10):
    changes = []
    for _ in range(100):
        changes.append({"clientID": str(base + k * 1024), "editID": str(base + k * 1024 + 1), "origin": origin, "text": "y" * 200})
        k += 1
    c.call("POST", "/v1/notes/push", {"changes": changes})
PY
  kill -TERM "$pid"; wait "$pid" || true
  awk '/^summary:/ {print $2}' "$work/cg.out"
}
export HERE="$here"
one=$(count "$n" "$@")
two=$(count "$((2 * n))" "$@")
python3 -c "import sys; one, two, n = map(int, sys.argv[1:]); print(f'Ir N={n}: {one:,}  2N: {two:,}  per push (of which 1 in 11 carries 100 notes): {(two - one) / (n + n // 10):,.0f}')" "$one" "$two" "$n"
