#!/usr/bin/env bash
# The main job on a fresh Debian machine: installs what is missing, builds (release), starts notesyncd with its
# embedded SQLite on 127.0.0.1:${PORT:-8080}, creates the demo account with the operator command (`notesyncd users
# add`: sign-up stays closed, the daemon's default), signs a demo client in, and keeps the daemon in the foreground.
# Data: ./.data/server (daemon), ./.data/client (the demo client's NOTES_HOME). Ctrl-C stops the daemon cleanly
# and exits 0. A second run reuses the release build (nothing is compiled again unless a source changed); a run on
# another PORT signs the demo client in to that server (same account, same notes). A run that fails says why in one
# line on stderr and leaves no daemon running.
# For tests: FLAKENOTES_BIN_DIR=DIR uses the binaries there (no install, no build); FLAKENOTES_DATA=DIR keeps the
# data there instead of ./.data.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${FLAKENOTES_BIN_DIR:-}" ]; then
  bin="$FLAKENOTES_BIN_DIR"
else
  bash scripts/install-deps.sh
  # SwiftPM orders a dependency's trait flags (Hummingbird's -DConfigurationSupport -DFullFoundation) by a randomly
  # seeded hash, so without this about every other `swift build` sees new compiler arguments and rebuilds
  # Hummingbird and everything above it (notesyncd: minutes in release). Fixed hashing keeps the order, so a second
  # run rebuilds nothing (Docs/PERFORMANCE.md, "start.sh rebuilding notesyncd").
  export SWIFT_DETERMINISTIC_HASHING=1
  # One `--product` per call: given twice, `swift build` builds only the last one.
  swift build -c release --product notesyncd
  swift build -c release --product notes
  bin="$(swift build -c release --show-bin-path)"
fi
data="${FLAKENOTES_DATA:-.data}"
port="${PORT:-8080}"
password="demo-password"
mkdir -p "$data/server" "$data/client"
"$bin/notesyncd" --data-dir "$data/server" --host 127.0.0.1 --port "$port" > "$data/notesyncd.out" 2> "$data/notesyncd.log" &
daemon=$!

# Stops the daemon (SIGTERM: it drains and closes the store) and exits with its status; a daemon stopped by a
# signal we sent is a clean stop.
stop() {
  trap - INT TERM EXIT
  kill -TERM "$daemon" 2>/dev/null || true
  code=0
  wait "$daemon" 2>/dev/null || code=$?
  case "$code" in 0 | 130 | 143) echo "notesyncd stopped." >&2; exit 0 ;; *) echo "notesyncd exited with status $code (log: $data/notesyncd.log)" >&2; exit "$code" ;; esac
}
# Any other exit (a failed step) stops the daemon too, and waits until it is gone.
cleanup() {
  kill -TERM "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
}
trap stop INT TERM
trap cleanup EXIT

# One line on stderr, then exit 1 (the EXIT trap stops the daemon).
fail() {
  echo "start.sh: $*" >&2
  exit 1
}

for _ in $(seq 1 300); do
  grep -q "listening on" "$data/notesyncd.out" 2>/dev/null && break
  # The daemon's last line is its one-line reason (a port in use, an unreadable data directory).
  kill -0 $daemon 2>/dev/null || fail "notesyncd did not start: $(tail -n 1 "$data/notesyncd.log" | sed 's/^notesyncd: //')"
  sleep 0.1
done
grep -q "listening on" "$data/notesyncd.out" || fail "notesyncd did not start within 30 s (log: $data/notesyncd.log)"
url="http://127.0.0.1:$port"
NOTES_HOME="$(cd "$data/client" && pwd)"
export NOTES_HOME
notes="$bin/notes"
status="$("$notes" status --json 2>/dev/null || true)"
# Signed in to this very server already (a second run on the same port): nothing to do. Otherwise sign in, also when
# the client remembers another server (a first run on another PORT): the same account on the same data, so its notes
# stay and are matched up.
if ! { grep -q '"signedIn" *: *true' <<<"$status" && grep -q "\"server\" *: *\"$url\"" <<<"$status"; }; then
  # Sign-up is closed (the default): the operator creates the account. It exists already on a second run. A step
  # that fails prints its one line (notesyncd's or notes's) and stops the script.
  accounts="$("$bin/notesyncd" users list --data-dir "$data/server" --json)"
  if ! grep -q '"username":"demo"' <<<"$accounts"; then
    printf '%s\n' "$password" | "$bin/notesyncd" users add demo --data-dir "$data/server" --password-stdin >/dev/null
  fi
  printf '%s\n' "$password" | "$notes" login --server "$url" --username demo --password-stdin
  # The welcome note, once: a client that had a server before has it already.
  if ! grep -q '"server"' <<<"$status"; then
    "$notes" add "Welcome to FlakeNotes: this note got its ID offline, then synced."
  fi
fi
"$notes" sync
"$notes" list --limit 10
cat <<MSG

notesyncd is running at $url (log: $data/notesyncd.log). The demo client is signed in as 'demo' (password: $password):
  export NOTES_HOME="$NOTES_HOME"; alias notes="$notes"
  notes add "buy milk"; notes sync; notes list; notes search milk; notes --help
A second device is just another home (the password is $password):
  NOTES_HOME=/tmp/phone $notes login --server $url --username demo
Another port: PORT=9090 bash scripts/start.sh. Ctrl-C stops the daemon.
MSG
# `wait` returns early when a signal arrives; the trap then stops the daemon and exits.
while kill -0 "$daemon" 2>/dev/null; do wait "$daemon" || true; done
trap - EXIT
echo "notesyncd exited (log: $data/notesyncd.log)" >&2
exit 1
