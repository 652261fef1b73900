#!/usr/bin/env bash
# Installs the Debian packages FlakeNotes needs to build, test and run, if any are missing: sqlite3 (Docs/OPERATIONS.md),
# postgresql-client for `notesyncd backup` on PostgreSQL (pg_dump, pg_restore), tmux and vim-tiny for the tests that
# drive `notes` and a real editor in a terminal, chromium (headless, with fonts-dejavu-core) for the tests that open
# notes-sim's reports in a browser, libsodium-dev for NoteCrypto's end-to-end encryption (Sources/CSodium: headers,
# the library and its pkg-config file). gdb prints a hung test run's stacks (scripts/watched.sh). systemd-analyze (package systemd) checks deploy/'s units when present.
set -euo pipefail
packages=(libsqlite3-dev libcurl4-openssl-dev libsodium-dev postgresql postgresql-client python3 sqlite3 tmux vim-tiny chromium fonts-dejavu-core gdb)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# schemathesis (PyPI) for scripts/schemathesis.sh, in a virtual environment inside the build folder (never system-wide).
venv="$(dirname "$0")/../.build/schemathesis-venv"
if [ ! -x "$venv/bin/schemathesis" ]; then
  dpkg -s python3-venv >/dev/null 2>&1 || {
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  }
  echo "installing schemathesis in .build/schemathesis-venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "schemathesis>=4.3,<5"
fi
