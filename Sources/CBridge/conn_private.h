#ifndef CB_CONN_PRIVATE_H
#define CB_CONN_PRIVATE_H
/* The connection's inside, shared by conn.c and the transports that create
 * connections (stdio.c, listen.c, the in-memory one in conn.c). */
#include "cb_conn.h"
#include <uv.h>

typedef struct cb_conn_ops_s {
    cb_transport_kind kind;
    /* Write out c->out (may take its storage); 0 or a negative error. */
    int (*write)(cb_conn_t *c);
    void (*read_start)(cb_conn_t *c);
    void (*read_stop)(cb_conn_t *c);
    /* Release transport handles; must end with cb_conn__closed(c). */
    void (*close)(cb_conn_t *c);
    /* Arrange for cb_conn__flush(c) on the next loop turn. */
    void (*wake)(cb_conn_t *c);
} cb_conn_ops_t;

struct cb_conn_s {
    void *data; /* the owner's */
    uint64_t id;
    cb_conn_handler_t handler;
    cb_conn_limits_t limits;
    const cb_conn_ops_t *ops;
    void *transport;
    cb_framer_t in;
    cb_buf_t out;    /* framed output not yet handed to the transport */
    size_t inflight; /* bytes handed to the transport, not yet written */
    int refs;
    unsigned paused : 1, eof : 1, closing : 1, closed : 1, write_failed : 1, in_dispatch : 1,
        flush_scheduled : 1, transport_done : 1;
    cb_conn_stats_t stats;
};

/* A connection with the owner's and the transport's references; NULL when
 * out of memory or refused by the handler's on_open. */
cb_conn_t *cb_conn__new(const cb_conn_setup_t *setup, const cb_conn_ops_t *ops);
/* Frees a connection that was never handed to an owner (both references). */
void cb_conn__discard(cb_conn_t *c);

void cb_conn__input(cb_conn_t *c, size_t n); /* n bytes landed in the framer's reserved space */
void cb_conn__input_eof(cb_conn_t *c);
/* One whole message from a transport that frames its own input (WebSocket);
 * replies collect until the transport calls cb_conn__flush. */
void cb_conn__message(cb_conn_t *c, const char *text, size_t len);
void cb_conn__written(cb_conn_t *c, size_t n, int status);
/* The transport's handles are closed: CB_CONN_EV_CLOSED, then the
 * transport's reference goes. */
void cb_conn__closed(cb_conn_t *c);
void cb_conn__flush(cb_conn_t *c);
/* Writes c->out to a stream without blocking: uv_try_write, then a uv_write
 * of what is left (counted in c->inflight until cb_conn__written). */
int cb_conn__write_stream(cb_conn_t *c, uv_stream_t *st);
/* A libuv read buffer in the framer's free space: at least `want` bytes
 * reserved, at most `max` offered; empty when out of memory. */
void cb_conn__read_buffer(cb_conn_t *c, size_t want, size_t max, uv_buf_t *buf);
#endif
