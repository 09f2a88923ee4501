#include "cb_conn.h"
#include "cb_error.h"
#include "cb_jsonrpc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void notify_owner(cb_conn_t *c, cb_conn_event ev);

static cb_conn_t *conn_new(cb_rpc_t *rpc, const cb_conn_ops_t *ops) {
    cb_conn_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->rpc = rpc;
    c->ops = ops;
    c->id = rpc->next_conn_id++;
    c->refs = 1; /* the owner's; dropped with cb_conn_release after CLOSED */
    cb_framer_init(&c->in, rpc->limits.max_message_bytes);
    return c;
}

void cb_conn_retain(cb_conn_t *c) { c->refs++; }

void cb_conn_release(cb_conn_t *c) {
    if (--c->refs > 0) return;
    cb_framer_free(&c->in);
    cb_buf_free(&c->out);
    cb_buf_free(&c->scratch);
    free(c);
}

cb_framing_kind cb_conn_framing(const cb_conn_t *c) { return c->in.kind; }
size_t cb_conn_queued(const cb_conn_t *c) { return c->out.len + c->inflight; }

void cb_conn__flush(cb_conn_t *c) {
    c->flush_scheduled = 0;
    if (!c->out.len || !c->ops || !c->ops->write) return;
    if (c->write_failed) { c->out.len = 0; return; }
    int rc = c->ops->write(c);
    if (rc < 0) {
        c->write_failed = 1;
        c->out.len = 0;
        notify_owner(c, CB_CONN_EV_WRITE_ERROR);
    }
}

static void schedule_flush(cb_conn_t *c) {
    /* Inside input processing the flush happens once the chunk is decoded, so
     * a burst of pipelined requests is answered with a single write. */
    if (c->in_dispatch || c->flush_scheduled || !c->ops || !c->ops->write) return;
    c->flush_scheduled = 1;
    if (c->ops->wake) c->ops->wake(c);
    else cb_conn__flush(c);
}

static int frame_out(cb_conn_t *c, const char *json, size_t len) {
    int rc;
    if (c->in.kind == CB_FRAMING_LSP) {
        char hdr[64];
        int n = snprintf(hdr, sizeof hdr, "Content-Length: %zu\r\n\r\n", len);
        rc = cb_buf_reserve(&c->out, (size_t)n + len);
        if (rc) return rc;
        cb_buf_append(&c->out, hdr, (size_t)n);
        cb_buf_append(&c->out, json, len);
    } else {
        /* NDJSON, and also before the peer has said anything */
        rc = cb_buf_reserve(&c->out, len + 1);
        if (rc) return rc;
        cb_buf_append(&c->out, json, len);
        cb_buf_append(&c->out, "\n", 1);
    }
    return 0;
}

int cb_conn_send(cb_conn_t *c, const char *json, size_t len) {
    if (c->closed || c->write_failed) return CB_ECLOSED;
    int rc = frame_out(c, json, len);
    if (rc) return rc;
    schedule_flush(c);
    return 0;
}

int cb_conn_notify(cb_conn_t *c, const char *method, json_t *params) {
    if (c->closed || c->closing || c->write_failed) return CB_ECLOSED;
    if (cb_conn_queued(c) > c->rpc->limits.notify_limit) {
        c->dropped_notifications++;
        return CB_ETOOBIG;
    }
    cb_buf_t b = {0};
    int rc = cb_jsonrpc_write_notification(&b, method, params);
    if (!rc) rc = cb_conn_send(c, b.p, b.len);
    cb_buf_free(&b);
    return rc;
}

static void pause_input(cb_conn_t *c) {
    if (c->paused) return;
    c->paused = 1;
    c->pauses++;
    if (c->ops && c->ops->read_stop) c->ops->read_stop(c);
}

static int over_high_water(cb_conn_t *c) {
    return c->ops && c->ops->write && cb_conn_queued(c) > c->rpc->limits.high_water;
}

static void send_error(cb_conn_t *c, int code, const char *message, json_t *data) {
    c->rpc->errors++;
    c->scratch.len = 0;
    cb_jsonrpc_write_error(&c->scratch, NULL, code, message, data);
    json_decref(data);
    cb_conn_send(c, c->scratch.p, c->scratch.len);
}

static int on_frame(void *data, cb_frame_event ev, const char *bytes, size_t len, const char *detail) {
    cb_conn_t *c = data;
    if (c->closing) return 1;
    switch (ev) {
    case CB_FRAME_MESSAGE:
        cb_rpc_handle_message(c, bytes, len);
        break;
    case CB_FRAME_TOO_BIG:
        send_error(c, CB_JSONRPC_INVALID_REQUEST, "Message too large",
                   json_pack("{s:s, s:I, s:I}", "reason", detail, "size", (json_int_t)len, "limit",
                             (json_int_t)c->rpc->limits.max_message_bytes));
        break;
    case CB_FRAME_BAD_HEADER:
        send_error(c, CB_JSONRPC_PARSE_ERROR, "Parse error", json_pack("{s:s}", "reason", detail));
        break;
    case CB_FRAME_TRUNCATED:
        send_error(c, CB_JSONRPC_PARSE_ERROR, "Parse error",
                   json_pack("{s:s, s:I}", "reason", detail, "received", (json_int_t)len));
        break;
    }
    if (c->closing) return 1;
    if (over_high_water(c)) {
        /* flush now: the pause lasts until the transport has written enough */
        c->in_dispatch = 0;
        cb_conn__flush(c);
        c->in_dispatch = 1;
        if (over_high_water(c)) { pause_input(c); return 1; }
    }
    return 0;
}

