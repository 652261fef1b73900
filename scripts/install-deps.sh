#!/usr/bin/env bash
# Installs the Debian packages FlakeNotes needs to build, test and run, if any are missing: sqlite3 for backups
# (Docs/OPERATIONS.md), tmux and vim-tiny for the tests that drive `notes` and a real editor in a terminal.
set -euo pipefail
packages=(libsqlite3-dev libcurl4-openssl-dev postgresql python3 sqlite3 tmux vim-tiny)
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
