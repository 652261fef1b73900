#!/usr/bin/env bash
# Property-tests Docs/openapi.yaml against a real notesyncd with schemathesis (PyPI; installed by
# scripts/install-deps.sh in .build/schemathesis-venv): no 5xx, every answer conforms to the document (status,
# content type, headers, schema), schema-valid requests are accepted and schema-invalid ones refused. Settings and
# the documented exceptions: Tests/Schemathesis/schemathesis.toml; auth: Tests/Schemathesis/hooks.py.
#
#   scripts/schemathesis.sh            SCHEMATHESIS_EXAMPLES examples per operation (default 40), fixed seed
#   SCHEMATHESIS_SEED=random ...       a new seed each run (printed)
#
# Needs a built notesyncd: $FLAKENOTES_BIN_DIR, else `swift build --show-bin-path`.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
venv=.build/schemathesis-venv
[ -x "$venv/bin/schemathesis" ] || bash scripts/install-deps.sh
bin="${FLAKENOTES_BIN_DIR:-$(swift build --show-bin-path)}"
[ -x "$bin/notesyncd" ] || { echo "schemathesis: $bin/notesyncd is not built" >&2; exit 1; }
examples="${SCHEMATHESIS_EXAMPLES:-40}"
seed="${SCHEMATHESIS_SEED:-15}"
[ "$seed" = random ] && seed=$RANDOM

work=$(mktemp -d /tmp/notesyncd-schemathesis.XXXXXX)
: >"$work/stdout"  # exists before the background daemon's redirection opens it (the loop below reads it)
"$bin/notesyncd" --data-dir "$work/data" --port 0 --bcrypt-cost 4 --log-level warning --sign-up open >"$work/stdout" 2>"$work/daemon.log" &
daemon=$!
cleanup() { kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
# The daemon prints its listening line when it is ready.
url=""
for _ in $(seq 1 600); do
  url=$(sed -n 's/^notesyncd listening on //p' "$work/stdout")
  [ -n "$url" ] && break
  kill -0 "$daemon" 2>/dev/null || { cat "$work/daemon.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "schemathesis: notesyncd did not start" >&2; exit 1; }
export NOTESYNCD_URL="$url"
"$venv/bin/python" - <<'PY'
import json, os, urllib.request
request = urllib.request.Request(os.environ["NOTESYNCD_URL"] + "/v1/accounts",
    data=json.dumps({"username": "schemathesis", "password": "correct horse battery"}).encode(),
    headers={"Content-Type": "application/json"}, method="POST")
urllib.request.urlopen(request, timeout=30).read()
PY

echo "schemathesis: $examples examples per operation, seed $seed, against $url" >&2
status=0
# Run from the scratch folder, where schemathesis keeps its example database (.schemathesis/), not in the repository.
cd "$work"
SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$root/Tests/Schemathesis" \
  "$root/$venv/bin/schemathesis" --config-file "$root/Tests/Schemathesis/schemathesis.toml" --no-color run "$root/Docs/openapi.yaml" \
  --url "$url" --checks all --max-examples "$examples" --seed "$seed" --workers 1 \
  --report junit --report-dir "$work/report" || status=$?
if grep -qE '(error|critical)' "$work/daemon.log"; then
  echo "schemathesis: the daemon logged errors:" >&2
  grep -E '(error|critical)' "$work/daemon.log" | head -20 >&2
  status=1
fi
exit $status
