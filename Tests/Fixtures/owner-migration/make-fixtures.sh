#!/usr/bin/env bash
# Writes the stores the owner migration test reads (Tests/NotesClientTests/OwnerMigrationTests.swift) with the
# client released before issue 16 (accounts on one device): NOTES_BIN and NOTESYNCD_BIN name that release's `notes`
# and `notesyncd` (built from a commit before the `v-owner-accounts` migration). Writes signed-in.sqlite and
# signed-out.sqlite next to this script.
#   NOTES_BIN=... NOTESYNCD_BIN=... bash Tests/Fixtures/owner-migration/make-fixtures.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../old-release.sh"
id_of() { n "$1" list --json | python3 -c "import json,sys; print([n['id'] for n in json.load(sys.stdin) if n['text'].startswith('$2')][0])"; }
# Device X: demo, then alice without logging out (that client carried demo's notes into alice); alice's phone
# writes a private note, which X pulls.
pw | n X signup --server "$url" -u demo --password-stdin
n X add "demo one"
n X add "demo two"
n X sync
pw | n P signup --server "$url" -u alice --password-stdin
n P add "alice private: bank PIN hint"
n P sync
pw | n X login --server "$url" -u alice --password-stdin
n X add "alice one"
n X sync
n X edit "$(id_of X "demo one")" --text "demo one, edited in alice"
# Device Y: demo, then signed out, with an edit and a note written while signed out.
pw | n Y login --server "$url" -u demo --password-stdin
n Y add "demo synced on y"
n Y sync
n Y logout
n Y add "written while signed out"
n Y edit "$(id_of Y "demo synced on y")" --text "demo synced on y
edited while signed out"
cp "$work/X/notes.sqlite" "$here/signed-in.sqlite"
cp "$work/Y/notes.sqlite" "$here/signed-out.sqlite"
