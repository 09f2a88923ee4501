#!/usr/bin/env bash
# The timeout scheduler's C checks: first the unit driver (Tests/ctime, ASan +
# UBSan: differential test, mass cancel, re-entrancy, 1 h on the manual clock,
# real clock never early), then replays regressions/ and fuzzes for
# $FUZZ_SECONDS (default 60) a program of schedule/cancel/reschedule/advance
# operations (callbacks re-enter) against a reference model. A crash fails the
# run and its input is copied into regressions/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${FUZZ_BUILD_DIR:-$root/.build-fuzz}/timeouts"
mkdir -p "$out/work-corpus" "$out/artifacts"
cc="${FUZZ_CC:-/opt/swift/usr/bin/clang}"
command -v "$cc" >/dev/null || cc=clang

echo "timeouts: C unit driver" >&2
TMPDIR="$out" "$root/Tests/ctime/run.sh" >&2

"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/include" "$here/fuzz_timeouts.c" "$root/Sources/CBridge/timeouts.c" "$root/Sources/CBridge/error.c" \
    $(pkg-config --cflags --libs libuv) -o "$out/fuzz_timeouts.tmp" >"$out/build.log" 2>&1 || {
    tail -n 30 "$out/build.log" >&2
    echo "timeouts fuzz: build failed" >&2
    exit 1
}
mv "$out/fuzz_timeouts.tmp" "$out/fuzz_timeouts"

save_crashers() {
    local found=0
    for f in "$out"/artifacts/crash-* "$out"/artifacts/leak-* "$out"/artifacts/timeout-* "$out"/artifacts/oom-*; do
        [ -e "$f" ] || continue
        cp "$f" "$here/regressions/"
        echo "timeouts fuzz: saved $(basename "$f") to Tests/fuzz/timeouts/regressions/" >&2
        found=1
    done
    return $found
}

regs=("$here"/regressions/*)
if [ -e "${regs[0]}" ]; then
    echo "timeouts fuzz: replaying ${#regs[@]} regression input(s)" >&2
    "$out/fuzz_timeouts" -runs=1 "${regs[@]}" >"$out/replay.log" 2>&1 || {
        tail -n 30 "$out/replay.log" >&2
        echo "timeouts fuzz: a regression input fails" >&2
        exit 1
    }
fi

secs="${FUZZ_SECONDS:-60}"
echo "timeouts fuzz: fuzzing for ${secs}s" >&2
rm -f "$out"/artifacts/*
if ! "$out/fuzz_timeouts" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="$out/artifacts/" "$out/work-corpus" "$here/corpus" >"$out/fuzz.log" 2>&1; then
    tail -n 40 "$out/fuzz.log" >&2
    save_crashers || true
    echo "timeouts fuzz: FAILED" >&2
    exit 1
fi
grep -E '^stat::number_of_executed_units|^Done' "$out/fuzz.log" >&2 || tail -n 3 "$out/fuzz.log" >&2
echo "timeouts fuzz: ok" >&2
