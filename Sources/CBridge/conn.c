#include "conn_private.h"
#include "cb_error.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void notify_handler(cb_conn_t *c, cb_conn_event ev);

static void fill_limits(cb_conn_limits_t *l, const cb_conn_limits_t *given) {
    *l = *given;
    if (!l->max_message_bytes) l->max_message_bytes = 16u << 20;
    if (!l->high_water) l->high_water = 4u << 20;
    if (!l->low_water || l->low_water > l->high_water) l->low_water = l->high_water / 4;
    if (!l->notify_limit) l->notify_limit = 256u << 10;
}

cb_conn_t *cb_conn__new(const cb_conn_setup_t *setup, const cb_conn_ops_t *ops) {
    cb_conn_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->handler = setup->handler;
    c->id = setup->id;
    c->ops = ops;
    fill_limits(&c->limits, &setup->limits);
    c->refs = 2; /* the owner's, and the transport's until CLOSED */
    cb_framer_init(&c->in, c->limits.max_message_bytes);
    if (c->handler.on_open && c->handler.on_open(c->handler.data, c) != 0) {
        c->handler.on_free = NULL; /* the handler never took it */
        cb_conn__discard(c);
        return NULL;
    }
    return c;
}

void cb_conn_retain(cb_conn_t *c) { c->refs++; }

void cb_conn_release(cb_conn_t *c) {
    if (--c->refs > 0) return;
    if (c->handler.on_free) c->handler.on_free(c->handler.data, c);
    cb_framer_free(&c->in);
    cb_buf_free(&c->out);
    free(c);
}

void cb_conn__discard(cb_conn_t *c) {
    c->closed = 1;
    c->transport_done = 1;
    c->refs = 1;
    cb_conn_release(c);
}

uint64_t cb_conn_id(const cb_conn_t *c) { return c->id; }
void *cb_conn_data(const cb_conn_t *c) { return c->data; }
void cb_conn_set_data(cb_conn_t *c, void *data) { c->data = data; }
cb_transport_kind cb_conn_transport(const cb_conn_t *c) { return c->ops->kind; }
cb_framing_kind cb_conn_framing(const cb_conn_t *c) { return c->in.kind; }
size_t cb_conn_queued(const cb_conn_t *c) { return c->out.len + c->inflight; }
int cb_conn_is_closing(const cb_conn_t *c) { return c->closing || c->closed; }
int cb_conn_is_closed(const cb_conn_t *c) { return c->closed; }
int cb_conn_has_transport(const cb_conn_t *c) { return !c->transport_done; }
size_t cb_conn_notify_limit(const cb_conn_t *c) { return c->limits.notify_limit; }
void cb_conn_set_notify_limit(cb_conn_t *c, size_t limit) { c->limits.notify_limit = limit; }
void cb_conn_set_max_message_bytes(cb_conn_t *c, size_t max) {
    if (!max) return;
    c->limits.max_message_bytes = max;
    c->in.max_bytes = max;
}
cb_conn_stats_t cb_conn_stats(const cb_conn_t *c) { return c->stats; }

static void write_failed(cb_conn_t *c) {
    c->write_failed = 1;
    c->out.len = 0;
    notify_handler(c, CB_CONN_EV_WRITE_ERROR);
}

void cb_conn__flush(cb_conn_t *c) {
    c->flush_scheduled = 0;
    if (!c->out.len || !c->ops->write) return;
    if (c->write_failed) { c->out.len = 0; return; }
    if (c->ops->write(c) < 0) write_failed(c);
}

