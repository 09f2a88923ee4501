#!/usr/bin/env bash
# Builds the transport fuzzer (framing + JSON-RPC decoding, C) with libFuzzer,
# ASan and UBSan; replays every input in regressions/; then fuzzes for
# $FUZZ_SECONDS (default 60) starting from corpus/. A crash fails the run and
# its input is copied into regressions/ so it is replayed from then on.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${FUZZ_BUILD_DIR:-$root/.build-fuzz}/transport"
mkdir -p "$out/work-corpus" "$out/artifacts"
cc="${FUZZ_CC:-/opt/swift/usr/bin/clang}"
command -v "$cc" >/dev/null || cc=clang
srcs=(buf framing jsonrpc rpc conn error)
"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/include" "$here/fuzz_transport.c" $(printf "$root/Sources/CBridge/%s.c " "${srcs[@]}") \
    $(pkg-config --cflags --libs jansson libuv) -o "$out/fuzz_transport.tmp" >"$out/build.log" 2>&1 || {
    # (gold prints harmless "Cannot export local symbol __asan_*" warnings; only show on failure)
    tail -n 30 "$out/build.log" >&2
    echo "transport fuzz: build failed" >&2
    exit 1
}
mv "$out/fuzz_transport.tmp" "$out/fuzz_transport"

save_crashers() {
    local found=0
    for f in "$out"/artifacts/crash-* "$out"/artifacts/leak-* "$out"/artifacts/timeout-* "$out"/artifacts/oom-*; do
        [ -e "$f" ] || continue
        cp "$f" "$here/regressions/"
        echo "transport fuzz: saved $(basename "$f") to Tests/fuzz/transport/regressions/" >&2
        found=1
    done
    return $found
}

regs=("$here"/regressions/*)
if [ -e "${regs[0]}" ]; then
    echo "transport fuzz: replaying ${#regs[@]} regression input(s)" >&2
    "$out/fuzz_transport" -runs=1 "${regs[@]}" >"$out/replay.log" 2>&1 || {
        tail -n 30 "$out/replay.log" >&2
        echo "transport fuzz: a regression input fails" >&2
        exit 1
    }
fi

secs="${FUZZ_SECONDS:-60}"
echo "transport fuzz: fuzzing for ${secs}s" >&2
rm -f "$out"/artifacts/*
if ! "$out/fuzz_transport" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -dict="$here/transport.dict" -max_len=8192 -print_final_stats=1 \
        -artifact_prefix="$out/artifacts/" "$out/work-corpus" "$here/corpus" >"$out/fuzz.log" 2>&1; then
    tail -n 40 "$out/fuzz.log" >&2
    save_crashers || true
    echo "transport fuzz: FAILED" >&2
    exit 1
fi
grep -E '^stat::number_of_executed_units|^Done' "$out/fuzz.log" >&2 || tail -n 3 "$out/fuzz.log" >&2
echo "transport fuzz: ok" >&2
