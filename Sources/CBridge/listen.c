/* The unix-socket listener and the transport of the clients it accepts. A
 * socket client is one uv_pipe_t for both directions; everything above the
 * bytes (framing, envelopes, output queue, pausing a slow reader) is conn.c's,
 * shared with stdio. */
#include "cb_listen.h"
#include "cb_error.h"
#include "conn_private.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

typedef struct {
    cb_conn_t *c;
    uv_pipe_t pipe;
    uv_idle_t idle;
    int open_handles;
    int handle_closing;
    int orphan;    /* never handed to the owner (accept failed) */
    int want_read; /* conn.c wants input (not paused, not closing) */
    int yielded;   /* reading stopped until the next loop turn (fairness) */
} sock_t;

/* Bytes read per read call. A full read makes the client yield until the
 * next loop turn, so one client that writes without pause gets one read per
 * turn like everyone else instead of libuv's up to 32 back-to-back reads
 * (2 MiB of requests ahead of every other client's ping). */
#define CB_SOCK_READ_CHUNK 4096

static sock_t *S(cb_conn_t *c) { return c->transport; }

/* ---- input ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    sock_t *s = h->data;
    cb_conn__read_buffer(s->c, CB_SOCK_READ_CHUNK, CB_SOCK_READ_CHUNK, buf);
}

static void on_idle(uv_idle_t *h);

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    sock_t *s = st->data;
    if (nread > 0) {
        cb_conn__input(s->c, (size_t)nread);
        /* More is probably waiting: let the other clients have this turn. */
        if ((size_t)nread == buf->len && s->want_read && !s->handle_closing && !s->c->closing) {
            uv_read_stop(st);
            s->yielded = 1;
            uv_idle_start(&s->idle, on_idle);
        }
    } else if (nread < 0) {
        uv_read_stop(st);
        /* UV_EOF, ECONNRESET or UV_ENOBUFS (no memory for the read): the
         * client is gone or cannot be served; conn.c answers what it can. */
        cb_conn__input_eof(s->c);
    }
}

static void read_start(cb_conn_t *c) {
    sock_t *s = S(c);
    if (!s || s->handle_closing) return;
    s->want_read = 1;
    s->yielded = 0;
    if (uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read) < 0) cb_conn__input_eof(c);
}

static void read_stop(cb_conn_t *c) {
    sock_t *s = S(c);
    if (!s) return;
    s->want_read = 0;
    s->yielded = 0;
    if (!s->handle_closing) uv_read_stop((uv_stream_t *)&s->pipe);
}

/* ---- output ---- */

static int write_out(cb_conn_t *c) {
    sock_t *s = S(c);
    if (!s || s->handle_closing) return CB_ECLOSED;
    return cb_conn__write_stream(c, (uv_stream_t *)&s->pipe);
}

static void on_idle(uv_idle_t *h) {
    sock_t *s = h->data;
    uv_idle_stop(h);
    cb_conn__flush(s->c);
    if (s->yielded && s->want_read && !s->handle_closing && !s->c->closing) read_start(s->c);
}

static void wake(cb_conn_t *c) {
    sock_t *s = S(c);
    if (s && !s->handle_closing) uv_idle_start(&s->idle, on_idle);
    else cb_conn__flush(c);
}

/* ---- close ---- */

static void on_handle_closed(uv_handle_t *h) {
    sock_t *s = h->data;
    if (--s->open_handles) return;
    cb_conn_t *c = s->c;
    int orphan = s->orphan;
    c->transport = NULL;
    free(s);
    if (orphan) cb_conn__discard(c);
    else cb_conn__closed(c);
}

static void close_all(cb_conn_t *c) {
    sock_t *s = S(c);
    if (!s || s->handle_closing) return;
    s->handle_closing = 1;
    /* Closing the pipe cancels writes still queued in libuv: their callbacks
     * run (UV_ECANCELED) before the close callback, so c->inflight is back to
     * zero before cb_conn__closed. */
    uv_close((uv_handle_t *)&s->idle, on_handle_closed);
    uv_close((uv_handle_t *)&s->pipe, on_handle_closed);
}

