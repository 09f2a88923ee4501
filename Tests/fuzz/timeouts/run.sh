#!/usr/bin/env bash
# The timeout scheduler's C checks: first the unit driver (Tests/ctime, ASan +
# UBSan: differential test, mass cancel, re-entrancy, 1 h on the manual clock,
# real clock never early), then a fuzzed program of schedule/cancel/reschedule/
# advance operations (callbacks re-enter) against a reference model.
# Build, replay, fuzz: Tests/fuzz/lib.sh.
name=timeouts
source "$(dirname "$0")/../lib.sh"
echo "timeouts: C unit driver" >&2
TMPDIR="$out" "$root/Tests/ctime/run.sh" >&2
fuzz_build libuv "$here/fuzz_timeouts.c" "$root/Sources/CBridge/timeouts.c" "$root/Sources/CBridge/error.c"
fuzz_replay
fuzz_run -max_len=4096
