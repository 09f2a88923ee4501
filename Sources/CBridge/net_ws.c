/* The WebSocket transport: a connection whose bytes are WebSocket frames on
 * an H2O socket (after the HTTP upgrade on /rpc). wslay decodes and encodes
 * the frames; each text message is one JSON-RPC message or batch. Above the
 * frames everything (envelopes, output queue, slow-reader policy) is conn.c's,
 * as for stdio and unix sockets.
 *
 * Output: conn.c queues replies newline-separated (compact JSON has no raw
 * newline), each becomes one text message. H2O allows one write in flight
 * per socket: what is queued meanwhile goes out in the next write, so a burst
 * of replies costs one write, not one per frame. */
#include "net_private.h"
#include "cb_error.h"
#include <stdlib.h>
#include <string.h>

static net_ws_t *W(cb_conn_t *c) { return c->transport; }

static void pump(net_ws_t *w);
static void close_socket(net_ws_t *w);

/* ---- wslay callbacks ---- */

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *data) {
    (void)flags;
    net_ws_t *w = data;
    h2o_buffer_t *in = w->sock->input;
    /* a paused connection (a reader that does not take its replies) takes
     * no more input: it stays in the socket's buffer, and H2O stops reading */
    if (in->size == 0 || w->c->paused || w->c->closing) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (len > in->size) len = in->size;
    memcpy(buf, in->bytes, len);
    h2o_buffer_consume(&w->sock->input, len);
    return (ssize_t)len;
}

/* Never blocks: frames collect in w->frames until the socket can write. */
static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *arg) {
    (void)flags;
    net_ws_t *w = arg;
    if (cb_buf_append(&w->frames, data, len) != 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_NOMEM);
        return -1;
    }
    return (ssize_t)len;
}

static void ws_message(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *m, void *data) {
    net_ws_t *w = data;
    if (m->opcode == WSLAY_TEXT_FRAME) {
        cb_conn__message(w->c, (const char *)m->msg, m->msg_length);
    } else if (m->opcode == WSLAY_BINARY_FRAME) {
        static const char why[] = "binary frames are not accepted: send JSON-RPC as text frames";
        wslay_event_queue_close(ctx, 1003, (const uint8_t *)why, sizeof why - 1);
        wslay_event_shutdown_read(ctx); /* later frames of this read are not served */
        w->peer_done = 1;
    } else if (m->opcode == WSLAY_CONNECTION_CLOSE) {
        w->peer_done = 1; /* wslay has queued the closing handshake's reply */
    }
}

/* ---- input ---- */

static void on_read(h2o_socket_t *sock, const char *err) {
    net_ws_t *w = sock->data;
    cb_conn_t *c = w->c;
    cb_conn_retain(c);
    if (err) {
        /* EOF, a reset or a TLS error: nothing can be written any more either
         * (after a failed TLS read H2O's next write would fail inside) */
        w->io_dead = 1;
        w->peer_done = 1;
    } else {
        /* the limit is lower until the client authenticates (cb_conn_set_max_message_bytes) */
        wslay_event_config_set_max_recv_msg_length(w->ws, c->limits.max_message_bytes);
        w->in_recv = 1;
        if (wslay_event_recv(w->ws) != 0) w->peer_done = 1;
        w->in_recv = 0;
        if (w->close_after_recv) { /* aborted by a handler: wslay's context was in use */
            close_socket(w);
            cb_conn_release(c);
            return;
        }
        /* wslay stops reading after a close, a broken frame or a message over
         * the limit (it queued a 1002/1009 close); a binary frame got 1003. */
        if (!wslay_event_get_read_enabled(w->ws)) w->peer_done = 1;
    }
    if (!w->peer_done) {
        cb_conn__flush(c);
        if ((w = W(c))) pump(w);
    } else if (!w->eof_sent) {
        w->eof_sent = 1;
        h2o_socket_read_stop(sock);
        pump(w);
        if (W(c)) cb_conn__input_eof(c);
    }
    cb_conn_release(c);
}

/* Also after a pause: frames that arrived meanwhile wait in the socket's
 * input (ws_recv takes nothing while paused). */
static void read_start(cb_conn_t *c) {
    net_ws_t *w = W(c);
    if (!w || !w->sock || w->eof_sent) return;
    if (w->sock->input->size) on_read(w->sock, NULL);
    if ((w = W(c)) && w->sock && !w->eof_sent && !c->paused && !c->closing) h2o_socket_read_start(w->sock, on_read);
}

static void read_stop(cb_conn_t *c) {
    net_ws_t *w = W(c);
    if (w && w->sock) h2o_socket_read_stop(w->sock);
}

/* ---- output ---- */

static void on_written(h2o_socket_t *sock, const char *err) {
    net_ws_t *w = sock->data;
    size_t n = w->writing_payload;
    free(w->writing);
    w->writing = NULL;
    w->writing_payload = 0;
    cb_conn_t *c = w->c;
    cb_conn_retain(c);
    cb_conn__written(c, n, err ? CB_ECLOSED : 0);
    if ((w = W(c))) { /* the connection may have closed in between */
        if (err) close_socket(w);
        else pump(w);
    }
    cb_conn_release(c);
}

