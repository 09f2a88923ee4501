#!/usr/bin/env bash
# Builds and runs the C unit driver of the timeout scheduler with ASan+UBSan,
# with the Linux timerfd wake-up and with the portable uv timer one.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${TMPDIR:-/tmp}/cb-timeouts-test"
for variant in timerfd uvtimer; do
    flags=()
    [ "$variant" = uvtimer ] && flags=(-DCB_NO_TIMERFD)
    cc -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra -Iinclude "${flags[@]}" \
       Tests/ctime/timeouts_test.c Sources/CBridge/timeouts.c Sources/CBridge/error.c \
       $(pkg-config --cflags --libs libuv) -o "$out-$variant"
    echo "-- wake-up: $variant"
    "$out-$variant"
done
