#!/usr/bin/env bash
# Runs a command (a `swift test` run) with a watchdog: when its output stays silent for FLAKENOTES_QUIET_MINUTES
# (default 10), it prints the tests that started and did not finish, every thread's stack of the test process (gdb),
# kills the run and exits 124. A hung test then fails the run in minutes, with what it was waiting on, instead of
# holding CI until its time limit. Usage: scripts/watched.sh COMMAND [ARGUMENTS...]
set -uo pipefail
quiet=$(( ${FLAKENOTES_QUIET_MINUTES:-10} * 60 ))
log="$(mktemp -t watched.XXXXXX)"
trap 'rm -f "$log"' EXIT
# Line-buffered (stdbuf reaches the test process through the environment): otherwise its last lines sit in a 4 KiB
# buffer when it hangs, and the list below names tests that did finish.
setsid stdbuf -oL -eL "$@" >"$log" 2>&1 &
pid=$!
tail -n +1 -f --pid="$pid" "$log" &
tailer=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 15
  kill -0 "$pid" 2>/dev/null || break
  age=$(( $(date +%s) - $(stat -c %Y "$log") ))
  if [ "$age" -ge "$quiet" ]; then
    sleep 1
    echo "=== watchdog: no output for $((age / 60)) minutes; the tests that started and did not finish:" >&2
    python3 - "$log" >&2 <<'PY'
import re, sys
started, ended = [], set()
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"◇ Test (.+?) started\.", line)
    if m: started.append(m.group(1))
    m = re.search(r"[✔✘] Test (.+?) (passed|failed)", line)
    if m: ended.add(m.group(1))
for name in started:
    if not name.startswith("case ") and name not in ended and not any(e.startswith(name + " with ") for e in ended):
        print("  " + name)
PY
    for tests in $(pgrep -f 'PackageTests\.xctest' || true); do
      echo "=== watchdog: threads of the test process $tests" >&2
      if command -v gdb >/dev/null; then
        timeout 120 gdb -p "$tests" -batch -ex "thread apply all bt 25" 2>/dev/null | grep -E '^(Thread|#)' >&2 || true
      fi
      echo "=== its children:" >&2
      ps -o pid,stat,etime,args --ppid "$tests" >&2 || true
      # swift test starts it in a process group of its own: the group kill below does not reach it.
      pkill -KILL -P "$tests" 2>/dev/null || true
      kill -KILL "$tests" 2>/dev/null || true
    done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    kill "$tailer" 2>/dev/null
    exit 124
  fi
done
wait "$pid"
status=$?
wait "$tailer" 2>/dev/null
exit "$status"
