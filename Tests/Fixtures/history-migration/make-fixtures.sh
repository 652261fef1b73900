#!/usr/bin/env bash
# Writes the stores the history migration tests read (Tests/NoteSyncServerTests/HistoryMigrationTests.swift) with the
# notesyncd released before issue 31 (tags, flags and history): NOTESYNCD_BIN names that release's `notesyncd` (built
# from a commit before the "v9: tags, flags and history" / PostgreSQL 10 migrations). Writes notesyncd.sqlite (one
# SQLite file) and, when FLAKENOTES_POSTGRES_URL names a server, postgres.sql (pg_dump of a database the same pushes
# wrote), next to this script.
#   NOTESYNCD_BIN=... [FLAKENOTES_POSTGRES_URL=...] bash Tests/Fixtures/history-migration/make-fixtures.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

# The pushes (fixed client, origin and edit IDs; the server mints the rest), through the protocol.
drive() {
  python3 - "$1" <<'PY'
import json, sys, urllib.request
url = sys.argv[1]
def call(method, path, body=None, token=None):
    request = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("Content-Type", "application/json")
    if token: request.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(request) as response:
        data = response.read()
        return json.loads(data) if data else None
def account(name, device):
    call("POST", "/v1/accounts", {"username": name, "password": "correct horse battery"})
    return call("POST", "/v1/sessions", {"username": name, "password": "correct horse battery", "deviceName": device, "origin": "7001"})["token"]
def push(token, *changes):
    return call("POST", "/v1/notes/push", {"changes": list(changes)}, token)["results"]
def change(client, edit, text, **rest):
    return dict({"clientID": str(client), "origin": "7001", "editID": str(edit), "text": text}, **rest)
alice = account("alice", "laptop")
bob = account("bob", "phone")
created = push(alice, change(1, 101, "Groceries\nmilk\n"), change(2, 102, "Plan\nship v1\n"), change(3, 103, "nul \u0000 inside\n"),
               change(4, 104, "to delete\n"), change(5, 105, "a\nb\nc\n"))
ids = [r["serverID"] for r in created]
push(alice, change(1, 111, "Groceries\nmilk\neggs\n", serverID=ids[0], baseVersion=1))
push(alice, change(1, 112, "Groceries\nmilk\neggs\nbread\n", serverID=ids[0], baseVersion=2))
push(alice, change(4, 113, "", deleted=True, serverID=ids[3], baseVersion=1))
# A merge (its answer's text kept for replays) and a conflict (a copy).
push(alice, change(2, 114, "Plan\nship v1\nthen v2\n", serverID=ids[1], baseVersion=1))
merged = push(alice, change(2, 115, "Intro\nPlan\nship v1\n", serverID=ids[1], baseVersion=1, baseText="Plan\nship v1\n"))
assert merged[0]["status"] == "merged", merged
push(alice, change(5, 116, "a\nX\nc\n", serverID=ids[4], baseVersion=1))
conflict = push(alice, change(5, 117, "a\nY\nc\n", serverID=ids[4], baseVersion=1, baseText="a\nb\nc\n"))
assert conflict[0]["status"] == "conflict", conflict
push(bob, change(1, 201, "bob's note\n"))
PY
}

# Starts the daemon with the store options given, and sets `url` (not in a subshell: `pid` must stay set).
start() {
  : >"$work/daemon.out"
  "$NOTESYNCD_BIN" --port 0 --sign-up open --bcrypt-cost 4 "$@" >"$work/daemon.out" 2>"$work/daemon.err" &
  pid=$!
  for _ in $(seq 300); do grep -q listening "$work/daemon.out" && break; sleep 0.1; done
  url="$(sed -n 's/.*listening on //p' "$work/daemon.out")"
}

stop() { kill "$pid"; wait "$pid" || true; pid=""; }

start --data-dir "$work/data"
drive "$url"
stop
rm -f "$here/notesyncd.sqlite"
python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('VACUUM INTO ?', (sys.argv[2],))" \
  "$work/data/notesyncd.sqlite" "$here/notesyncd.sqlite"

if [ -n "${FLAKENOTES_POSTGRES_URL:-}" ]; then
  database="fixture_$$"
  psql "$FLAKENOTES_POSTGRES_URL" -q -c "CREATE DATABASE $database"
  db_url="$(python3 -c "import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path='/' + sys.argv[2])))" "$FLAKENOTES_POSTGRES_URL" "$database")"
  start --database "$db_url"
  drive "$url"
  stop
  pg_dump --no-owner --no-privileges --inserts "$db_url" | grep -v '^SET transaction_timeout' >"$here/postgres.sql"
  psql "$FLAKENOTES_POSTGRES_URL" -q -c "DROP DATABASE $database"
fi