static void schedule_flush(cb_conn_t *c) {
    /* Inside input processing the flush happens once the chunk is decoded, so
     * a burst of pipelined requests is answered with a single write. */
    if (c->in_dispatch || c->flush_scheduled || !c->ops->write) return;
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

int cb_conn_send_notification(cb_conn_t *c, const char *json, size_t len) {
    if (c->closed || c->closing || c->write_failed) return CB_ECLOSED;
    if (cb_conn_queued(c) > c->limits.notify_limit) {
        c->stats.dropped_notifications++;
        return CB_ETOOBIG;
    }
    return cb_conn_send(c, json, len);
}

static void pause_input(cb_conn_t *c) {
    if (c->paused) return;
    c->paused = 1;
    c->stats.pauses++;
    if (c->ops->read_stop) c->ops->read_stop(c);
}

static int over_high_water(cb_conn_t *c) {
    return c->ops->write && cb_conn_queued(c) > c->limits.high_water;
}

static int on_frame(void *data, cb_frame_event ev, const char *bytes, size_t len, const char *detail) {
    cb_conn_t *c = data;
    if (c->closing) return 1;
    if (ev == CB_FRAME_MESSAGE) c->handler.on_message(c->handler.data, c, bytes, len);
    else c->handler.on_frame_error(c->handler.data, c, ev, len, detail);
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

/* The handler (or the owner behind it) may drop a reference from inside. */
static void notify_handler(cb_conn_t *c, cb_conn_event ev) {
    cb_conn_retain(c);
    c->handler.on_event(c->handler.data, c, ev);
    cb_conn_release(c);
}

static void finish_input(cb_conn_t *c) {
    c->in_dispatch = 1;
    cb_framer_finish(&c->in, on_frame, c);
    c->in_dispatch = 0;
    cb_conn__flush(c);
    notify_handler(c, CB_CONN_EV_EOF);
}

void cb_conn__input(cb_conn_t *c, size_t n) {
    cb_conn_retain(c);
    c->stats.bytes_in += n;
    c->in_dispatch = 1;
    int paused = cb_framer_commit(&c->in, n, on_frame, c);
    c->in_dispatch = 0;
    if (paused && !c->closing) pause_input(c);
    cb_conn__flush(c);
    cb_conn_release(c);
}

void cb_conn__message(cb_conn_t *c, const char *text, size_t len) {
    if (c->closing) return;
    cb_conn_retain(c);
    c->stats.bytes_in += len;
    c->in_dispatch = 1;
    /* as a framed message: a peer that does not take its replies is paused */
    on_frame(c, CB_FRAME_MESSAGE, text, len, NULL);
    c->in_dispatch = 0;
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
        c->ops->close(c);
    }
}

static void resume_input(cb_conn_t *c) {
    c->paused = 0;
    cb_conn__input(c, 0); /* decode what was buffered while paused */
    if (c->paused || c->closing) return;
    if (c->eof) finish_input(c);
    else if (c->ops->read_start) c->ops->read_start(c);
}

void cb_conn__written(cb_conn_t *c, size_t n, int status) {
    c->inflight -= n;
    if (status >= 0) c->stats.bytes_out += n;
    cb_conn_retain(c);
    if (status < 0 && !c->write_failed) write_failed(c);
    if (c->write_failed) c->out.len = 0;
    if (c->paused && !c->closing && cb_conn_queued(c) < c->limits.low_water) resume_input(c);
    maybe_close(c);
    cb_conn_release(c);
}

void cb_conn__closed(cb_conn_t *c) {
    c->closed = 1;
    c->transport_done = 1;
    notify_handler(c, CB_CONN_EV_CLOSED);
    cb_conn_release(c); /* the transport's reference */
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
    if (!c->closed && c->ops->close) {
        c->closed = 1;
        c->ops->close(c);
    }
}

void cb_conn_close(cb_conn_t *c) {
    if (c->closing) return;
    c->closing = 1;
    if (c->ops->read_stop) c->ops->read_stop(c);
    cb_conn__flush(c);
    if (c->write_failed) c->out.len = 0;
    /* in-memory peers keep their collected output until it is read */
    if (!c->ops->write) {
        c->closed = 1;
        cb_conn__closed(c);
        return;
    }
    maybe_close(c);
}

/* ---- in-memory transport ---- */

static const cb_conn_ops_t memory_ops = {.kind = CB_TRANSPORT_MEMORY};

cb_conn_t *cb_conn_new_memory(const cb_conn_setup_t *setup) { return cb_conn__new(setup, &memory_ops); }

int cb_conn_feed(cb_conn_t *c, const char *bytes, size_t n) {
    if (c->closing || c->closed) return CB_ECLOSED;
    cb_conn_retain(c);
    c->stats.bytes_in += n;
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
