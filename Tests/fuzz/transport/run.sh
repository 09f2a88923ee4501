#!/usr/bin/env bash
# The transport fuzzer: framing + JSON-RPC decoding (C), with an output oracle
# (see fuzz_transport.c). Build, replay, fuzz: Tests/fuzz/lib.sh.
name=transport
source "$(dirname "$0")/../lib.sh"
srcs=(buf framing jsonrpc rpc conn conn_stream stdio error)
fuzz_build "jansson libuv" "$here/fuzz_transport.c" $(printf "$root/Sources/CBridge/%s.c " "${srcs[@]}")
fuzz_replay
fuzz_run -dict="$here/transport.dict" -max_len=8192
