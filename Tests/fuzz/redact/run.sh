#!/usr/bin/env bash
# The redaction engine under libFuzzer + ASan + UBSan (see fuzz_redact.c for
# the properties checked): replays regressions/, then fuzzes for
# $FUZZ_SECONDS (default 60) from corpus/ with redact.dict. A crash fails the
# run and its input is copied into regressions/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${FUZZ_BUILD_DIR:-$root/.build-fuzz}/redact"
mkdir -p "$out/work-corpus" "$out/artifacts"
cc="${FUZZ_CC:-/opt/swift/usr/bin/clang}"
command -v "$cc" >/dev/null || cc=clang

"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/include" "$here/fuzz_redact.c" "$root"/Sources/CBridge/redact.c "$root"/Sources/CBridge/redact_catalog.c \
    "$root"/Sources/CBridge/redact_score.c "$root/Sources/CBridge/error.c" \
    $(pkg-config --cflags --libs libpcre2-8 libuv) -lm -lpthread -o "$out/fuzz_redact.tmp" >"$out/build.log" 2>&1 || {
    tail -n 30 "$out/build.log" >&2
    echo "redact fuzz: build failed" >&2
    exit 1
}
mv "$out/fuzz_redact.tmp" "$out/fuzz_redact"

save_crashers() {
    local found=0
    for f in "$out"/artifacts/crash-* "$out"/artifacts/leak-* "$out"/artifacts/timeout-* "$out"/artifacts/oom-*; do
        [ -e "$f" ] || continue
        cp "$f" "$here/regressions/"
        echo "redact fuzz: saved $(basename "$f") to Tests/fuzz/redact/regressions/" >&2
        found=1
    done
    return $found
}

regs=("$here"/regressions/*)
if [ -e "${regs[0]}" ]; then
    echo "redact fuzz: replaying ${#regs[@]} regression input(s)" >&2
    "$out/fuzz_redact" -runs=1 "${regs[@]}" >"$out/replay.log" 2>&1 || {
        tail -n 30 "$out/replay.log" >&2
        echo "redact fuzz: a regression input fails" >&2
        exit 1
    }
fi

secs="${FUZZ_SECONDS:-60}"
echo "redact fuzz: fuzzing for ${secs}s" >&2
rm -f "$out"/artifacts/*
if ! "$out/fuzz_redact" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -dict="$here/redact.dict" -print_final_stats=1 -artifact_prefix="$out/artifacts/" \
        "$out/work-corpus" "$here/corpus" >"$out/fuzz.log" 2>&1; then
    tail -n 40 "$out/fuzz.log" >&2
    save_crashers || true
    echo "redact fuzz: FAILED" >&2
    exit 1
fi
grep -E '^stat::number_of_executed_units|^Done' "$out/fuzz.log" >&2 || tail -n 3 "$out/fuzz.log" >&2
echo "redact fuzz: ok" >&2
