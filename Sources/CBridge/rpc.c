#include "cb_rpc.h"
#include "cb_error.h"
#include "cb_jsonrpc.h"
#include <stdlib.h>
#include <string.h>

typedef struct cb_static_s {
    struct cb_static_s *next;
    char *method;
    size_t method_len;
    char *raw;
    size_t raw_len;
} cb_static_t;

/* A batch collects its members' replies (serialised, in request order) and is
 * sent as one array when the last member is answered. */
typedef struct {
    cb_conn_t *conn;
    size_t n, pending;
    size_t bytes; /* reply bytes so far; capped so one batch cannot amplify without bound */
    cb_buf_t slots[];
} cb_batch_t;

struct cb_req_s {
    cb_rpc_t *rpc;
    cb_conn_t *conn;
    json_t *id;
    cb_batch_t *batch;
    size_t slot;
};

struct cb_rpc_s {
    void *data; /* the owner's; NULL once closed */
    uv_loop_t *loop;
    cb_rpc_call_cb on_call;
    cb_rpc_conn_cb on_conn;
    cb_rpc_limits_t limits;
    cb_static_t *statics; /* methods answered in C */
    uint64_t next_conn_id;
    cb_rpc_counters_t counters;
    cb_buf_t scratch; /* one reply being serialised */
    cb_conn_t **conns; /* every connection not yet freed (each holds a reference) */
    size_t nconns, conns_cap;
    int refs, closed;
};

static void handle_message(void *data, cb_conn_t *c, const char *text, size_t len);
static void handle_frame_error(void *data, cb_conn_t *c, cb_frame_event ev, size_t len, const char *detail);

cb_rpc_t *cb_rpc_new(uv_loop_t *loop, const cb_rpc_limits_t *limits, cb_rpc_call_cb on_call,
                     cb_rpc_conn_cb on_conn, void *data) {
    cb_rpc_t *rpc = calloc(1, sizeof *rpc);
    if (!rpc) return NULL;
    rpc->loop = loop;
    rpc->on_call = on_call;
    rpc->on_conn = on_conn;
    rpc->data = data;
    if (limits) rpc->limits = *limits;
    cb_rpc_limits_t *l = &rpc->limits;
    if (!l->max_message_bytes) l->max_message_bytes = 16u << 20;
    if (!l->max_depth) l->max_depth = CB_JSONRPC_DEFAULT_MAX_DEPTH;
    if (!l->high_water) l->high_water = 4u << 20;
    if (!l->low_water || l->low_water > l->high_water) l->low_water = l->high_water / 4;
    if (!l->notify_limit) l->notify_limit = 256u << 10;
    rpc->next_conn_id = 1;
    rpc->refs = 1; /* the owner's, until cb_rpc_close */
    return rpc;
}

static void rpc_free(cb_rpc_t *rpc) {
    cb_static_t *s = rpc->statics;
    while (s) {
        cb_static_t *n = s->next;
        free(s->method);
        free(s->raw);
        free(s);
        s = n;
    }
    cb_buf_free(&rpc->scratch);
    free(rpc->conns);
    free(rpc);
}

void cb_rpc_retain(cb_rpc_t *rpc) { rpc->refs++; }

void cb_rpc_release(cb_rpc_t *rpc) {
    if (--rpc->refs == 0) rpc_free(rpc);
}

void cb_rpc_close(cb_rpc_t *rpc) {
    if (!rpc || rpc->closed) return;
    rpc->closed = 1;
    rpc->data = NULL;
    /* Closing may free connections (and shrink the list) as it goes: work
     * on a held copy. */
    size_t n = rpc->nconns;
    cb_conn_t **open = n ? malloc(n * sizeof *open) : NULL;
    if (open) memcpy(open, rpc->conns, n * sizeof *open);
    else n = 0;
    for (size_t i = 0; i < n; i++) cb_conn_retain(open[i]);
    for (size_t i = 0; i < n; i++) {
        if (cb_conn_is_closed(open[i])) continue;
        cb_conn_close(open[i]);  /* hands the kernel what it takes now */
        cb_conn_abort(open[i]);  /* and drops what a slow reader left */
    }
    for (size_t i = 0; i < n; i++) cb_conn_release(open[i]);
    free(open);
    cb_rpc_release(rpc);
}

