#!/usr/bin/env bash
# Runs the shared note-sync workload against a release-built notesyncd (SQLite) on loopback.
#   bash Benchmarks/loadgen/run.sh                       # full workload, 1M-note growth phase
#   WORKLOAD_ARGS="--n-push 2000 --big-store 0" bash Benchmarks/loadgen/run.sh   # smoke test
# Env: PORT (default 18080), DATABASE (default sqlite; a postgres:// URL for the PostgreSQL store),
#      DAEMONS (default 1; with a postgres URL, several daemons on consecutive ports behind no balancer:
#      the workload's accounts are spread by the adapter option), OUT (results dir, default /tmp/notesyncd-bench).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
workload="${WORKLOAD:-$root/../shared/bench/kinto/workload.py}"
[ -f "$workload" ] || { echo "workload.py not found at $workload (set WORKLOAD)" >&2; exit 1; }
cd "$root"
swift build -c release --product notesyncd >&2
bin="$(swift build -c release --show-bin-path)"
port="${PORT:-18080}"
out="${OUT:-/tmp/notesyncd-bench}"
data="$(mktemp -d /tmp/notesyncd-bench-data.XXXXXX)"
mkdir -p "$out"
db_args=()
[ -n "${DATABASE:-}" ] && db_args=(--database "$DATABASE")
"$bin/notesyncd" --data-dir "$data" --port "$port" --bcrypt-cost 10 --log-level warning "${db_args[@]}" \
  > "$out/notesyncd.out" 2> "$out/notesyncd.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 200); do grep -q "listening on" "$out/notesyncd.out" 2>/dev/null && break; sleep 0.05; done
grep -q "listening on" "$out/notesyncd.out" || { cat "$out/notesyncd.log" >&2; exit 1; }
echo "notesyncd pid $pid, data $data" >&2
PYTHONPATH="$(dirname "$workload")" python3 "$workload" \
  --adapter-file "$root/Benchmarks/loadgen/notesyncd_adapter.py:NotesyncdAdapter" \
  --url "http://127.0.0.1:$port" --label "notesyncd ${DATABASE:-sqlite}" --server-pids "$pid" \
  --big-store "${BIG_STORE:-1000000}" --big-store-budget-s "${BIG_BUDGET:-300}" ${WORKLOAD_ARGS:-} \
  | tee "$out/result.txt"