/* The owner may drop its reference from inside an event callback. */
static void notify_owner(cb_conn_t *c, cb_conn_event ev) {
    cb_conn_retain(c);
    c->rpc->on_conn(c->rpc, c, ev);
    cb_conn_release(c);
}

static void finish_input(cb_conn_t *c) {
    c->in_dispatch = 1;
    cb_framer_finish(&c->in, on_frame, c);
    c->in_dispatch = 0;
    cb_conn__flush(c);
    notify_owner(c, CB_CONN_EV_EOF);
}

void cb_conn__input(cb_conn_t *c, size_t n) {
    cb_conn_retain(c);
    c->bytes_in += n;
    c->in_dispatch = 1;
    int paused = cb_framer_commit(&c->in, n, on_frame, c);
    c->in_dispatch = 0;
    if (paused && !c->closing) pause_input(c);
    cb_conn__flush(c);
    cb_conn_release(c);
}

void cb_conn__input_eof(cb_conn_t *c) {
    c->eof = 1;
    if (c->paused || c->closing) return; /* resumed (or dropped) later */
    finish_input(c);
}

static void maybe_close(cb_conn_t *c) {
    if (c->closing && !c->closed && c->inflight == 0 && !c->out.len) {
        c->closed = 1; /* no more output accepted from here on */
        if (c->ops && c->ops->close) c->ops->close(c);
        else cb_conn__closed(c);
    }
}

void cb_conn__written(cb_conn_t *c, size_t n, int status) {
    c->inflight -= n;
    c->bytes_out += n;
    cb_conn_retain(c);
    if (status < 0 && !c->write_failed) {
        c->write_failed = 1;
        c->out.len = 0;
        notify_owner(c, CB_CONN_EV_WRITE_ERROR);
    }
    if (c->write_failed) c->out.len = 0;
    if (c->paused && !c->closing && cb_conn_queued(c) < c->rpc->limits.low_water) {
        c->paused = 0;
        cb_conn_retain(c);
        cb_conn__input(c, 0); /* decode what was buffered while paused */
        if (!c->paused && !c->closing) {
            if (c->eof) finish_input(c);
            else if (c->ops->read_start) c->ops->read_start(c);
        }
        cb_conn_release(c);
    }
    maybe_close(c);
    cb_conn_release(c);
}

void cb_conn__closed(cb_conn_t *c) {
    c->closed = 1;
    notify_owner(c, CB_CONN_EV_CLOSED);
}

void cb_conn_abort(cb_conn_t *c) {
    /* Nothing more will be written: what is queued is discarded, and no
     * WRITE_ERROR event fires for writes cancelled by the close below. */
    c->write_failed = 1;
    c->out.len = 0;
    cb_conn_close(c);
    /* Still waiting for writes in flight (a peer that does not read): close
     * the transport now; libuv cancels them, their callbacks running before
     * the handles' close callbacks. */
    if (!c->closed && c->ops && c->ops->close) {
        c->closed = 1;
        c->ops->close(c);
    }
}

void cb_conn_close(cb_conn_t *c) {
    if (c->closing) return;
    c->closing = 1;
    if (c->ops && c->ops->read_stop) c->ops->read_stop(c);
    cb_conn__flush(c);
    if (c->write_failed) c->out.len = 0;
    /* in-memory peers keep their collected output until it is read */
    if (!c->ops || !c->ops->write) {
        c->closed = 1;
        cb_conn__closed(c);
        return;
    }
    maybe_close(c);
}

/* ---- in-memory transport ---- */

static const cb_conn_ops_t memory_ops = {0};

cb_conn_t *cb_conn_open_memory(cb_rpc_t *rpc) { return conn_new(rpc, &memory_ops); }

int cb_conn_feed(cb_conn_t *c, const char *bytes, size_t n) {
    if (c->closing || c->closed) return CB_ECLOSED;
    cb_conn_retain(c);
    c->bytes_in += n;
    c->in_dispatch = 1;
    int rc = cb_framer_feed(&c->in, bytes, n, on_frame, c);
    c->in_dispatch = 0;
    cb_conn_release(c);
    return rc < 0 ? rc : 0;
}

void cb_conn_feed_eof(cb_conn_t *c) {
    if (c->closing || c->closed) return;
    c->eof = 1;
    finish_input(c);
}

const char *cb_conn_output(cb_conn_t *c, size_t *len) {
    *len = c->out.len;
    return c->out.p;
}

void cb_conn_output_clear(cb_conn_t *c) { c->out.len = 0; }

/* used by conn_new callers in stdio.c */
cb_conn_t *cb_conn__new(cb_rpc_t *rpc, const cb_conn_ops_t *ops) { return conn_new(rpc, ops); }