void *cb_rpc_data(const cb_rpc_t *rpc) { return rpc->data; }
void cb_rpc_set_data(cb_rpc_t *rpc, void *data) { if (!rpc->closed) rpc->data = data; }
uv_loop_t *cb_rpc_loop(const cb_rpc_t *rpc) { return rpc->loop; }
cb_rpc_counters_t cb_rpc_counters(const cb_rpc_t *rpc) { return rpc->counters; }
size_t cb_rpc_notify_limit(const cb_rpc_t *rpc) { return rpc->limits.notify_limit; }

void cb_rpc_set_notify_limit(cb_rpc_t *rpc, size_t limit) {
    rpc->limits.notify_limit = limit;
    for (size_t i = 0; i < rpc->nconns; i++) cb_conn_set_notify_limit(rpc->conns[i], limit);
}

/* ---- the connection handler ---- */

static int conn_opened(void *data, cb_conn_t *c) {
    cb_rpc_t *rpc = data;
    if (rpc->nconns == rpc->conns_cap) {
        size_t cap = rpc->conns_cap ? rpc->conns_cap * 2 : 16;
        cb_conn_t **p = realloc(rpc->conns, cap * sizeof *p);
        if (!p) return CB_ENOMEM;
        rpc->conns = p;
        rpc->conns_cap = cap;
    }
    rpc->conns[rpc->nconns++] = c;
    rpc->refs++;
    return 0;
}

static void conn_freed(void *data, cb_conn_t *c) {
    cb_rpc_t *rpc = data;
    for (size_t i = rpc->nconns; i-- > 0;) {
        if (rpc->conns[i] != c) continue;
        rpc->conns[i] = rpc->conns[--rpc->nconns];
        break;
    }
    cb_rpc_release(rpc);
}

static void conn_event(void *data, cb_conn_t *c, cb_conn_event ev) {
    cb_rpc_t *rpc = data;
    if (!rpc->closed && rpc->on_conn) rpc->on_conn(rpc, c, ev);
}

int cb_rpc_conn_setup(cb_rpc_t *rpc, cb_conn_setup_t *out) {
    if (rpc->closed) return CB_ECLOSED;
    memset(out, 0, sizeof *out);
    out->loop = rpc->loop;
    out->id = rpc->next_conn_id++;
    out->handler = (cb_conn_handler_t){
        .on_message = handle_message,
        .on_frame_error = handle_frame_error,
        .on_event = conn_event,
        .on_open = conn_opened,
        .on_free = conn_freed,
        .data = rpc,
    };
    out->limits = (cb_conn_limits_t){
        .max_message_bytes = rpc->limits.max_message_bytes,
        .high_water = rpc->limits.high_water,
        .low_water = rpc->limits.low_water,
        .notify_limit = rpc->limits.notify_limit,
    };
    return 0;
}

cb_conn_t *cb_rpc_open_memory(cb_rpc_t *rpc) {
    cb_conn_setup_t setup;
    return cb_rpc_conn_setup(rpc, &setup) ? NULL : cb_conn_new_memory(&setup);
}

int cb_rpc_open_stdio(cb_rpc_t *rpc, cb_conn_t **out) {
    cb_conn_setup_t setup;
    int rc = cb_rpc_conn_setup(rpc, &setup);
    return rc ? rc : cb_conn_new_stdio(&setup, out);
}

int cb_conn_notify(cb_conn_t *c, const char *method, json_t *params) {
    if (cb_conn_is_closing(c)) return CB_ECLOSED;
    cb_buf_t b = {0};
    int rc = cb_jsonrpc_write_notification(&b, method, params);
    if (!rc) rc = cb_conn_send_notification(c, b.p, b.len);
    cb_buf_free(&b);
    return rc;
}

