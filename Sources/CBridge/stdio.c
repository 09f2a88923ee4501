/* The stdio transport: fd 0 in, fd 1 out. Each side is whatever the process
 * was given: a pipe or socket (libuv stream), a TTY, or a regular file or
 * character device such as /dev/null, which cannot be polled and is read and
 * written through uv_fs instead. */
#include "conn_private.h"
#include "cb_error.h"
#include <stdlib.h>
#include <string.h>

typedef union {
    uv_handle_t h;
    uv_stream_t s;
    uv_pipe_t pipe;
    uv_tty_t tty;
    uv_tcp_t tcp;
} any_stream_t;

typedef struct {
    cb_conn_t *c;
    uv_loop_t *loop;
    /* input */
    int in_is_stream;
    any_stream_t in;
    uv_file in_fd;
    uv_fs_t in_req;
    int read_inflight, want_read;
    /* output */
    int out_is_stream;
    any_stream_t out;
    uv_file out_fd;
    uv_idle_t idle;
    int open_handles;
} stdio_t;

static stdio_t *S(cb_conn_t *c) { return c->transport; }

/* Reads take whatever room the framer has, at least 64 KiB; a read or write
 * buffer is at most what one libuv buffer (unsigned int length) describes. */
#define STDIO_READ_CHUNK 65536
#define STDIO_BUF_MAX 0x7fffffff

/* ---- input ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    stdio_t *s = h->data;
    cb_conn__read_buffer(s->c, STDIO_READ_CHUNK, STDIO_BUF_MAX, buf);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    stdio_t *s = st->data;
    if (nread > 0) {
        cb_conn__input(s->c, (size_t)nread);
    } else if (nread < 0) {
        uv_read_stop(st);
        s->want_read = 0;
        cb_conn__input_eof(s->c); /* UV_EOF, or a read error: either way the peer is gone */
    }
}

static void fs_read_next(stdio_t *s);

static void maybe_finish_close(stdio_t *s);

static void on_fs_read(uv_fs_t *req) {
    stdio_t *s = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    s->read_inflight = 0;
    if (s->c->closing) { maybe_finish_close(s); return; }
    if (n > 0) {
        cb_conn__input(s->c, (size_t)n);
        if (s->want_read) fs_read_next(s);
    } else if (n != UV_EINTR && n != UV_EAGAIN) {
        s->want_read = 0;
        cb_conn__input_eof(s->c);
    } else if (s->want_read) {
        fs_read_next(s);
    }
}

static void fs_read_next(stdio_t *s) {
    if (s->read_inflight || s->c->closing) return;
    uv_buf_t b;
    cb_conn__read_buffer(s->c, STDIO_READ_CHUNK, STDIO_BUF_MAX, &b);
    if (!b.len) { cb_conn__input_eof(s->c); return; } /* out of memory */
    s->in_req.data = s;
    s->read_inflight = 1;
    int rc = uv_fs_read(s->loop, &s->in_req, s->in_fd, &b, 1, -1, on_fs_read);
    if (rc < 0) {
        s->read_inflight = 0;
        s->want_read = 0;
        cb_conn__input_eof(s->c);
    }
}

static void read_start(cb_conn_t *c) {
    stdio_t *s = S(c);
    s->want_read = 1;
    if (s->in_is_stream) {
        if (uv_read_start(&s->in.s, on_alloc, on_read) < 0) {
            s->want_read = 0;
            cb_conn__input_eof(c);
        }
    } else {
        fs_read_next(s);
    }
}

static void read_stop(cb_conn_t *c) {
    stdio_t *s = S(c);
    s->want_read = 0;
    if (s->in_is_stream) uv_read_stop(&s->in.s);
    /* an in-flight fs read completes and is decoded; no new one is issued */
}

/* ---- output ---- */

static int write_out(cb_conn_t *c) {
    stdio_t *s = S(c);
    if (!s->out_is_stream) {
        /* files and character devices: a blocking write is what they offer */
        size_t off = 0;
        while (off < c->out.len) {
            uv_fs_t req;
            uv_buf_t b = uv_buf_init(c->out.p + off, (unsigned)(c->out.len - off > STDIO_BUF_MAX
                                                                    ? STDIO_BUF_MAX : c->out.len - off));
            int n = uv_fs_write(s->loop, &req, s->out_fd, &b, 1, -1, NULL);
            uv_fs_req_cleanup(&req);
            if (n == UV_EINTR || n == UV_EAGAIN) continue;
            if (n <= 0) return n < 0 ? n : UV_EIO;
            off += (size_t)n;
        }
        c->stats.bytes_out += c->out.len;
        c->out.len = 0;
        return 0;
    }
    return cb_conn__write_stream(c, &s->out.s);
}

