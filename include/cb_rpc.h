#ifndef CB_RPC_H
#define CB_RPC_H
/* The JSON-RPC endpoint: decodes messages arriving on any connection, applies
 * the envelope rules, answers the few methods whose result never changes (ping,
 * rpc.discover) without leaving C, and hands every other call to the owner
 * (the Swift server) through one callback. Batches are assembled here, so a
 * batch whose members are answered at different times still gets one reply. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct cb_rpc_s cb_rpc_t;
typedef struct cb_conn_s cb_conn_t;
typedef struct cb_req_s cb_req_t;

/* A call for the owner. req is NULL for a notification (no reply allowed);
 * otherwise exactly one cb_req_* reply must follow, now or later. params is
 * borrowed for the duration of the callback (NULL when absent). */
typedef void (*cb_rpc_call_cb)(cb_rpc_t *rpc, cb_conn_t *conn, cb_req_t *req, const char *method,
                               size_t method_len, json_t *params);

typedef enum {
    CB_CONN_EV_EOF = 1,         /* the peer closed its side (or reading failed) */
    CB_CONN_EV_WRITE_ERROR = 2, /* the peer stopped accepting output (EPIPE...) */
    CB_CONN_EV_CLOSED = 3,      /* cb_conn_close finished: output flushed, handles closed */
} cb_conn_event;
typedef void (*cb_rpc_conn_cb)(cb_rpc_t *rpc, cb_conn_t *conn, cb_conn_event ev);

typedef struct {
    size_t max_message_bytes; /* 0: 16 MiB */
    size_t max_depth;         /* 0: CB_JSONRPC_DEFAULT_MAX_DEPTH */
    size_t high_water;        /* queued output above which input is paused (0: 4 MiB) */
    size_t low_water;         /* queued output below which input resumes (0: 1 MiB) */
    size_t notify_limit;      /* queued output above which notifications are dropped (0: 64 MiB) */
} cb_rpc_limits_t;

struct cb_rpc_s {
    void *data; /* the owner's */
    uv_loop_t *loop;
    cb_rpc_call_cb on_call;
    cb_rpc_conn_cb on_conn;
    cb_rpc_limits_t limits;
    struct cb_static_s *statics; /* methods answered in C */
    uint64_t next_conn_id;
    /* counters (read by benchmarks/tests) */
    uint64_t messages, c_answered, dispatched, errors;
};

cb_rpc_t *cb_rpc_new(uv_loop_t *loop, const cb_rpc_limits_t *limits, cb_rpc_call_cb on_call,
                     cb_rpc_conn_cb on_conn, void *data);
void cb_rpc_free(cb_rpc_t *rpc);
/* Answers `method` in C with this fixed result (JSON text, validated here).
 * Params are ignored. 0, CB_EINVAL (not JSON) or CB_ENOMEM. */
int cb_rpc_set_static(cb_rpc_t *rpc, const char *method, const char *json_text, size_t len);

/* Processes one framed message that arrived on conn (the transport calls this;
 * tests and the fuzzers may too). */
void cb_rpc_handle_message(cb_conn_t *conn, const char *text, size_t len);

/* Replies; each consumes req. result/data are stolen (may be NULL = null / absent). */
void cb_req_result(cb_req_t *req, json_t *result);
void cb_req_error(cb_req_t *req, int code, const char *message, json_t *data);
/* A result already serialised as JSON text by the caller (trusted: it is
 * spliced in verbatim). */
void cb_req_result_raw(cb_req_t *req, const char *json, size_t len);
/* The connection the request came in on. */
cb_conn_t *cb_req_conn(cb_req_t *req);
#endif
