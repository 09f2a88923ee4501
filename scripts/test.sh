#!/usr/bin/env bash
# The whole test suite: unit tests, end-to-end tests over stdio, and a bounded
# fuzz run of every target under Tests/fuzz. `make test` runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
scripts/embed-spec.sh
scripts/embed-redact-rules.py
scripts/embed-web.sh
echo "== build" >&2
swift build -c release --product codingbridge 2>&1 | tail -n 3
echo "== unit tests (swift test)" >&2
swift test 2>&1 | tail -n 40
echo "== end-to-end tests (pytest)" >&2
CODINGBRIDGE_BIN="$(swift build -c release --show-bin-path)/codingbridge" \
    python3 -m pytest -q Tests/e2e
echo "== C drivers (ASan+UBSan)" >&2
bash Tests/clisten/run.sh
bash Tests/chttp2/run.sh
echo "== fuzzing (bounded)" >&2
for run in Tests/fuzz/*/run.sh; do
    [ -e "$run" ] || continue
    echo "-- $run" >&2
    FUZZ_SECONDS="${FUZZ_SECONDS:-60}" bash "$run"
done
