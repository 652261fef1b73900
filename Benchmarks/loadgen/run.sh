#!/usr/bin/env bash
# Runs the shared note-sync workload (shared/bench/kinto/workload.py) against release-built notesyncd on loopback.
#   bash Benchmarks/loadgen/run.sh                                                  # full workload, grows to 1M notes
#   WORKLOAD_ARGS="--n-push 2000 --big-store 0" bash Benchmarks/loadgen/run.sh      # smoke test (about 20 s)
#   DATABASE=postgres://user@127.0.0.1:5432/notes DAEMONS=2 bash Benchmarks/loadgen/run.sh
# Env:
#   PORT       first daemon's port (default 18080; daemon i listens on PORT+i)
#   DATABASE   passed to every daemon as --database (default: none, i.e. SQLite in a fresh temporary data directory)
#   DAEMONS    number of daemons (default 1). More than one needs a shared database (DATABASE=postgres://...): the
#              daemons lease their instance numbers from it and the adapter spreads the workload's accounts over them
#              round-robin (NOTESYNCD_BENCH_URLS), each account staying on one daemon
#   OUT        results directory (default /tmp/notesyncd-bench): result.txt (table + JSON), result.json (the JSON
#              line), workload.log (every phase as JSON), loadavg.txt, notesyncd-<i>.log
#   BIG_STORE  size the main account grows to through the API (default 1000000; 0 skips the growth phase)
#   BIG_BUDGET seconds allowed for that growth (default 600; the JSON says budget_hit if it stopped early)
#   WORKLOAD_ARGS  extra workload.py flags (see python3 workload.py --help)
#   WORKLOAD   path of workload.py (default ../shared/bench/kinto/workload.py beside the repository)
#   LOADGEN_PYTHON  interpreter of the load generator (default python3)
#   DAEMON     another notesyncd binary to measure (e.g. an older build, for an A/B comparison in one sitting;
#              implies NO_BUILD)
#   NO_BUILD   1 = use the release binary already built (skips `swift build`, whose CPU would still be in the
#              load average when the workload starts)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
workload="${WORKLOAD:-$root/../shared/bench/kinto/workload.py}"
[ -f "$workload" ] || { echo "workload.py not found at $workload (set WORKLOAD)" >&2; exit 1; }
port="${PORT:-18080}"
daemons="${DAEMONS:-1}"
out="${OUT:-/tmp/notesyncd-bench}"
python="${LOADGEN_PYTHON:-python3}"
if [ "$daemons" -gt 1 ] && [[ "${DATABASE:-sqlite}" != postgres* ]]; then
  echo "DAEMONS=$daemons needs a shared database: set DATABASE=postgres://... (one daemon per SQLite file)" >&2
  exit 64
fi

cd "$root"
[ "${NO_BUILD:-0}" = 1 ] || [ -n "${DAEMON:-}" ] || swift build -c release --product notesyncd >&2
daemon="${DAEMON:-$(swift build -c release --show-bin-path)/notesyncd}"
[ -x "$daemon" ] || { echo "no release notesyncd at $daemon (run without NO_BUILD=1)" >&2; exit 1; }
mkdir -p "$out"
data="$(mktemp -d /tmp/notesyncd-bench-data.XXXXXX)"
db_args=()
[ -z "${DATABASE:-}" ] || db_args=(--database "$DATABASE")

pids=() urls=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Daemons start one after another (each migrates a shared database only once the previous one is up).
for i in $(seq 0 $((daemons - 1))); do
  p=$((port + i))
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p on 127.0.0.1 is busy (set PORT)" >&2; exit 1; fi
  mkdir -p "$data/$i"
  # bcrypt cost 10: sign-up and sign-in are untimed setup; every other option is the daemon's default
  # (SQLite in WAL mode with synchronous=FULL: each acknowledged push is fsynced).
  # With PostgreSQL each daemon leases its instance number from the database (--instance is refused there).
  instance_args=(--instance "$i")
  [ -z "${DATABASE:-}" ] || [ "${DATABASE}" = sqlite ] || instance_args=()
  # The workload signs up, and stores a million notes in one account: past the default per-account quota (issue 18).
  # Environment variables, so an older notesyncd in an A/B comparison ignores them.
  NOTESYNCD_SIGN_UP=open NOTESYNCD_MAX_NOTES_PER_ACCOUNT=1000000000 NOTESYNCD_MAX_BYTES_PER_ACCOUNT=1000000000000 \
    "$daemon" --data-dir "$data/$i" --port "$p" "${instance_args[@]}" --bcrypt-cost 10 --log-level warning \
    "${db_args[@]}" > "$out/notesyncd-$i.out" 2> "$out/notesyncd-$i.log" &
  pids+=($!)
  urls+=("http://127.0.0.1:$p")
  for _ in $(seq 1 400); do
    grep -q "listening on" "$out/notesyncd-$i.out" 2>/dev/null && break
    kill -0 "${pids[$i]}" 2>/dev/null || break
    sleep 0.05
  done
  grep -q "listening on" "$out/notesyncd-$i.out" || { echo "notesyncd $i did not start:" >&2; cat "$out/notesyncd-$i.log" >&2; exit 1; }
done
server_pids="$(IFS=,; echo "${pids[*]}")"
export NOTESYNCD_BENCH_URLS="$(IFS=,; echo "${urls[*]}")"
load="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "$(date -u +%FT%TZ) loadavg before: $load" | tee "$out/loadavg.txt" >&2
echo "notesyncd pid(s) $server_pids, data $data, urls $NOTESYNCD_BENCH_URLS" >&2
label="notesyncd $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), $( [ -n "${DATABASE:-}" ] && sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$DATABASE" || echo "sqlite WAL synchronous=FULL"), $daemons daemon(s); loadavg before $load"

# shellcheck disable=SC2086
"$python" "$workload" \
  --adapter-file "$root/Benchmarks/loadgen/notesyncd_adapter.py:NotesyncdAdapter" \
  --url "${urls[0]}" --label "$label" --server-pids "$server_pids" \
  --big-store "${BIG_STORE:-1000000}" --big-store-budget-s "${BIG_BUDGET:-600}" ${WORKLOAD_ARGS:-} \
  2> >(tee "$out/workload.log" >&2) | tee "$out/result.txt"
tail -n 1 "$out/result.txt" > "$out/result.json"
echo "$(date -u +%FT%TZ) loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/loadavg.txt" >&2
