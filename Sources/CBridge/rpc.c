#include "cb_rpc.h"
#include "cb_conn.h"
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
    cb_conn_t *conn;
    json_t *id;
    cb_batch_t *batch;
    size_t slot;
};

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
    if (!l->notify_limit) l->notify_limit = 64u << 20;
    rpc->next_conn_id = 1;
    return rpc;
}

void cb_rpc_free(cb_rpc_t *rpc) {
    if (!rpc) return;
    cb_static_t *s = rpc->statics;
    while (s) {
        cb_static_t *n = s->next;
        free(s->method);
        free(s->raw);
        free(s);
        s = n;
    }
    free(rpc);
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

/* Where a reply is serialised: its batch slot, or the connection's scratch. */
static cb_buf_t *target(cb_conn_t *c, cb_batch_t *b, size_t slot) {
    if (b) return &b->slots[slot];
    c->scratch.len = 0;
    return &c->scratch;
}

/* Sends a single reply, or records a batch member's. A batch's replies are
 * capped at the message size limit in total: members past it get -32603
 * instead of their result (a 16 MiB batch of rpc.discover calls would
 * otherwise ask for gigabytes). */
static void emit(cb_conn_t *c, cb_batch_t *b, size_t slot, json_t *id) {
    if (!b) {
        cb_conn_send(c, c->scratch.p, c->scratch.len);
        return;
    }
    size_t cap = c->rpc->limits.max_message_bytes;
    if (b->bytes + b->slots[slot].len > cap) {
        b->slots[slot].len = 0;
        json_t *data = json_pack("{s:s, s:I}", "reason", "the batch's replies exceed the size limit; send fewer requests per batch",
                                 "limit", (json_int_t)cap);
        cb_jsonrpc_write_error(&b->slots[slot], id, CB_JSONRPC_INTERNAL_ERROR, "Internal error", data);
        json_decref(data);
        c->rpc->errors++;
    }
    b->bytes += b->slots[slot].len;
    batch_fill(b);
}

static void reply_error(cb_conn_t *c, cb_batch_t *b, size_t slot, json_t *id, int code,
                        const char *message, json_t *data) {
    c->rpc->errors++;
    cb_jsonrpc_write_error(target(c, b, slot), id, code, message, data);
    json_decref(data);
    emit(c, b, slot, id);
}

static void handle_one(cb_conn_t *c, json_t *v, cb_batch_t *b, size_t slot) {
    cb_rpc_t *rpc = c->rpc;
    cb_jsonrpc_msg_t m;
    cb_jsonrpc_classify(v, &m);
    switch (m.kind) {
    case CB_MSG_INVALID: {
        json_t *data = m.member ? json_pack("{s:s, s:s}", "reason", m.error, "member", m.member)
                                : json_pack("{s:s}", "reason", m.error);
        reply_error(c, b, slot, m.id, CB_JSONRPC_INVALID_REQUEST, "Invalid Request", data);
        return;
    }
    case CB_MSG_RESPONSE:
        /* We send no requests, so a response answers nothing; replying to it
         * could start an error ping-pong with the peer. Ignore it. */
        if (b) batch_fill(b);
        return;
    case CB_MSG_NOTIFICATION:
        if (!find_static(rpc, m.method, m.method_len)) {
            rpc->dispatched++;
            rpc->on_call(rpc, c, NULL, m.method, m.method_len, m.params);
        }
        if (b) batch_fill(b);
        return;
    case CB_MSG_REQUEST: {
        const cb_static_t *s = find_static(rpc, m.method, m.method_len);
        if (s) {
            rpc->c_answered++;
            cb_jsonrpc_write_result_raw(target(c, b, slot), m.id, s->raw, s->raw_len);
            emit(c, b, slot, m.id);
            return;
        }
        cb_req_t *r = malloc(sizeof *r);
        if (!r) {
            reply_error(c, b, slot, m.id, CB_JSONRPC_INTERNAL_ERROR, "Internal error",
                        json_pack("{s:s}", "reason", "out of memory"));
            return;
        }
        r->conn = c;
        cb_conn_retain(c);
        r->id = json_incref(m.id);
        r->batch = b;
        r->slot = slot;
        rpc->dispatched++;
        rpc->on_call(rpc, c, r, m.method, m.method_len, m.params);
        return;
    }
    }
}

void cb_rpc_handle_message(cb_conn_t *c, const char *text, size_t len) {
    cb_rpc_t *rpc = c->rpc;
    rpc->messages++;
    /* Fast path: a plain request for a fixed-result method needs no JSON tree. */
    cb_jsonrpc_simple_t simple;
    if (rpc->statics && cb_jsonrpc_scan_simple(text, len, &simple)) {
        const cb_static_t *s = find_static(rpc, simple.method, simple.method_len);
        if (s) {
            rpc->c_answered++;
            c->scratch.len = 0;
            if (cb_jsonrpc_write_result_raw_id(&c->scratch, simple.id, simple.id_len, s->raw, s->raw_len) == 0)
                cb_conn_send(c, c->scratch.p, c->scratch.len);
            return;
        }
    }
    json_t *err = NULL;
    json_t *v = cb_jsonrpc_parse(text, len, rpc->limits.max_depth, &err);
    if (!v) {
        reply_error(c, NULL, 0, NULL, CB_JSONRPC_PARSE_ERROR, "Parse error", err);
        return;
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if (n == 0) {
            reply_error(c, NULL, 0, NULL, CB_JSONRPC_INVALID_REQUEST, "Invalid Request",
                        json_pack("{s:s}", "reason", "empty batch"));
            json_decref(v);
            return;
        }
        cb_batch_t *b = calloc(1, sizeof *b + n * sizeof(cb_buf_t));
        if (!b) {
            reply_error(c, NULL, 0, NULL, CB_JSONRPC_INTERNAL_ERROR, "Internal error",
                        json_pack("{s:s}", "reason", "out of memory"));
            json_decref(v);
            return;
        }
        b->conn = c;
        cb_conn_retain(c);
        b->n = n;
        b->pending = n + 1; /* held until every member has been dispatched */
        for (size_t i = 0; i < n; i++) handle_one(c, json_array_get(v, i), b, i);
        batch_fill(b);
    } else {
        handle_one(c, v, NULL, 0);
    }
    json_decref(v);
}

cb_conn_t *cb_req_conn(cb_req_t *req) { return req->conn; }

static void req_done(cb_req_t *r) {
    json_decref(r->id);
    cb_conn_release(r->conn);
    free(r);
}

void cb_req_result(cb_req_t *r, json_t *result) {
    cb_conn_t *c = r->conn;
    if (!c->closed) {
        cb_buf_t *t = target(c, r->batch, r->slot);
        if (cb_jsonrpc_write_result(t, r->id, result) != 0) {
            c->rpc->errors++;
            t->len = 0;
            cb_jsonrpc_write_error(t, r->id, CB_JSONRPC_INTERNAL_ERROR, "Internal error", NULL);
        }
        emit(c, r->batch, r->slot, r->id);
    } else if (r->batch) {
        batch_fill(r->batch);
    }
    json_decref(result);
    req_done(r);
}

void cb_req_result_raw(cb_req_t *r, const char *json, size_t len) {
    cb_conn_t *c = r->conn;
    if (!c->closed) {
        cb_buf_t *t = target(c, r->batch, r->slot);
        size_t mark = t->len;
        int rc = cb_buf_append(t, "{\"jsonrpc\":\"2.0\",\"id\":", 22);
        if (!rc) rc = cb_jsonrpc_write_value(t, r->id);
        if (!rc) rc = cb_buf_append(t, ",\"result\":", 10);
        if (!rc) rc = cb_buf_append(t, json, len);
        if (!rc) rc = cb_buf_append(t, "}", 1);
        if (rc) {
            c->rpc->errors++;
            t->len = mark;
            cb_jsonrpc_write_error(t, r->id, CB_JSONRPC_INTERNAL_ERROR, "Internal error", NULL);
        }
        emit(c, r->batch, r->slot, r->id);
    } else if (r->batch) {
        batch_fill(r->batch);
    }
    req_done(r);
}

void cb_req_error(cb_req_t *r, int code, const char *message, json_t *data) {
    cb_conn_t *c = r->conn;
    if (!c->closed) {
        c->rpc->errors++;
        cb_jsonrpc_write_error(target(c, r->batch, r->slot), r->id, code, message, data);
        emit(c, r->batch, r->slot, r->id);
    } else if (r->batch) {
        batch_fill(r->batch);
    }
    json_decref(data);
    req_done(r);
}