int cb_rpc_set_static(cb_rpc_t *rpc, const char *method, const char *json_text, size_t len) {
    json_error_t err;
    json_t *v = json_loadb(json_text, len, JSON_DECODE_ANY, &err);
    if (!v) return CB_EINVAL;
    /* store the compact form: it is spliced verbatim into every reply */
    cb_buf_t b = {0};
    int rc = cb_jsonrpc_write_value(&b, v);
    json_decref(v);
    if (rc) { cb_buf_free(&b); return rc; }
    size_t mlen = strlen(method);
    for (cb_static_t *s = rpc->statics; s; s = s->next) {
        if (s->method_len == mlen && !memcmp(s->method, method, mlen)) {
            free(s->raw);
            s->raw = cb_buf_detach(&b, &s->raw_len);
            return 0;
        }
    }
    cb_static_t *s = calloc(1, sizeof *s);
    if (!s || !(s->method = strdup(method))) { free(s); cb_buf_free(&b); return CB_ENOMEM; }
    s->method_len = mlen;
    s->raw = cb_buf_detach(&b, &s->raw_len);
    s->next = rpc->statics;
    rpc->statics = s;
    return 0;
}

static const cb_static_t *find_static(cb_rpc_t *rpc, const char *m, size_t n) {
    for (const cb_static_t *s = rpc->statics; s; s = s->next)
        if (s->method_len == n && !memcmp(s->method, m, n)) return s;
    return NULL;
}

static void batch_fill(cb_batch_t *b) {
    if (--b->pending) return;
    cb_conn_t *c = b->conn;
    cb_buf_t all = {0};
    int any = 0, rc = cb_buf_append(&all, "[", 1);
    for (size_t i = 0; i < b->n && !rc; i++) {
        if (!b->slots[i].len) continue; /* a notification: no entry */
        if (any) rc = cb_buf_append(&all, ",", 1);
        if (!rc) rc = cb_buf_append(&all, b->slots[i].p, b->slots[i].len);
        any = 1;
    }
    if (!rc) rc = cb_buf_append(&all, "]", 1);
    /* An all-notification batch gets no reply at all (spec section 6). */
    if (any && !rc) cb_conn_send(c, all.p, all.len);
    cb_buf_free(&all);
    for (size_t i = 0; i < b->n; i++) cb_buf_free(&b->slots[i]);
    free(b);
    cb_conn_release(c);
}

/* Where a reply is serialised: its batch slot, or the endpoint's scratch
 * (sent before anything can run that would reuse it). */
static cb_buf_t *target(cb_rpc_t *rpc, cb_batch_t *b, size_t slot) {
    if (b) return &b->slots[slot];
    rpc->scratch.len = 0;
    return &rpc->scratch;
}

/* Sends a single reply, or records a batch member's. A batch's replies are
 * capped at the message size limit in total: members past it get -32603
 * instead of their result (a 16 MiB batch of rpc.discover calls would
 * otherwise ask for gigabytes). */
static void emit(cb_rpc_t *rpc, cb_conn_t *c, cb_batch_t *b, size_t slot, json_t *id) {
    if (!b) {
        cb_conn_send(c, rpc->scratch.p, rpc->scratch.len);
        return;
    }
    size_t cap = rpc->limits.max_message_bytes;
    if (b->bytes + b->slots[slot].len > cap) {
        b->slots[slot].len = 0;
        json_t *data = json_pack("{s:s, s:I}", "reason", "the batch's replies exceed the size limit; send fewer requests per batch",
                                 "limit", (json_int_t)cap);
        cb_jsonrpc_write_error(&b->slots[slot], id, CB_JSONRPC_INTERNAL_ERROR, "Internal error", data);
        json_decref(data);
        rpc->counters.errors++;
    }
    b->bytes += b->slots[slot].len;
    batch_fill(b);
}

static void reply_error(cb_rpc_t *rpc, cb_conn_t *c, cb_batch_t *b, size_t slot, json_t *id, int code,
                        const char *message, json_t *data) {
    rpc->counters.errors++;
    cb_jsonrpc_write_error(target(rpc, b, slot), id, code, message, data);
    json_decref(data);
    emit(rpc, c, b, slot, id);
}

