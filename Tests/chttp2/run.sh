#!/usr/bin/env bash
# Builds and runs the C unit driver of the push client (HTTP/2 over libcurl)
# with ASan+UBSan against the APNs test server (Tests/e2e/apnsserver.py).
# `run.sh bench [N [CONCURRENCY [URL]]]` measures requests/s on one connection
# instead (built -O2, no sanitizers); URL defaults to the APNs test server.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${TMPDIR:-/tmp}/cb-http2-test"
flags=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all)
[ "${1:-}" = bench ] && { flags=(-O2); out="$out-bench"; }
cc "${flags[@]}" -Wall -Wextra -Iinclude \
   Tests/chttp2/http2_test.c Sources/CBridge/http2.c Sources/CBridge/error.c \
   $(pkg-config --cflags --libs libuv libcurl) -o "$out"
# The server prints "PORT CA_FILE JWT TOPIC STALL_TOKEN DROP_TOKEN GOAWAY_TOKEN" and serves until its stdin closes.
coproc APNS { exec python3 Tests/e2e/apnsserver.py --serve; }
trap 'kill "$APNS_PID" 2>/dev/null || true' EXIT
read -r port ca jwt topic stall drop goaway <&"${APNS[0]}"
if [ "${1:-}" = bench ]; then
    "$out" bench "${4:-https://127.0.0.1:$port/3/device/$(printf '%064d' 7)}" "$ca" "$jwt" "$topic" "${2:-20000}" "${3:-200}"
else
    "$out" "$port" "$ca" "$jwt" "$topic" "$stall" "$drop" "$goaway"
fi
