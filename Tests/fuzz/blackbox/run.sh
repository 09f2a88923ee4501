#!/usr/bin/env bash
# Schema-driven black-box fuzzing of the release binary over stdio
# (fuzz_blackbox.py): replays regressions/, then runs for $FUZZ_SECONDS
# (default 60). A failing round is saved to regressions/ and fails the run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
bin="${CODINGBRIDGE_BIN:-$(cd "$root" && swift build -c release --show-bin-path)/codingbridge}"
[ -x "$bin" ] || (cd "$root" && swift build -c release --product codingbridge >/dev/null)
exec python3 "$here/fuzz_blackbox.py" --binary "$bin" --seconds "${FUZZ_SECONDS:-60}"
