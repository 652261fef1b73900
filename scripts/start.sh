#!/usr/bin/env bash
# The main job on a fresh Debian machine: installs what is missing, builds (release), starts notesyncd with its
# embedded SQLite on 127.0.0.1:${PORT:-8080}, signs a demo client in, and keeps the daemon in the foreground.
# Data: ./.data/server (daemon), ./.data/client (the demo client's NOTES_HOME). Ctrl-C stops the daemon cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build -c release --product notesyncd
swift build -c release --product notes
bin="$(swift build -c release --show-bin-path)"
port="${PORT:-8080}"
mkdir -p .data/server .data/client
"$bin/notesyncd" --data-dir .data/server --host 127.0.0.1 --port "$port" > .data/notesyncd.out 2> .data/notesyncd.log &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT INT TERM
for _ in $(seq 1 100); do
  grep -q "listening on" .data/notesyncd.out 2>/dev/null && break
  kill -0 $daemon 2>/dev/null || { cat .data/notesyncd.log >&2; exit 1; }
  sleep 0.1
done
url="http://127.0.0.1:$port"
export NOTES_HOME="$PWD/.data/client"
notes="$bin/notes"
if ! "$notes" status --json 2>/dev/null | grep -q '"signedIn" *: *true'; then
  printf 'demo-password\n' | "$notes" signup --server "$url" --username demo --password-stdin 2>/dev/null \
    || printf 'demo-password\n' | "$notes" login --server "$url" --username demo --password-stdin
  "$notes" add "Welcome to FlakeNotes: this note got its ID offline, then synced."
fi
"$notes" sync
"$notes" list
cat <<MSG

notesyncd is running at $url (log: .data/notesyncd.log). The demo client is signed in as 'demo':
  export NOTES_HOME="$NOTES_HOME"; alias notes="$notes"
  notes add "buy milk"; notes sync; notes list; notes --help
A second device is just another home:  NOTES_HOME=/tmp/phone $notes login --server $url --username demo
Ctrl-C stops the daemon.
MSG
wait $daemon
