/* A connection over a libuv stream: the read buffer and the writer the
 * stdio pipe and the socket transports share. */
#include "conn_private.h"
#include "cb_error.h"
#include <stdlib.h>

typedef struct {
    uv_write_t req;
    char *base;
    size_t len; /* bytes this request accounts for in c->inflight */
} write_req_t;

/* Write callbacks run before the handle's close callback (libuv cancels
 * pending writes first), and the connection outlives its handle, so
 * req.data may point at the connection itself. */
static void on_written(uv_write_t *req, int status) {
    write_req_t *w = (write_req_t *)req;
    cb_conn_t *c = req->data;
    size_t n = w->len;
    free(w->base);
    free(w);
    cb_conn__written(c, n, status);
}

void cb_conn__read_buffer(cb_conn_t *c, size_t want, size_t max, uv_buf_t *buf) {
    char *p;
    size_t n;
    /* No memory: an empty buffer makes libuv report UV_ENOBUFS. */
    if (cb_framer_reserve(&c->in, want, &p, &n)) { *buf = uv_buf_init(NULL, 0); return; }
    *buf = uv_buf_init(p, (unsigned)(n > max ? max : n));
}

int cb_conn__write_stream(cb_conn_t *c, uv_stream_t *st) {
    uv_buf_t b = uv_buf_init(c->out.p, (unsigned)c->out.len);
    size_t done = 0;
    if (c->inflight == 0) {
        /* The common case: the kernel takes the whole reply right away. */
        int n = uv_try_write(st, &b, 1);
        if (n < 0 && n != UV_EAGAIN) return n;
        if (n > 0) done = (size_t)n;
        if (done == c->out.len) {
            c->stats.bytes_out += done;
            c->out.len = 0;
            return 0;
        }
    }
    /* The rest goes out later from a buffer the request owns; the
     * connection starts a fresh one. */
    write_req_t *w = malloc(sizeof *w);
    if (!w) return CB_ENOMEM;
    size_t total;
    w->base = cb_buf_detach(&c->out, &total);
    w->len = total - done;
    w->req.data = c;
    c->stats.bytes_out += done;
    c->inflight += w->len;
    b = uv_buf_init(w->base + done, (unsigned)w->len);
    int rc = uv_write(&w->req, st, &b, 1, on_written);
    if (rc < 0) {
        c->inflight -= w->len;
        free(w->base);
        free(w);
        return rc;
    }
    return 0;
}
