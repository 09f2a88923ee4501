#!/usr/bin/env bash
# Builds the method-dispatch fuzzer (Swift, whole server in-process) with
# libFuzzer + ASan; replays every input in regressions/; then fuzzes for
# $FUZZ_SECONDS (default 60) from corpus/ with dispatch.dict. A crash fails
# the run and its input is copied into regressions/ so it is replayed from
# then on.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
scratch="${FUZZ_BUILD_DIR:-$root/.build-fuzz}"
out="$scratch/dispatch-run"
mkdir -p "$out/work-corpus" "$out/artifacts"

build() {
    (cd "$root" && swift build --product cb-fuzz-dispatch -c debug --sanitize=fuzzer --sanitize=address \
        --scratch-path "$scratch" -Xswiftc -DCB_FUZZ) >"$out/build.log" 2>&1
}
if ! build; then
    # SwiftPM sometimes keeps a stale build description; one clean retry.
    rm -f "$scratch/debug.yaml" "$scratch/build.db"
    build || { tail -n 30 "$out/build.log" >&2; echo "dispatch fuzz: build failed" >&2; exit 1; }
fi
bin="$(cd "$root" && swift build --product cb-fuzz-dispatch -c debug --sanitize=fuzzer --sanitize=address \
        --scratch-path "$scratch" -Xswiftc -DCB_FUZZ --show-bin-path)/cb-fuzz-dispatch"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"

save_crashers() {
    for f in "$out"/artifacts/crash-* "$out"/artifacts/timeout-* "$out"/artifacts/oom-*; do
        [ -e "$f" ] || continue
        cp "$f" "$here/regressions/"
        echo "dispatch fuzz: saved $(basename "$f") to Tests/fuzz/dispatch/regressions/" >&2
    done
}

regs=("$here"/regressions/*)
if [ -e "${regs[0]}" ]; then
    echo "dispatch fuzz: replaying ${#regs[@]} regression input(s)" >&2
    "$bin" -runs=1 "${regs[@]}" >"$out/replay.log" 2>&1 || {
        tail -n 30 "$out/replay.log" >&2
        echo "dispatch fuzz: a regression input fails" >&2
        exit 1
    }
fi

secs="${FUZZ_SECONDS:-60}"
echo "dispatch fuzz: fuzzing for ${secs}s" >&2
rm -f "$out"/artifacts/*
if ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -dict="$here/dispatch.dict" -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="$out/artifacts/" "$out/work-corpus" "$here/corpus" >"$out/fuzz.log" 2>&1; then
    tail -n 40 "$out/fuzz.log" >&2
    save_crashers
    echo "dispatch fuzz: FAILED" >&2
    exit 1
fi
grep -E '^stat::number_of_executed_units|^Done' "$out/fuzz.log" >&2 || tail -n 3 "$out/fuzz.log" >&2
echo "dispatch fuzz: ok" >&2
