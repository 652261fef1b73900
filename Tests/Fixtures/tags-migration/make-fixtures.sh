#!/usr/bin/env bash
# Writes the stores the tags migration test reads (Tests/NotesClientTests/TagsMigrationTests.swift) with the client
# and daemon released before issue 31 (tags, pinned and archived notes, history): NOTES_BIN and NOTESYNCD_BIN name
# that release's `notes` and `notesyncd`. Writes, next to this script, device.sqlite (a signed-in device's store)
# and server.sqlite (the daemon's store it is signed in to, checkpointed), so that the test syncs the migrated device
# with the migrated server.
#   NOTES_BIN=... NOTESYNCD_BIN=... bash Tests/Fixtures/tags-migration/make-fixtures.sh
#
# The device holds: a synced note, a synced note edited since (dirty, with its base), a synced note deleted since the
# sync (a dirty tombstone), a note deleted and synced (a clean tombstone), a note never synced, and a push snapshot
# in flight: a note whose push the server never received (a proxy in front of the daemon drops the push request),
# which the migrated client must send again unchanged, with the same edit ID and without the new fields.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../old-release.sh"
id_of() { n "$1" list --all --json | python3 -c "import json,sys; print([n['id'] for n in json.load(sys.stdin) if n['text'].startswith('$2')][0])"; }

pw | n X signup --server "$url" -u alice --password-stdin
n X add "synced"
n X add "synced, then edited"
n X add "synced, then deleted"
n X add "deleted and synced"
n X sync
n X rm "$(id_of X "deleted and synced")"
n X sync

# The snapshot in flight: a proxy passes everything but the push, whose connection it closes unanswered.
cat >"$work/proxy.py" <<'PY'
import http.server, sys, urllib.request, urllib.error
target = sys.argv[1]
class Proxy(http.server.BaseHTTPRequestHandler):
    def forward(self):
        if self.path.startswith("/v1/notes/push"):
            self.close_connection = True
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        request = urllib.request.Request(target + self.path, data=body, method=self.command)
        for name in ("Authorization", "Content-Type", "Accept"):
            if self.headers.get(name): request.add_header(name, self.headers[name])
        try:
            answer = urllib.request.urlopen(request)
        except urllib.error.HTTPError as error:
            answer = error
        data = answer.read()
        self.send_response(answer.status if hasattr(answer, "status") else answer.code)
        self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_POST = do_DELETE = forward
    def log_message(self, *args): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
print(server.server_address[1], flush=True)
server.serve_forever()
PY
python3 "$work/proxy.py" "$url" >"$work/proxy.out" &
children+=("$!")
for _ in $(seq 100); do [ -s "$work/proxy.out" ] && break; sleep 0.1; done
sqlite3 "$work/X/notes.sqlite" "UPDATE settings SET server_url = 'http://127.0.0.1:$(cat "$work/proxy.out")' WHERE id = 1"
n X add "in flight"
if n X sync >/dev/null 2>&1; then echo "the push went through the proxy" >&2; exit 1; fi
sqlite3 "$work/X/notes.sqlite" "UPDATE settings SET server_url = '$url' WHERE id = 1"
[ "$(sqlite3 "$work/X/notes.sqlite" "SELECT COUNT(*) FROM outbox")" = 1 ] || { echo "no snapshot in flight" >&2; exit 1; }

# Dirty notes without a snapshot: an edit, a delete, a note never synced.
n X edit "$(id_of X "synced, then edited")" --text "synced, then edited here"
n X rm "$(id_of X "synced, then deleted")"
n X add "never synced"

kill "$pid"
wait "$pid" 2>/dev/null || true
rm -f "$here/device.sqlite" "$here/server.sqlite"
sqlite3 "$work/X/notes.sqlite" ".backup '$here/device.sqlite'"
sqlite3 "$work/data/notesyncd.sqlite" ".backup '$here/server.sqlite'"
