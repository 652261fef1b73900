#!/usr/bin/env bash
# The whole test suite: installs what is missing, starts a throwaway PostgreSQL on loopback (unless
# FLAKENOTES_POSTGRES_URL already names one), builds, and runs every test. Removes the cluster afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

cleanup() { [ -n "${PG_STOP:-}" ] && eval "$PG_STOP" || true; }
trap cleanup EXIT
if [ -z "${FLAKENOTES_POSTGRES_URL:-}" ]; then
  eval "$(bash scripts/pg-throwaway.sh start)"
  export FLAKENOTES_POSTGRES_URL
fi
echo "PostgreSQL for the tests: ${FLAKENOTES_POSTGRES_URL%%\?*}" >&2
# The PostgreSQL tests fail (rather than skip) if the URL is missing, and the report tests if chromium is.
export FLAKENOTES_REQUIRE_POSTGRES=1
export FLAKENOTES_REQUIRE_CHROMIUM=1

# The same build arguments every run (see scripts/start.sh): otherwise a random trait-flag order rebuilds Hummingbird.
export SWIFT_DETERMINISTIC_HASHING=1
swift build --build-tests
# The end-to-end tests run the real binaries from the same build folder.
export FLAKENOTES_BIN_DIR="$(swift build --show-bin-path)"
# The OpenAPI document against a real daemon (a few minutes at most), then the fuzz corpus is replayed by the Swift
# tests (CodecCorpusTests).
if [ $# -eq 0 ]; then bash scripts/schemathesis.sh; fi
if [ $# -gt 0 ]; then
  swift test --skip-build "$@"
else
  # The tests that time a waiting pull against real sockets and daemons (live sync, operators' sign-outs) run on
  # their own after the rest: on 2 cores the parallel suite (Argon2id at production cost, 1,000-step simulations)
  # can hold every thread of the cooperative pool for tens of seconds, and their daemons' tasks then miss the
  # deadlines the tests assert. Each passes in seconds alone. So does the PostgreSQL lease that must still mint within
  # its 5-second lifetime (it was fenced before its first ID once, in a parallel run at a load average of 8), and the
  # killed daemon's 3-second lease that a daemon started after the kill must still find held (it had expired once, in
  # the parallel run of the eighth session's CI, before the new daemon asked).
  timed='LiveSync|OperatorSignOutEndToEnd|anUnrenewedLeaseExpiresFencedAndIsTakenOver|aKilledDaemonLosesNoAcknowledgedWriteAndItsNumberIsTakenAfterExpiry'
  # Each under a watchdog: a test that hangs fails the run within minutes, with the stacks of what it waits on.
  bash scripts/watched.sh swift test --skip-build --skip "$timed"
  bash scripts/watched.sh swift test --skip-build --filter "$timed"
fi