/* Serialises what wslay has queued and writes it, unless a write is in
 * flight (its completion pumps again). */
static void pump(net_ws_t *w) {
    if (!w->sock || w->writing) return;
    if (w->io_dead) w->frames.len = 0;
    else if (wslay_event_want_write(w->ws) && wslay_event_send(w->ws) != 0) w->frames.len = 0;
    if (!w->frames.len) {
        size_t dropped = w->queued_payload; /* a dead socket, or wslay refused them */
        w->queued_payload = 0;
        if (dropped) cb_conn__written(w->c, dropped, CB_ECLOSED); /* may close w */
        else if (w->closing) close_socket(w);
        return;
    }
    size_t len;
    w->writing = cb_buf_detach(&w->frames, &len);
    w->writing_payload = w->queued_payload;
    w->queued_payload = 0;
    h2o_iovec_t v = h2o_iovec_init(w->writing, len);
    h2o_socket_write(w->sock, &v, 1, on_written);
}

/* conn.c's queue (newline-separated messages) into text messages. */
static int write_out(cb_conn_t *c) {
    net_ws_t *w = W(c);
    if (!w || !w->sock || w->closing || w->io_dead) return CB_ECLOSED;
    const char *p = c->out.p, *end = p + c->out.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)p, n};
        if (n && wslay_event_queue_msg(w->ws, &m) != 0) return CB_ENOMEM;
        w->queued_payload += n;
        c->inflight += n;
        p += n + 1;
    }
    c->out.len = 0;
    pump(w);
    return 0;
}

/* ---- close ---- */

static void on_handle_free(uv_handle_t *h) { free(h); }

static void close_socket(net_ws_t *w) {
    if (!w->sock) return;
    if (w->in_recv) { w->close_after_recv = 1; return; }
    h2o_socket_t *sock = w->sock;
    w->sock = NULL;
    cb_conn_t *c = w->c;
    if (w->linger) {
        uv_timer_stop(w->linger);
        uv_close((uv_handle_t *)w->linger, on_handle_free);
    }
    /* A write still in flight is cancelled without its callback; nothing
     * queued will go out. */
    free(w->writing);
    c->inflight -= w->writing_payload + w->queued_payload;
    h2o_socket_close(sock);
    c->transport = NULL;
    wslay_event_context_free(w->ws);
    cb_buf_free(&w->frames);
    free(w);
    cb_conn__closed(c);
}

/* Graceful: the closing handshake's frame goes out after what is queued. An
 * abort (cb_conn_abort: a peer that does not read) closes now. */
static void on_linger(uv_timer_t *t) { close_socket(t->data); }

/* A peer that takes nothing (the closing frame included) would otherwise
 * hold its descriptor for ever. */
#define NET_WS_LINGER_MS 5000

static void close_ws(cb_conn_t *c) {
    net_ws_t *w = W(c);
    if (!w || w->closing) return;
    w->closing = 1;
    if (c->write_failed || w->io_dead) return close_socket(w); /* aborted, or the socket failed */
    if ((w->linger = malloc(sizeof *w->linger))) {
        uv_timer_init(w->loop, w->linger);
        w->linger->data = w;
        uv_timer_start(w->linger, on_linger, NET_WS_LINGER_MS, 0);
    }
    if (!w->peer_done) wslay_event_queue_close(w->ws, 1000, NULL, 0);
    pump(w);
}

static const cb_conn_ops_t ws_ops = {
    .kind = CB_TRANSPORT_WEBSOCKET,
    .write = write_out,
    .read_start = read_start,
    .read_stop = read_stop,
    .close = close_ws,
};

cb_conn_t *net_ws_open(cb_rpc_t *rpc, h2o_socket_t *sock) {
    cb_conn_setup_t setup;
    net_ws_t *w;
    if (cb_rpc_conn_setup(rpc, &setup) != 0 || !(w = calloc(1, sizeof *w))) return NULL;
    static const struct wslay_event_callbacks cbs = {.recv_callback = ws_recv, .send_callback = ws_send,
                                                     .on_msg_recv_callback = ws_message};
    if (wslay_event_context_server_init(&w->ws, &cbs, w) != 0) { free(w); return NULL; }
    cb_conn_t *c = cb_conn__new(&setup, &ws_ops);
    if (!c) {
        wslay_event_context_free(w->ws);
        free(w);
        return NULL;
    }
    wslay_event_config_set_max_recv_msg_length(w->ws, c->limits.max_message_bytes);
    c->in.kind = CB_FRAMING_WEBSOCKET;
    c->transport = w;
    w->loop = setup.loop;
    w->c = c;
    w->sock = sock;
    sock->data = w;
    return c;
}

void net_ws_start(cb_conn_t *c) {
    if (!cb_conn_is_closing(c) && !c->paused) read_start(c);
}