static const cb_conn_ops_t sock_ops = {
    .kind = CB_TRANSPORT_SOCKET,
    .write = write_out,
    .read_start = read_start,
    .read_stop = read_stop,
    .close = close_all,
    .wake = wake,
};

/* ---- listener ---- */

size_t cb_listen_path_max(void) {
    struct sockaddr_un a;
    return sizeof a.sun_path - 1;
}

static int fill_addr(struct sockaddr_un *a, const char *path) {
    size_t n = strlen(path);
    if (n == 0) return CB_EINVAL;
    if (n > cb_listen_path_max()) return CB_ETOOBIG;
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path, path, n);
    return 0;
}

/* 1 if something accepts connections at path, 0 if connecting is refused
 * (a socket file whose server died). Non-blocking, so a live server with a
 * full backlog (EAGAIN) counts as live instead of blocking us. */
static int someone_listens(const struct sockaddr_un *a) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return 1; /* cannot tell: never delete on a guess */
    int rc = connect(fd, (const struct sockaddr *)a, sizeof *a);
    int e = errno;
    close(fd);
    if (rc == 0) return 1;
    return !(e == ECONNREFUSED || e == ENOENT);
}

struct cb_listener_s {
    void *data; /* the owner's */
    cb_rpc_t *rpc;  /* a reference: accepted clients join this endpoint */
    cb_listen_cb on_accept;
    char *path;
    uint64_t accepted, accept_errors;
    uv_pipe_t pipe;
    int lock_fd;
    uint64_t dev, ino; /* the socket file we created (unlinked only if unchanged) */
    int closing;
};

void *cb_listener_data(const cb_listener_t *l) { return l->data; }
void cb_listener_set_data(cb_listener_t *l, void *data) { l->data = data; }
uint64_t cb_listener_accepted(const cb_listener_t *l) { return l->accepted; }
uint64_t cb_listener_accept_errors(const cb_listener_t *l) { return l->accept_errors; }

/* Takes a client off the backlog (libuv stops accepting until we do) and
 * closes it at once: there is no memory (or no endpoint) to serve it. */
static void reject(cb_listener_t *l, uv_stream_t *server) {
    static uv_pipe_t rejected;
    l->accept_errors++;
    if (uv_pipe_init(server->loop, &rejected, 0) == 0) {
        uv_accept(server, (uv_stream_t *)&rejected);
        uv_close((uv_handle_t *)&rejected, NULL);
    }
}

static void on_connection(uv_stream_t *server, int status) {
    cb_listener_t *l = server->data;
    if (status < 0) { l->accept_errors++; return; }
    cb_conn_setup_t setup;
    sock_t *s = NULL;
    cb_conn_t *c = NULL;
    if (cb_rpc_conn_setup(l->rpc, &setup) == 0 && (s = calloc(1, sizeof *s)))
        c = cb_conn__new(&setup, &sock_ops);
    if (!c) { free(s); reject(l, server); return; }
    uv_pipe_init(server->loop, &s->pipe, 0);
    s->pipe.data = s;
    s->c = c;
    c->transport = s;
    uv_idle_init(server->loop, &s->idle);
    s->idle.data = s;
    s->open_handles = 2;
    if (uv_accept(server, (uv_stream_t *)&s->pipe) < 0) {
        l->accept_errors++;
        s->orphan = 1;
        close_all(c); /* the connection is freed once its handles are closed */
        return;
    }
    l->accepted++;
    l->on_accept(l, c);
    if (!c->closing) read_start(c);
}

static void on_listener_closed(uv_handle_t *h) {
    cb_listener_t *l = h->data;
    cb_rpc_release(l->rpc);
    free(l->path);
    free(l);
}

