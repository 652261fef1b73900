#!/usr/bin/env bash
# A second measurement of notesyncd with a compiled load generator (wrk + Lua, Debian package `wrk`), to show what
# the server does when the Python load generator of run.sh is the limit. Same shapes as the workload: ~200-byte
# notes, pushes of 100 and of 1, 8 accounts pushing batches of 50, full pulls in pages of 1,000, incremental pulls of
# 100 modified notes at 10k and at 1M notes. Each timed phase runs for DURATION seconds instead of a fixed count.
#   bash Benchmarks/loadgen/wrk.sh            # about 3 minutes
# Env: DAEMON_ARGS (more daemon flags, e.g. "--metrics-address 127.0.0.1:9464"), PORT (default 18090), OUT (default /tmp/notesyncd-wrk), DURATION (default 10), BIG (default 1000000),
#      NO_BUILD=1 (use the release binary already built), DAEMON=/path/to/notesyncd (another binary, e.g. an
#      older build for an A/B comparison in one sitting; implies NO_BUILD), ONLY=push (stop after the push phases).
# Output: $OUT/wrk.json (one object per phase, plus the load average and CPU seconds of the daemon and of wrk).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/Benchmarks/loadgen/wrk"
port="${PORT:-18090}"
out="${OUT:-/tmp/notesyncd-wrk}"
dur="${DURATION:-10}"
big="${BIG:-1000000}"
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)" >&2; exit 1; }
cd "$root"
[ "${NO_BUILD:-0}" = 1 ] || [ -n "${DAEMON:-}" ] || swift build -c release --product notesyncd >&2
daemon="${DAEMON:-$(swift build -c release --show-bin-path)/notesyncd}"
mkdir -p "$out"
data="$(mktemp -d /tmp/notesyncd-wrk-data.XXXXXX)"
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "port $port is busy (set PORT)" >&2; exit 1; fi
# The workload signs up, and stores a million notes in one account: past the default per-account quota (issue 18).
# Environment variables, so an older notesyncd in an A/B comparison ignores them.
NOTESYNCD_SIGN_UP=open NOTESYNCD_MAX_NOTES_PER_ACCOUNT=1000000000 NOTESYNCD_MAX_BYTES_PER_ACCOUNT=1000000000000 \
  "$daemon" --data-dir "$data" --port "$port" --bcrypt-cost 10 --log-level warning ${DAEMON_ARGS:-} \
  > "$out/notesyncd.out" 2> "$out/notesyncd.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 400); do grep -q "listening on" "$out/notesyncd.out" 2>/dev/null && break; sleep 0.05; done
grep -q "listening on" "$out/notesyncd.out" || { cat "$out/notesyncd.log" >&2; exit 1; }
url="http://127.0.0.1:$port"
helper() { python3 "$here/helper.py" "$url" "$@"; }
results="$out/wrk.jsonl"
: > "$results"

# Server CPU seconds (utime+stime of the daemon) and machine busy %, around each phase.
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
busy() { awk 'NR==1 {print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
phase() {  # phase NAME WRK-ARGS... ; env for the Lua script must be exported by the caller
  local name="$1"; shift
  local load c0 b0 c1 b1 line
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  c0="$(cpu)"; b0="$(busy)"
  line="$(wrk "$@" "$url" | tee -a "$out/wrk.txt" | sed -n 's/^WRKJSON //p')"
  c1="$(cpu)"; b1="$(busy)"
  python3 - "$name" "$line" "$load" "$c0" "$c1" "$b0" "$b1" "$(getconf CLK_TCK)" >> "$results" <<'EOF'
import json, sys
name, line, load, c0, c1, b0, b1, tck = sys.argv[1:]
r = json.loads(line)
b0, b1 = [list(map(int, x.split())) for x in (b0, b1)]
r.update(phase=name, loadavg_before=load,
         server_cpu_pct=round(100 * (int(c1) - int(c0)) / int(tck) / r["wall_s"], 1),
         machine_busy_pct=round(100 * (b1[0] - b0[0]) / max(1, b1[1] - b0[1]), 1))
print(json.dumps(r))
EOF
  tail -n 1 "$results" >&2
}

read -r tok_push org_push <<<"$(helper account wrk-push)"
read -r tok_one org_one <<<"$(helper account wrk-one)"
read -r tok_10k org_10k <<<"$(helper account wrk-10k)"
read -r tok_big org_big <<<"$(helper account wrk-big)"
tokens="" origins=""
for i in $(seq 0 7); do
  read -r t o <<<"$(helper account "wrk-c$i")"
  tokens="$tokens${tokens:+,}$t"; origins="$origins${origins:+,}$o"
done

# warm-up (untimed): code paths, statement caches
TOKEN="$tok_push" ORIGIN="$org_push" BATCH=100 RUN=99 wrk -t1 -c1 -d2s -s "$here/push.lua" "$url" > /dev/null

export RUN=1
TOKEN="$tok_push" ORIGIN="$org_push" BATCH=100 phase push_b100 -t1 -c1 -d"${dur}s" --timeout 10s -s "$here/push.lua"
TOKEN="$tok_one" ORIGIN="$org_one" BATCH=1 phase push_b1 -t1 -c1 -d"${dur}s" --timeout 10s -s "$here/push.lua"
TOKENS="$tokens" ORIGINS="$origins" BATCH=50 phase concurrent_8_b50 -t8 -c8 -d"${dur}s" --timeout 10s -s "$here/push.lua"

if [ "${ONLY:-}" != push ]; then

helper seed "$tok_10k" "$org_10k" 10000 >/dev/null
TOKEN="$tok_10k" phase "pull_full@10k" -t1 -c1 -d"${dur}s" --timeout 10s -s "$here/pull.lua"
since="$(helper modify "$tok_10k" "$org_10k" 100)"
TOKEN="$tok_10k" SINCE="$since" PHASE="pull_incr@10k" phase "pull_incr@10k" -t1 -c1 -d"${dur}s" -s "$here/pull.lua"

echo "seeding $big notes through the API (batches of 1,000)..." >&2
t0=$(date +%s)
helper seed "$tok_big" "$org_big" "$big" >/dev/null
echo "seeded in $(( $(date +%s) - t0 )) s" >&2
TOKEN="$tok_big" phase "pull_full@$((big / 1000))k" -t1 -c1 -d"${dur}s" --timeout 10s -s "$here/pull.lua"
since="$(helper modify "$tok_big" "$org_big" 100)"
TOKEN="$tok_big" SINCE="$since" PHASE="pull_incr@$((big / 1000))k" phase "pull_incr@$((big / 1000))k" -t1 -c1 -d"${dur}s" -s "$here/pull.lua"
fi

python3 - "$results" "$out/wrk.json" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" <<'EOF'
import json, sys, datetime, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
doc = {"schema": "notesyncd-wrk/1", "commit": sys.argv[3], "tool": "wrk 4.1 + Lua (Benchmarks/loadgen/wrk)",
       "database": "sqlite WAL synchronous=FULL", "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "cpus": os.cpu_count(), "phases": {r["phase"]: r for r in rows}}
open(sys.argv[2], "w").write(json.dumps(doc) + "\n")
print(json.dumps(doc))
EOF