/* A frame that never became a message: the peer hears why, as from a
 * message that failed to parse. */
static void handle_frame_error(void *data, cb_conn_t *c, cb_frame_event ev, size_t len, const char *detail) {
    cb_rpc_t *rpc = data;
    json_t *d;
    int code = CB_JSONRPC_PARSE_ERROR;
    const char *message = "Parse error";
    if (ev == CB_FRAME_TOO_BIG) {
        code = CB_JSONRPC_INVALID_REQUEST;
        message = "Message too large";
        d = json_pack("{s:s, s:I, s:I}", "reason", detail, "size", (json_int_t)len, "limit",
                      (json_int_t)rpc->limits.max_message_bytes);
    } else if (ev == CB_FRAME_TRUNCATED) {
        d = json_pack("{s:s, s:I}", "reason", detail, "received", (json_int_t)len);
    } else {
        d = json_pack("{s:s}", "reason", detail);
    }
    reply_error(rpc, c, NULL, 0, NULL, code, message, d);
}

static void call_owner(cb_rpc_t *rpc, cb_conn_t *c, const cb_jsonrpc_msg_t *m, json_t *id,
                       cb_batch_t *b, size_t slot) {
    cb_req_t *r = malloc(sizeof *r);
    if (!r) {
        reply_error(rpc, c, b, slot, id, CB_JSONRPC_INTERNAL_ERROR, "Internal error",
                    json_pack("{s:s}", "reason", "out of memory"));
        return;
    }
    r->rpc = rpc;
    r->conn = c;
    cb_conn_retain(c);
    r->id = json_incref(id);
    r->batch = b;
    r->slot = slot;
    rpc->counters.dispatched++;
    rpc->on_call(rpc, c, r, m->method, m->method_len, m->params);
}

static void handle_one(cb_rpc_t *rpc, cb_conn_t *c, json_t *v, cb_batch_t *b, size_t slot) {
    cb_jsonrpc_msg_t m;
    cb_jsonrpc_classify(v, &m);
    const cb_static_t *s = NULL;
    switch (m.kind) {
    case CB_MSG_INVALID: {
        json_t *data = m.member ? json_pack("{s:s, s:s}", "reason", m.error, "member", m.member)
                                : json_pack("{s:s}", "reason", m.error);
        reply_error(rpc, c, b, slot, m.id, CB_JSONRPC_INVALID_REQUEST, "Invalid Request", data);
        return;
    }
    case CB_MSG_RESPONSE:
        /* We send no requests, so a response answers nothing; replying to it
         * could start an error ping-pong with the peer. Ignore it. */
        break;
    case CB_MSG_NOTIFICATION:
        if (!find_static(rpc, m.method, m.method_len)) {
            rpc->counters.dispatched++;
            rpc->on_call(rpc, c, NULL, m.method, m.method_len, m.params);
        }
        break;
    case CB_MSG_REQUEST:
        if (!(s = find_static(rpc, m.method, m.method_len))) {
            call_owner(rpc, c, &m, m.id, b, slot);
            return;
        }
        rpc->counters.c_answered++;
        cb_jsonrpc_write_result_raw(target(rpc, b, slot), m.id, s->raw, s->raw_len);
        emit(rpc, c, b, slot, m.id);
        return;
    }
    if (b) batch_fill(b);
}

/* A plain request for a fixed-result method needs no JSON tree. */
static int answer_static_fast(cb_rpc_t *rpc, cb_conn_t *c, const char *text, size_t len) {
    cb_jsonrpc_simple_t simple;
    if (!rpc->statics || !cb_jsonrpc_scan_simple(text, len, &simple)) return 0;
    const cb_static_t *s = find_static(rpc, simple.method, simple.method_len);
    if (!s) return 0;
    rpc->counters.c_answered++;
    rpc->scratch.len = 0;
    if (cb_jsonrpc_write_result_raw_id(&rpc->scratch, simple.id, simple.id_len, s->raw, s->raw_len) == 0)
        cb_conn_send(c, rpc->scratch.p, rpc->scratch.len);
    return 1;
}

