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
    unfinished="$(python3 - "$log" <<'PY'
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
)"
    echo "=== watchdog: no output for $((age / 60)) minutes; the tests that started and did not finish:" >&2
    echo "$unfinished" >&2
    summary=""
    for tests in $(pgrep -s "$pid" -f 'PackageTests\.xctest' || true); do
      echo "=== watchdog: threads of the test process $tests" >&2
      if command -v gdb >/dev/null; then
        stacks="$(timeout 120 gdb -p "$tests" -batch -ex "thread apply all bt 25" 2>/dev/null | grep -E '^(Thread|#)')"
        echo "$stacks" >&2
        # One line for each place in the project's own code (not its dependencies) where threads wait, with a count:
        # the full stacks above scroll away in a log that shows only its end.
        summary+="$(printf '%s\n' "$stacks" | python3 -c '
import collections, re, subprocess, sys
places, seen = collections.Counter(), False
for line in sys.stdin:
    if line.startswith("Thread"):
        seen = False
        continue
    m = re.search(r" in (\S+) \(.*\) at (\S+):(\d+)$", line.rstrip())
    if seen or not m or "/.build/" in m.group(2) or not re.search(r"/(Sources|Server|Client|Tests|Simulation)/", m.group(2)):
        continue
    seen = True
    name = m.group(1)
    try:
        name = subprocess.run(["swift", "demangle", "--simplified", "--compact", name], capture_output=True,
                              text=True, timeout=20).stdout.strip() or name
    except Exception:
        pass
    places["/".join(m.group(2).split("/")[-2:]) + ":" + m.group(3) + " " + name[:160]] += 1
for place, count in places.most_common(25):
    print("  %3d × %s" % (count, place))
')"$'\n'
      fi
      echo "=== its children:" >&2
      ps -o pid,stat,etime,args --ppid "$tests" >&2 || true
      # swift test starts it in a process group of its own: the group kill below does not reach it.
      pkill -KILL -P "$tests" 2>/dev/null || true
      kill -KILL "$tests" 2>/dev/null || true
    done
    # The end of the log is what a CI page shows: the essentials again, last.
    echo "=== watchdog: the threads waiting in the project's code (count × file:line function):" >&2
    printf '%s' "$summary" >&2
    echo "=== watchdog: the last lines before the silence:" >&2
    tail -n 8 "$log" | cut -c1-240 >&2
    echo "=== watchdog: no output for $((age / 60)) minutes; the tests that started and did not finish:" >&2
    echo "$unfinished" >&2
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
