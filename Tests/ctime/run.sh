#!/usr/bin/env bash
# Builds and runs the C unit driver of the timeout scheduler with ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${TMPDIR:-/tmp}/cb-timeouts-test"
cc -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra -Iinclude \
   Tests/ctime/timeouts_test.c Sources/CBridge/timeouts.c Sources/CBridge/error.c \
   $(pkg-config --cflags --libs libuv) -o "$out"
"$out"
