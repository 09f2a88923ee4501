#ifndef CB_RPC_H
#define CB_RPC_H
/* The JSON-RPC endpoint: the handler of its connections. It decodes the
 * messages they deliver, applies the envelope rules, answers the few methods
 * whose result never changes (ping, rpc.discover) without leaving C, and
 * hands every other call to the owner (the Swift server) through one
 * callback. Batches are assembled here, so a batch whose members are
 * answered at different times still gets one reply.
 *
 * Lifetime: every connection of the endpoint holds a reference to it, so
 * cb_rpc_close only detaches the owner and closes the connections; the
 * memory goes when the last of them is released. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include "cb_conn.h"

typedef struct cb_rpc_s cb_rpc_t;
typedef struct cb_req_s cb_req_t;

/* A call for the owner. req is NULL for a notification (no reply allowed);
 * otherwise exactly one cb_req_* reply must follow, now or later. params is
 * borrowed for the duration of the callback (NULL when absent). */
typedef void (*cb_rpc_call_cb)(cb_rpc_t *rpc, cb_conn_t *conn, cb_req_t *req, const char *method,
                               size_t method_len, json_t *params);
typedef void (*cb_rpc_conn_cb)(cb_rpc_t *rpc, cb_conn_t *conn, cb_conn_event ev);

typedef struct {
    size_t max_message_bytes; /* 0: 16 MiB */
    size_t max_depth;         /* 0: CB_JSONRPC_DEFAULT_MAX_DEPTH */
    size_t high_water;        /* queued output above which input is paused (0: 4 MiB) */
    size_t low_water;         /* queued output below which input resumes (0: high_water / 4) */
    size_t notify_limit;      /* queued output above which notifications are dropped (0: 256 KiB) */
} cb_rpc_limits_t;

typedef struct {
    uint64_t messages, c_answered, dispatched, errors;
} cb_rpc_counters_t;

cb_rpc_t *cb_rpc_new(uv_loop_t *loop, const cb_rpc_limits_t *limits, cb_rpc_call_cb on_call,
                     cb_rpc_conn_cb on_conn, void *data);
/* The owner is done: no callback reaches it any more, open connections are
 * closed (what the kernel does not take at once is discarded), and the
 * memory goes once the last connection is released. */
void cb_rpc_close(cb_rpc_t *rpc);
/* Answers `method` in C with this fixed result (JSON text, validated here).
 * Params are ignored. 0, CB_EINVAL (not JSON) or CB_ENOMEM. */
int cb_rpc_set_static(cb_rpc_t *rpc, const char *method, const char *json_text, size_t len);

void *cb_rpc_data(const cb_rpc_t *rpc);
void cb_rpc_set_data(cb_rpc_t *rpc, void *data);
uv_loop_t *cb_rpc_loop(const cb_rpc_t *rpc);
cb_rpc_counters_t cb_rpc_counters(const cb_rpc_t *rpc);
size_t cb_rpc_notify_limit(const cb_rpc_t *rpc);
/* For the connections open now and those opened later. */
void cb_rpc_set_notify_limit(cb_rpc_t *rpc, size_t limit);

/* Connections of this endpoint. */
cb_conn_t *cb_rpc_open_memory(cb_rpc_t *rpc);
int cb_rpc_open_stdio(cb_rpc_t *rpc, cb_conn_t **out);
/* For transports: what a new connection of this endpoint is created with
 * (CB_ECLOSED after cb_rpc_close). */
int cb_rpc_conn_setup(cb_rpc_t *rpc, cb_conn_setup_t *out);
/* For transports that hold the endpoint (a listener). */
void cb_rpc_retain(cb_rpc_t *rpc);
void cb_rpc_release(cb_rpc_t *rpc);

/* Sends a notification (params borrowed) under the connection's slow-reader
 * policy: CB_ETOOBIG when dropped, CB_ECLOSED once closing. */
int cb_conn_notify(cb_conn_t *c, const char *method, json_t *params);

/* Replies; each consumes req. result/data are stolen (may be NULL = null / absent). */
void cb_req_result(cb_req_t *req, json_t *result);
void cb_req_error(cb_req_t *req, int code, const char *message, json_t *data);
/* A result already serialised as JSON text by the caller (trusted: it is
 * spliced in verbatim). */
void cb_req_result_raw(cb_req_t *req, const char *json, size_t len);
#endif
