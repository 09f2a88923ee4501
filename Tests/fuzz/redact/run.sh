#!/usr/bin/env bash
# The redaction engine under libFuzzer (see fuzz_redact.c for the properties
# checked). Build, replay, fuzz: Tests/fuzz/lib.sh.
name=redact
source "$(dirname "$0")/../lib.sh"
fuzz_build "libpcre2-8 libuv" "$here/fuzz_redact.c" "$root"/Sources/CBridge/redact.c \
    "$root"/Sources/CBridge/redact_catalog.c "$root"/Sources/CBridge/redact_score.c "$root/Sources/CBridge/error.c"
fuzz_replay
fuzz_run -dict="$here/redact.dict" -max_len=8192
