#!/usr/bin/env bash
# Where notes-sim's CPU goes: by library (self time) and by whose code runs (attribute.py). Needs perf and a release
# build (swift build -c release --product notes-sim). Usage: profile.sh [SEEDS], default 1..6 (about 7 s of CPU).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sim="${NOTES_SIM:-$here/../../.build/release/notes-sim}"
seeds="${1:-1..6}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
perf record -q -e cpu-clock -F 400 --call-graph dwarf,16384 -o "$work/sim.perf" \
  "$sim" --seeds "$seeds" --steps 1000 --jobs 1 > "$work/sim.out"
sed -n 1p "$work/sim.out"
echo "by library (self time):"
perf report -i "$work/sim.perf" --no-children -g none --sort dso --stdio 2>/dev/null | awk '/%/ && n++ < 10'
perf script -i "$work/sim.perf" -F comm,tid,ip,sym,dso 2>/dev/null > "$work/stacks.txt"
python3 "$here/attribute.py" "$work/stacks.txt"
