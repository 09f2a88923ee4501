#!/usr/bin/env bash
# Builds the method-dispatch fuzzer (Swift, whole server in-process) with
# libFuzzer + ASan; replays every input in regressions/; then fuzzes for
# $FUZZ_SECONDS (default 60) from corpus/ with dispatch.dict (regenerated
# from rpc-spec/openrpc.json by scripts/fuzz-dict.py). A crash fails the run
# and its input is copied into regressions/ so it is replayed from then on.
# One server serves many inputs while fuzzing (fast); the replay gives every
# input a fresh server (CB_FUZZ_FRESH). A crash that needs the inputs before
# it is saved too: history-*.cbseq, every input since the server's last reset,
# which the target replays as one input on one fresh server.
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
# Swift's backtracer reads memory ASan guards and buries the fatalError
# text under its own report; ASan's report of the signal is enough.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"
python3 "$root/scripts/fuzz-dict.py" "$here/dispatch.dict" 2>/dev/null || true

save_crashers() {
    for f in "$out"/artifacts/crash-* "$out"/artifacts/timeout-* "$out"/artifacts/oom-*; do
        [ -e "$f" ] || continue
        cp "$f" "$here/regressions/"
        echo "dispatch fuzz: saved $(basename "$f") to Tests/fuzz/dispatch/regressions/" >&2
        if [ -s "$out/history.cbseq" ] && ! CB_FUZZ_FRESH=1 "$bin" -runs=1 "$f" >/dev/null 2>&1; then :
        elif [ -s "$out/history.cbseq" ]; then
            # Does not fail alone: keep the server's history that led to it.
            cp "$out/history.cbseq" "$here/regressions/history-$(basename "$f").cbseq"
            echo "dispatch fuzz: it needs earlier inputs; saved history-$(basename "$f").cbseq" >&2
        fi
    done
}

regs=("$here"/regressions/*)
if [ -e "${regs[0]}" ]; then
    echo "dispatch fuzz: replaying ${#regs[@]} regression input(s)" >&2
    CB_FUZZ_FRESH=1 "$bin" -runs=1 "${regs[@]}" >"$out/replay.log" 2>&1 || {
        tail -n 30 "$out/replay.log" >&2
        echo "dispatch fuzz: a regression input fails" >&2
        exit 1
    }
fi

secs="${FUZZ_SECONDS:-60}"
echo "dispatch fuzz: fuzzing for ${secs}s" >&2
rm -f "$out"/artifacts/*
# malloc_context_size=0: ASan's allocation stack traces cost ~25% of the
# time here; the replay of a crasher (fresh server, full context) has them.
if ! ASAN_OPTIONS="$ASAN_OPTIONS:malloc_context_size=0" CB_FUZZ_HISTORY="$out/history.cbseq" "$bin" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 -dict="$here/dispatch.dict" -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="$out/artifacts/" "$out/work-corpus" "$here/corpus" >"$out/fuzz.log" 2>&1; then
    tail -n 40 "$out/fuzz.log" >&2
    save_crashers
    echo "dispatch fuzz: FAILED" >&2
    exit 1
fi
grep -E '^stat::number_of_executed_units|^Done' "$out/fuzz.log" >&2 || tail -n 3 "$out/fuzz.log" >&2
echo "dispatch fuzz: ok" >&2