static void handle_batch(cb_rpc_t *rpc, cb_conn_t *c, json_t *v) {
    size_t n = json_array_size(v);
    if (n == 0) {
        reply_error(rpc, c, NULL, 0, NULL, CB_JSONRPC_INVALID_REQUEST, "Invalid Request",
                    json_pack("{s:s}", "reason", "empty batch"));
        return;
    }
    cb_batch_t *b = calloc(1, sizeof *b + n * sizeof(cb_buf_t));
    if (!b) {
        reply_error(rpc, c, NULL, 0, NULL, CB_JSONRPC_INTERNAL_ERROR, "Internal error",
                    json_pack("{s:s}", "reason", "out of memory"));
        return;
    }
    b->conn = c;
    cb_conn_retain(c);
    b->n = n;
    b->pending = n + 1; /* held until every member has been dispatched */
    for (size_t i = 0; i < n; i++) handle_one(rpc, c, json_array_get(v, i), b, i);
    batch_fill(b);
}

static void handle_message(void *data, cb_conn_t *c, const char *text, size_t len) {
    cb_rpc_t *rpc = data;
    if (rpc->closed) return; /* nobody left to answer it */
    rpc->counters.messages++;
    if (answer_static_fast(rpc, c, text, len)) return;
    json_t *err = NULL;
    json_t *v = cb_jsonrpc_parse(text, len, rpc->limits.max_depth, &err);
    if (!v) {
        reply_error(rpc, c, NULL, 0, NULL, CB_JSONRPC_PARSE_ERROR, "Parse error", err);
        return;
    }
    if (json_is_array(v)) handle_batch(rpc, c, v);
    else handle_one(rpc, c, v, NULL, 0);
    json_decref(v);
}

static void req_done(cb_req_t *r) {
    json_decref(r->id);
    cb_conn_release(r->conn);
    free(r);
}

/* Writes a reply with `write` into the request's target and sends or
 * records it; a reply that cannot be written becomes -32603. Nothing goes
 * to a closed connection (a batch still counts the member as answered). */
typedef int (*reply_writer)(cb_buf_t *out, json_t *id, const void *a, size_t n);

static void reply(cb_req_t *r, reply_writer write, const void *a, size_t n) {
    cb_conn_t *c = r->conn;
    cb_rpc_t *rpc = r->rpc;
    if (cb_conn_is_closed(c)) {
        if (r->batch) batch_fill(r->batch);
        req_done(r);
        return;
    }
    cb_buf_t *t = target(rpc, r->batch, r->slot);
    if (write(t, r->id, a, n) != 0) {
        rpc->counters.errors++;
        cb_jsonrpc_write_error(t, r->id, CB_JSONRPC_INTERNAL_ERROR, "Internal error", NULL);
    }
    emit(rpc, c, r->batch, r->slot, r->id);
    req_done(r);
}

static int write_result(cb_buf_t *out, json_t *id, const void *result, size_t n) {
    (void)n;
    return cb_jsonrpc_write_result(out, id, (json_t *)result);
}

static int write_result_raw(cb_buf_t *out, json_t *id, const void *json, size_t len) {
    return cb_jsonrpc_write_result_raw(out, id, json, len);
}

typedef struct {
    int code;
    const char *message;
    json_t *data;
} error_args_t;

static int write_error(cb_buf_t *out, json_t *id, const void *args, size_t n) {
    const error_args_t *e = args;
    (void)n;
    return cb_jsonrpc_write_error(out, id, e->code, e->message, e->data);
}

void cb_req_result(cb_req_t *r, json_t *result) {
    reply(r, write_result, result, 0);
    json_decref(result);
}

void cb_req_result_raw(cb_req_t *r, const char *json, size_t len) {
    reply(r, write_result_raw, json, len);
}

void cb_req_error(cb_req_t *r, int code, const char *message, json_t *data) {
    error_args_t e = {code, message, data};
    if (!cb_conn_is_closed(r->conn)) r->rpc->counters.errors++;
    reply(r, write_error, &e, 0);
    json_decref(data);
}