static void on_idle(uv_idle_t *h) {
    stdio_t *s = h->data;
    uv_idle_stop(h);
    cb_conn__flush(s->c);
}

static void wake(cb_conn_t *c) { uv_idle_start(&S(c)->idle, on_idle); }

/* ---- close ---- */

static void maybe_finish_close(stdio_t *s) {
    if (s->open_handles || s->read_inflight) return;
    cb_conn_t *c = s->c;
    c->transport = NULL;
    free(s);
    cb_conn__closed(c);
}

static void on_handle_closed(uv_handle_t *h) {
    stdio_t *s = h->data;
    s->open_handles--;
    maybe_finish_close(s);
}

static void close_all(cb_conn_t *c) {
    stdio_t *s = S(c);
    if (s->read_inflight) uv_cancel((uv_req_t *)&s->in_req);
    uv_close((uv_handle_t *)&s->idle, on_handle_closed);
    if (s->in_is_stream) uv_close(&s->in.h, on_handle_closed);
    if (s->out_is_stream) uv_close(&s->out.h, on_handle_closed);
    if (s->in_is_stream && s->in.h.type == UV_TTY) uv_tty_reset_mode();
}

static const cb_conn_ops_t stdio_ops = {
    .kind = CB_TRANSPORT_STDIO,
    .write = write_out,
    .read_start = read_start,
    .read_stop = read_stop,
    .close = close_all,
    .wake = wake,
};

/* Opens fd as a libuv stream if it is one; 1 = stream, 0 = use uv_fs, <0 error. */
static int open_stream(uv_loop_t *loop, uv_file fd, int readable, any_stream_t *st) {
    switch (uv_guess_handle(fd)) {
    case UV_TTY:
        return uv_tty_init(loop, &st->tty, fd, readable) < 0 ? 0 : 1;
    case UV_NAMED_PIPE:
        if (uv_pipe_init(loop, &st->pipe, 0) < 0) return 0;
        if (uv_pipe_open(&st->pipe, fd) < 0) { uv_close(&st->h, NULL); return -1; }
        return 1;
    case UV_TCP:
        if (uv_tcp_init(loop, &st->tcp) < 0) return 0;
        if (uv_tcp_open(&st->tcp, fd) < 0) { uv_close(&st->h, NULL); return -1; }
        return 1;
    default:
        return 0; /* UV_FILE (regular file, /dev/null, ...), or closed/unknown */
    }
}

int cb_conn_new_stdio(const cb_conn_setup_t *setup, cb_conn_t **out) {
    stdio_t *s = calloc(1, sizeof *s);
    if (!s) return CB_ENOMEM;
    cb_conn_t *c = cb_conn__new(setup, &stdio_ops);
    if (!c) { free(s); return CB_ENOMEM; }
    s->c = c;
    s->loop = setup->loop;
    s->in_fd = 0;
    s->out_fd = 1;
    c->transport = s;
    int r = open_stream(s->loop, 0, 1, &s->in);
    if (r < 0) goto fail_in;
    s->in_is_stream = r;
    r = open_stream(s->loop, 1, 0, &s->out);
    if (r < 0) goto fail_out;
    s->out_is_stream = r;
    uv_idle_init(s->loop, &s->idle);
    s->idle.data = s;
    s->open_handles = 1;
    if (s->in_is_stream) { s->in.h.data = s; s->open_handles++; }
    if (s->out_is_stream) {
        s->out.h.data = s;
        s->open_handles++;
        /* a blocking TTY would stall the loop; pipes are already non-blocking */
        if (s->out.h.type == UV_TTY) uv_stream_set_blocking(&s->out.s, 0);
    }
    *out = c;
    read_start(c);
    return 0;
fail_out:
    if (s->in_is_stream) uv_close(&s->in.h, NULL);
fail_in:
    c->transport = NULL;
    free(s);
    cb_conn__discard(c);
    return UV_EINVAL;
}
