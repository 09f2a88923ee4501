#!/usr/bin/env bash
# Builds and runs the C unit driver of the unix-socket listener with ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${TMPDIR:-/tmp}/cb-listen-test"
cc -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra -Iinclude \
   Tests/clisten/listen_test.c Sources/CBridge/listen.c Sources/CBridge/conn.c Sources/CBridge/conn_stream.c Sources/CBridge/stdio.c Sources/CBridge/rpc.c \
   Sources/CBridge/framing.c Sources/CBridge/jsonrpc.c Sources/CBridge/buf.c Sources/CBridge/error.c \
   $(pkg-config --cflags --libs libuv jansson) -o "$out"
"$out"
