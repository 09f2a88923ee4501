# Shared by the C fuzz targets' run.sh (source it after setting $name).
# Each target: build with libFuzzer + ASan + UBSan, replay every input in
# regressions/ (a fixed crash must stay fixed), then fuzz for $FUZZ_SECONDS
# (default 60) from corpus/. A crash fails the run and its input is copied
# into regressions/ so it is replayed from then on.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${FUZZ_BUILD_DIR:-$root/.build-fuzz}/$name"
mkdir -p "$out/work-corpus" "$out/artifacts"
cc="${FUZZ_CC:-/opt/swift/usr/bin/clang}"
command -v "$cc" >/dev/null || cc=clang

# fuzz_build PKG-CONFIG-NAMES SOURCE...  -> $out/fuzz_$name
fuzz_build() {
    local pkgs="$1"; shift
    # (gold prints harmless "Cannot export local symbol __asan_*" warnings; only show on failure)
    "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$root/include" "$@" $(pkg-config --cflags --libs $pkgs) -lm -lpthread \
        -o "$out/fuzz_$name.tmp" >"$out/build.log" 2>&1 || {
        tail -n 30 "$out/build.log" >&2
        echo "$name fuzz: build failed" >&2
        exit 1
    }
    mv "$out/fuzz_$name.tmp" "$out/fuzz_$name"
}

save_crashers() {
    local found=0
    for f in "$out"/artifacts/crash-* "$out"/artifacts/leak-* "$out"/artifacts/timeout-* "$out"/artifacts/oom-*; do
        [ -e "$f" ] || continue
        mkdir -p "$here/regressions"
        cp "$f" "$here/regressions/"
        echo "$name fuzz: saved $(basename "$f") to Tests/fuzz/$name/regressions/" >&2
        found=1
    done
    return $found
}

fuzz_replay() {
    local regs=("$here"/regressions/*)
    [ -e "${regs[0]}" ] || return 0
    echo "$name fuzz: replaying ${#regs[@]} regression input(s)" >&2
    "$out/fuzz_$name" -runs=1 "${regs[@]}" >"$out/replay.log" 2>&1 || {
        tail -n 30 "$out/replay.log" >&2
        echo "$name fuzz: a regression input fails" >&2
        exit 1
    }
}

# fuzz_run [libFuzzer flags...]
fuzz_run() {
    local secs="${FUZZ_SECONDS:-60}"
    echo "$name fuzz: fuzzing for ${secs}s" >&2
    rm -f "$out"/artifacts/*
    if ! "$out/fuzz_$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 "$@" \
            -print_final_stats=1 -artifact_prefix="$out/artifacts/" \
            "$out/work-corpus" "$here/corpus" >"$out/fuzz.log" 2>&1; then
        tail -n 40 "$out/fuzz.log" >&2
        save_crashers || true
        echo "$name fuzz: FAILED" >&2
        exit 1
    fi
    grep -E '^stat::number_of_executed_units|^Done' "$out/fuzz.log" >&2 || tail -n 3 "$out/fuzz.log" >&2
    echo "$name fuzz: ok" >&2
}