/* The lock decides who owns the path, race-free between servers. */
static int lock_path(cb_listener_t *l, const char *path) {
    size_t n = strlen(path);
    char *lock = malloc(n + 6);
    if (!lock) return CB_ENOMEM;
    memcpy(lock, path, n);
    memcpy(lock + n, ".lock", 6);
    l->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    free(lock);
    if (l->lock_fd < 0) return -errno;
    if (flock(l->lock_fd, LOCK_EX | LOCK_NB) < 0) return errno == EWOULDBLOCK ? CB_EBUSY : -errno;
    return 0;
}

/* Replaces a dead server's socket; refuses anything else. */
static int claim_path(const char *path, const struct sockaddr_un *addr) {
    struct stat st;
    if (lstat(path, &st) < 0) return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) return UV_EEXIST;
    if (someone_listens(addr)) return CB_EBUSY;
    if (unlink(path) < 0 && errno != ENOENT) return -errno;
    return 0;
}

/* Binds 0600 from the start: no window where others could connect. Returns
 * the socket or an error. */
static int bind_private(cb_listener_t *l, const char *path, const struct sockaddr_un *addr) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -errno;
    mode_t old = umask(0177);
    int b = bind(fd, (const struct sockaddr *)addr, sizeof *addr);
    int e = errno;
    umask(old);
    if (b < 0) { close(fd); return e == EADDRINUSE ? CB_EBUSY : -e; }
    chmod(path, 0600);
    struct stat st;
    if (stat(path, &st) == 0) { l->dev = (uint64_t)st.st_dev; l->ino = (uint64_t)st.st_ino; }
    return fd;
}

static void free_unopened(cb_listener_t *l) {
    if (l->lock_fd >= 0) close(l->lock_fd);
    free(l->path);
    free(l);
}

/* Hands fd to a libuv pipe and listens. On failure the listener is freed
 * (once libuv has closed the handle, if there is one). */
static int start_listening(cb_listener_t *l, int fd, int backlog) {
    int rc = uv_pipe_init(cb_rpc_loop(l->rpc), &l->pipe, 0);
    if (rc) {
        unlink(l->path);
        close(fd);
        free_unopened(l);
        return rc;
    }
    cb_rpc_retain(l->rpc); /* released in on_listener_closed */
    l->pipe.data = l;
    rc = uv_pipe_open(&l->pipe, fd);
    if (!rc) {
        fd = -1; /* the handle owns it now */
        rc = uv_listen((uv_stream_t *)&l->pipe, backlog > 0 ? backlog : 4096, on_connection);
    }
    if (rc) {
        unlink(l->path);
        if (fd >= 0) close(fd);
        close(l->lock_fd);
        uv_close((uv_handle_t *)&l->pipe, on_listener_closed);
    }
    return rc;
}

int cb_listen_unix(cb_rpc_t *rpc, const char *path, int backlog, cb_listen_cb on_accept,
                   void *data, cb_listener_t **out) {
    *out = NULL;
    struct sockaddr_un addr;
    int rc = fill_addr(&addr, path);
    if (rc) return rc;
    cb_listener_t *l = calloc(1, sizeof *l);
    if (!l || !(l->path = strdup(path))) { free(l); return CB_ENOMEM; }
    l->rpc = rpc;
    l->on_accept = on_accept;
    l->data = data;
    l->lock_fd = -1;
    int fd = -1;
    if (!(rc = lock_path(l, path)) && !(rc = claim_path(path, &addr))) rc = fd = bind_private(l, path, &addr);
    if (rc < 0) { free_unopened(l); return rc; }
    rc = start_listening(l, fd, backlog);
    if (rc) return rc;
    *out = l;
    return 0;
}

void cb_listener_close(cb_listener_t *l) {
    if (!l || l->closing) return;
    l->closing = 1;
    /* Unlink before releasing the lock, and only our own file: a server that
     * replaced it in the meantime keeps its socket. */
    struct stat st;
    if (stat(l->path, &st) == 0 && (uint64_t)st.st_dev == l->dev && (uint64_t)st.st_ino == l->ino)
        unlink(l->path);
    if (l->lock_fd >= 0) close(l->lock_fd);
    l->lock_fd = -1;
    uv_close((uv_handle_t *)&l->pipe, on_listener_closed);
}
