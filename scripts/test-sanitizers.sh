#!/usr/bin/env bash
# The test suite under sanitizers (the second test command; `make test` is the
# first). Three parts, each in its own scratch dir so it never fights the
# normal build:
#   1. swift test --sanitize=address   (.build-asan; LeakSanitizer on, with
#      scripts/lsan.supp for the one known false report in Swift binaries)
#   2. UndefinedBehaviorSanitizer (.build-ubsan; any report fails). swiftc has
#      no -sanitize=undefined on Linux (Swift traps overflow and bounds itself),
#      so the C code (CBridge) is compiled with clang's -fsanitize=undefined and
#      the UBSan runtime linked, and the same Swift tests drive it.
#   1b. the network listener (H2O, wslay, OpenSSL glue in C) has no in-process
#      driver: the ASan build of the daemon serves the network e2e tests
#      (Tests/e2e/test_network*.py, test_devices.py, test_http_hooks.py, and
#      test_webapp.py for the web app's files served from C, test_push.py
#      for the HTTP/2 push client and the push crypto, test_hook_waits.py for
#      the agent's outbox and the resume's child process) and
#      any report it writes (log_path) fails the run. Leak checking is off
#      there: the daemon ends with exit(), leaving its long-lived objects;
#      leaks are the in-process suite's job (part 1).
#   3. the C runtime's own drivers under ASan+UBSan+LSan: Tests/ctime and every
#      Tests/fuzz/*/run.sh (they already build C with -fsanitize=...; here they
#      replay their regression inputs and fuzz for $SAN_FUZZ_SECONDS, default 10).
# Usage: scripts/test-sanitizers.sh [asan] [ubsan] [c]   (default: all three)
# Prints the wall time of each part.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(asan ubsan c)
scripts/embed-spec.sh >/dev/null 2>&1 || true
scripts/embed-web.sh >/dev/null 2>&1 || true

# Tests that cannot hold under a sanitizer read this (see CB_SANITIZER in the tests).
export CB_SANITIZER=1
# halt_on_error: the first report fails the run (no "recoverable" noise).
# LSan's suppression file names the exact frames of the false report; see the file.
asan_opts="detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:suppressions=$root/scripts/lsan.supp"
ubsan_opts="print_stacktrace=1:halt_on_error=1"
status=0
t_total=$(date +%s)

run_swift() {  # $1 = address|undefined, $2 = scratch dir
    local san="$1" scratch="$2" log="$2/sanitizer-test.log" t0 rc
    local flags=(--sanitize="$san")
    if [ "$san" = undefined ]; then
        flags=(-Xcc -fsanitize=undefined -Xcc -fno-sanitize-recover=undefined -Xcc -fno-omit-frame-pointer
               -Xswiftc -Xclang-linker -Xswiftc -fsanitize=undefined)
    fi
    mkdir -p "$scratch"
    t0=$(date +%s)
    echo "== swift test --sanitize=$san ($scratch)" >&2
    export CB_SANITIZER="$san"
    set +e
    # Build first (one clean retry: SwiftPM sometimes keeps a stale build
    # description, "unknown build description"), then run.
    if ! swift build --build-tests "${flags[@]}" --scratch-path "$scratch" >"$log.build" 2>&1; then
        rm -f "$scratch/debug.yaml" "$scratch/build.db"
        swift build --build-tests "${flags[@]}" --scratch-path "$scratch" >"$log.build" 2>&1 ||
            { tail -n 30 "$log.build" >&2; echo "sanitize=$san: build failed" >&2; status=1; set -e; return; }
    fi
    echo "sanitize=$san: built in $(( $(date +%s) - t0 )) s" >&2
    ASAN_OPTIONS="$asan_opts" LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="$ubsan_opts" \
        swift test --skip-build "${flags[@]}" --scratch-path "$scratch" >"$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "unknown build description\|no tests found" "$log"; then
        # The same stale-description problem on the test step: run the bundle directly.
        ASAN_OPTIONS="$asan_opts" UBSAN_OPTIONS="$ubsan_opts" \
            "$scratch/debug/CodingBridgeCorePackageTests.xctest" --testing-library swift-testing >"$log" 2>&1
        rc=$?
    fi
    set -e
    # UBSan in Swift test binaries recovers by default for some checks: any
    # "runtime error:" line counts as a failure even when the exit code is 0.
    if grep -qE "runtime error:|ERROR: (Address|Leak)Sanitizer" "$log"; then [ "$rc" -ne 0 ] || rc=1; fi
    grep -E "Test run with" "$log" | tail -n 1 >&2 || true
    if [ "$rc" -ne 0 ]; then
        grep -nE "runtime error:|Sanitizer|✘|failed" "$log" | head -n 40 >&2 || true
        tail -n 30 "$log" >&2
        echo "sanitize=$san: FAILED (log: $log)" >&2
        status=1
    else
        echo "sanitize=$san: clean" >&2
    fi
    echo "sanitize=$san: $(( $(date +%s) - t0 )) s" >&2
}

