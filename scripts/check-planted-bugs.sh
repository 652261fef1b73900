#!/usr/bin/env bash
# Mutation check for notes-sim: applies each planted bug in scripts/planted-bugs/ to a scratch copy of the tree,
# builds notes-sim (release) there and runs the CI sweep's shape (200 seeds × 300 steps). Every bug must be caught
# (notes-sim exits 1). The unpatched tree is swept first and must pass (exit 2 if not: every bug would look caught).
# Prints one line per bug; exits 1 if any bug went unnoticed. The scratch copy keeps its .build,
# so only the first build is cold; after that, a minute or two per bug. A patch whose header has a line
# `# notes-sim schemes: S1 S2 ...` is swept once per client-ID scheme (notes-sim --id-scheme S) and must be caught
# under each.
#   bash scripts/check-planted-bugs.sh [SCRATCH_DIR]     (default: /tmp/flakenotes-planted; reused between runs)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
scratch="${1:-/tmp/flakenotes-planted}"
mkdir -p "$scratch"
mkdir -p "$scratch/tree" && find "$scratch/tree" -mindepth 1 -maxdepth 1 ! -name .build -exec rm -rf {} +
tar -C "$root" --exclude='./.build*' --exclude=./.git -cf - . | tar -C "$scratch/tree" -xf -
# The unpatched tree must pass the same sweep first: otherwise every bug would look caught.
(cd "$scratch/tree" && swift build -c release --product notes-sim >"$scratch/baseline.build.log" 2>&1)
if ! "$scratch/tree/.build/release/notes-sim" --seeds 1..200 --steps 300 >"$scratch/baseline.out" 2>&1; then
    echo "the unpatched tree fails the sweep itself: $(head -1 "$scratch/baseline.out" | cut -c1-160)"
    echo "(fix that first: a planted bug would look caught; see $scratch/baseline.out)"
    exit 2
fi
echo "baseline   the unpatched tree passes the sweep"
status=0
for patch in "$root"/scripts/planted-bugs/*.patch; do
    name="$(basename "$patch" .patch)"
    (cd "$scratch/tree" && patch -s -p1 <"$patch")
    (cd "$scratch/tree" && swift build -c release --product notes-sim >"$scratch/$name.build.log" 2>&1)
    schemes="$(sed -n 's/^# notes-sim schemes: //p' "$patch")"
    for scheme in ${schemes:-default}; do
        label="$name" args=()
        if [ "$scheme" != default ]; then label="$name ($scheme)" args=(--id-scheme "$scheme"); fi
        out="$scratch/$name${args:+-$scheme}.out"
        set +e
        "$scratch/tree/.build/release/notes-sim" --seeds 1..200 --steps 300 "${args[@]}" >"$out" 2>&1
        code=$?
        set -e
        if [ "$code" = 1 ]; then
            echo "caught     $label: $(head -1 "$out" | cut -c1-160)"
        else
            echo "NOT CAUGHT $label (notes-sim exited $code; see $out)"
            status=1
        fi
    done
    (cd "$scratch/tree" && patch -s -R -p1 <"$patch")
done
exit "$status"
