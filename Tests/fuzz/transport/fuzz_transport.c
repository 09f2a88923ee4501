/* libFuzzer target: framing detection + decoding + JSON-RPC envelope rules +
 * batch assembly, through an in-memory connection, exactly as stdio input is
 * processed. The input is split into chunks at arbitrary points (the first
 * byte picks the chunk size) to exercise partial reads, then EOF is fed.
 *
 * Oracle beyond "no crash/leak/UB": everything the server wrote must be
 * well-formed frames in the peer's framing, each holding a JSON-RPC 2.0
 * response (or a batch of them) whose error codes are standard ones. */
#define _GNU_SOURCE
#include "cb_conn.h"
#include "cb_jsonrpc.h"
#include "cb_rpc.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HELD 8
static cb_req_t *held[MAX_HELD];
static int nheld;

static void on_call(cb_rpc_t *rpc, cb_conn_t *c, cb_req_t *r, const char *m, size_t n, json_t *p) {
    (void)rpc;
    (void)c;
    if (!r) return;
    /* Some methods answer later (like an approval), in a different order. */
    if (n >= 5 && !memcmp(m, "later", 5) && nheld < MAX_HELD) { held[nheld++] = r; return; }
    if (n == 4 && !memcmp(m, "echo", 4)) { cb_req_result(r, p ? json_incref(p) : NULL); return; }
    if (n == 3 && !memcmp(m, "raw", 3)) { cb_req_result_raw(r, "[1,\"two\",{}]", 12); return; }
    cb_req_error(r, CB_JSONRPC_METHOD_NOT_FOUND, "Method not found", json_pack("{s:s%}", "method", m, n));
}

static void on_conn(cb_rpc_t *rpc, cb_conn_t *c, cb_conn_event ev) { (void)rpc; (void)c; (void)ev; }

static void check_response(json_t *v) {
    if (!json_is_object(v)) abort();
    json_t *ver = json_object_get(v, "jsonrpc");
    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0")) abort();
    if (!json_object_get(v, "id")) abort();
    json_t *res = json_object_get(v, "result"), *err = json_object_get(v, "error");
    if (!res == !err) abort();
    if (err) {
        json_int_t code = json_integer_value(json_object_get(err, "code"));
        if (code != -32700 && code != -32600 && code != -32601 && code != -32602 && code != -32603) abort();
        if (!json_is_string(json_object_get(err, "message"))) abort();
    }
}

static void check_message(const char *p, size_t n) {
    json_error_t e;
    json_t *v = json_loadb(p, n, JSON_ALLOW_NUL, &e);
    if (!v) { fprintf(stderr, "server wrote invalid JSON: %.*s\n", (int)n, p); abort(); }
    if (json_is_array(v)) {
        if (json_array_size(v) == 0) abort(); /* never an empty batch reply */
        for (size_t i = 0; i < json_array_size(v); i++) check_response(json_array_get(v, i));
    } else {
        check_response(v);
    }
    json_decref(v);
}

static void check_output(cb_conn_t *c) {
    size_t len;
    const char *o = cb_conn_output(c, &len);
    size_t i = 0;
    if (cb_conn_framing(c) == CB_FRAMING_LSP) {
        while (i < len) {
            static const char pre[] = "Content-Length: ";
            if (len - i < sizeof pre - 1 || memcmp(o + i, pre, sizeof pre - 1)) abort();
            size_t n = 0, k = i + sizeof pre - 1;
            if (k >= len || o[k] < '0' || o[k] > '9') abort();
            while (k < len && o[k] >= '0' && o[k] <= '9') n = n * 10 + (size_t)(o[k++] - '0');
            const char *body = memmem(o + i, len - i, "\r\n\r\n", 4);
            if (!body) abort();
            body += 4;
            if ((size_t)(body - o) + n > len) abort();
            check_message(body, n);
            i = (size_t)(body - o) + n;
        }
    } else {
        while (i < len) {
            const char *nl = memchr(o + i, '\n', len - i);
            if (!nl) abort();
            check_message(o + i, (size_t)(nl - (o + i)));
            i = (size_t)(nl - o) + 1;
        }
    }
    cb_conn_output_clear(c);
}

/* Differential check of the no-JSON-tree fast path: whatever it accepts,
 * jansson must read as the same request. */
static void check_simple_scan(const char *p, size_t n) {
    cb_jsonrpc_simple_t s;
    if (!cb_jsonrpc_scan_simple(p, n, &s)) return;
    json_t *v = json_loadb(p, n, 0, NULL);
    if (!v || !json_is_object(v)) abort();
    cb_jsonrpc_msg_t m;
    cb_jsonrpc_classify(v, &m);
    if (m.kind != CB_MSG_REQUEST) abort();
    if (m.method_len != s.method_len || memcmp(m.method, s.method, s.method_len)) abort();
    json_t *id = json_loadb(s.id, s.id_len, JSON_DECODE_ANY, NULL);
    if (!id || !json_equal(id, m.id)) abort();
    char *a = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!a || strlen(a) != s.id_len || memcmp(a, s.id, s.id_len)) abort(); /* spliced verbatim */
    free(a);
    json_decref(id);
    json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static cb_rpc_t *rpc;
    if (!rpc) {
        cb_rpc_limits_t l = {0};
        l.max_message_bytes = 2048; /* small, so the size limit is reachable */
        l.max_depth = 32;
        rpc = cb_rpc_new(NULL, &l, on_call, on_conn, NULL);
        cb_rpc_set_static(rpc, "ping", "{}", 2);
    }
    if (size == 0) return 0;
    check_simple_scan((const char *)data + 1, size - 1);
    size_t chunk = 1 + data[0] % 97;
    data++;
    size--;
    cb_conn_t *c = cb_rpc_open_memory(rpc);
    nheld = 0;
    for (size_t off = 0; off < size; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        cb_conn_feed(c, (const char *)data + off, n);
        /* answer one held request midway, out of order */
        if (nheld && (off / chunk) % 3 == 2) {
            cb_req_t *r = held[--nheld];
            if (nheld & 1) cb_req_result(r, json_string("late"));
            else cb_req_result_raw(r, "\"late raw\"", 10);
        }
    }
    cb_conn_feed_eof(c);
    while (nheld) cb_req_error(held[--nheld], CB_JSONRPC_INTERNAL_ERROR, "late failure", NULL);
    check_output(c);
    cb_conn_close(c);
    cb_conn_release(c);
    return 0;
}
