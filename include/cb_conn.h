#ifndef CB_CONN_H
#define CB_CONN_H
/* A connection is a value: framing state, an output queue and a transport.
 * stdio is the first transport; an in-memory one serves tests, fuzzers and
 * benchmarks; a socket transport can be added without touching the rest.
 *
 * Output policy (slow readers): replies are queued and written without
 * blocking. When more than `high_water` bytes are queued the connection stops
 * reading (and decoding) its input until the queue drains below `low_water`,
 * so a peer that writes but never reads cannot grow our memory: it blocks on
 * its own full pipe instead. Server->client notifications are dropped (and
 * counted) while more than `notify_limit` bytes are queued. */
#include <stddef.h>
#include <stdint.h>
#include "cb_buf.h"
#include "cb_framing.h"
#include "cb_rpc.h"

typedef struct cb_conn_ops_s {
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
    cb_rpc_t *rpc;
    const cb_conn_ops_t *ops;
    void *transport;
    cb_framer_t in;
    cb_buf_t out;       /* framed output not yet handed to the transport */
    cb_buf_t scratch;   /* one message being serialised */
    size_t inflight;    /* bytes handed to the transport, not yet written */
    int refs;
    unsigned paused : 1, eof : 1, closing : 1, closed : 1, write_failed : 1, in_dispatch : 1,
        flush_scheduled : 1, reading : 1;
    uint64_t pauses, dropped_notifications, bytes_in, bytes_out;
};

/* An in-memory connection: bytes go in with cb_conn_feed, replies collect in
 * an output buffer read with cb_conn_output. */
cb_conn_t *cb_conn_open_memory(cb_rpc_t *rpc);
/* The process's stdin/stdout (pipe, socket, file, TTY or /dev/null). */
int cb_conn_open_stdio(cb_rpc_t *rpc, cb_conn_t **out);

int cb_conn_feed(cb_conn_t *c, const char *bytes, size_t n);
void cb_conn_feed_eof(cb_conn_t *c);
const char *cb_conn_output(cb_conn_t *c, size_t *len);
void cb_conn_output_clear(cb_conn_t *c);

/* Sends a notification (params borrowed); CB_ETOOBIG when dropped by the
 * slow-reader policy, CB_ECLOSED after close. */
int cb_conn_notify(cb_conn_t *c, const char *method, json_t *params);
/* Sends one already-serialised message, framed for this peer. */
int cb_conn_send(cb_conn_t *c, const char *json, size_t len);
/* Flushes what is queued, then closes; CB_CONN_EV_CLOSED follows. */
void cb_conn_close(cb_conn_t *c);
/* Closes now: queued output is discarded and writes in flight are cancelled
 * (a peer that does not read); CB_CONN_EV_CLOSED follows once the transport's
 * handles are closed. */
void cb_conn_abort(cb_conn_t *c);
cb_framing_kind cb_conn_framing(const cb_conn_t *c);
size_t cb_conn_queued(const cb_conn_t *c);

void cb_conn_retain(cb_conn_t *c);
void cb_conn_release(cb_conn_t *c);

/* For transports. */
void cb_conn__input(cb_conn_t *c, size_t n);   /* n bytes landed in the framer's reserved space */
void cb_conn__input_eof(cb_conn_t *c);
void cb_conn__written(cb_conn_t *c, size_t n, int status);
void cb_conn__closed(cb_conn_t *c);
void cb_conn__flush(cb_conn_t *c);
cb_conn_t *cb_conn__new(cb_rpc_t *rpc, const cb_conn_ops_t *ops);
/* Writes c->out to a stream without blocking: uv_try_write, then a uv_write
 * of what is left (counted in c->inflight until cb_conn__written). */
struct uv_stream_s;
int cb_conn__write_stream(cb_conn_t *c, struct uv_stream_s *st);
/* A libuv read buffer in the framer's free space: at least `want` bytes
 * reserved, at most `max` offered; empty when out of memory. */
struct uv_buf_t;
void cb_conn__read_buffer(cb_conn_t *c, size_t want, size_t max, struct uv_buf_t *buf);
#endif