net_e2e() {  # the ASan daemon under the network e2e tests and the black-box fuzzer
    local scratch="$root/.build-asan" logs t0 rc
    t0=$(date +%s)
    echo "== network e2e against the ASan daemon" >&2
    # (one clean retry: the "unknown build description" of SwiftPM, as above)
    swift build --sanitize=address --scratch-path "$scratch" --product codingbridge >"$scratch/net-build.log" 2>&1 ||
        { rm -f "$scratch/debug.yaml" "$scratch/build.db"
          swift build --sanitize=address --scratch-path "$scratch" --product codingbridge >"$scratch/net-build.log" 2>&1; } ||
        { tail -n 20 "$scratch/net-build.log" >&2; echo "net: build failed" >&2; status=1; return; }
    logs=$(mktemp -d)
    set +e
    ASAN_OPTIONS="${asan_opts/detect_leaks=1/detect_leaks=0}:log_path=$logs/asan" CODINGBRIDGE_BIN="$scratch/debug/codingbridge" \
        python3 -m pytest -q Tests/e2e/test_network.py Tests/e2e/test_network_hostile.py Tests/e2e/test_network_browser.py \
        Tests/e2e/test_devices.py Tests/e2e/test_http_hooks.py Tests/e2e/test_webapp.py Tests/e2e/test_push.py \
        Tests/e2e/test_hook_waits.py 2>&1 | tail -n 15 >&2
    rc=${PIPESTATUS[0]}
    ASAN_OPTIONS="${asan_opts/detect_leaks=1/detect_leaks=0}:log_path=$logs/asan" CODINGBRIDGE_BIN="$scratch/debug/codingbridge" \
        FUZZ_SECONDS="${SAN_FUZZ_SECONDS:-60}" bash Tests/fuzz/blackbox/run.sh || rc=1
    set -e
    if ls "$logs"/asan* >/dev/null 2>&1; then head -n 60 "$logs"/asan* >&2; rc=1; fi
    [ "$rc" -eq 0 ] && echo "net: clean" >&2 || { echo "net: FAILED" >&2; status=1; }
    echo "net: $(( $(date +%s) - t0 )) s" >&2
}

for p in "${parts[@]}"; do
    case "$p" in
    asan) run_swift address "$root/.build-asan"; net_e2e ;;
    ubsan) run_swift undefined "$root/.build-ubsan" ;;
    c)
        t0=$(date +%s)
        echo "== C runtime drivers under ASan+UBSan+LSan" >&2
        export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1"
        for run in Tests/fuzz/*/run.sh; do
            echo "-- $run" >&2
            # The black box drives the ASan daemon (net_e2e, part asan).
            [[ "$run" == *blackbox* ]] && continue
            # The dispatch target is Swift (whole server) with its own options.
            if [[ "$run" == *dispatch* ]]; then
                ASAN_OPTIONS="detect_leaks=0" FUZZ_SECONDS="${SAN_FUZZ_SECONDS:-10}" bash "$run" || status=1
            else
                FUZZ_SECONDS="${SAN_FUZZ_SECONDS:-10}" bash "$run" || status=1
            fi
        done
        echo "C drivers: $(( $(date +%s) - t0 )) s" >&2
        ;;
    *) echo "unknown part $p (asan|ubsan|c)" >&2; exit 64 ;;
    esac
done
echo "sanitizers: total $(( $(date +%s) - t_total )) s" >&2
[ $status -eq 0 ] && echo "sanitizers: all clean" >&2 || echo "sanitizers: FAILED" >&2
exit $status
