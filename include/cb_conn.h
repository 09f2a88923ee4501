#ifndef CB_CONN_H
#define CB_CONN_H
/* A connection: framing state, an output queue and a transport (stdio, a
 * unix-socket client, or in memory for tests, fuzzers and benchmarks). It
 * knows nothing of JSON-RPC: like a libuv stream handing bytes to its read
 * callback, it hands each complete frame, framing error and life-cycle event
 * to the handler it was created with.
 *
 * Output policy (slow readers): output is queued and written without
 * blocking. When more than `high_water` bytes are queued the connection stops
 * reading (and decoding) its input until the queue drains below `low_water`,
 * so a peer that writes but never reads cannot grow our memory: it blocks on
 * its own full pipe instead. Notifications are dropped (and counted) while
 * more than `notify_limit` bytes are queued: a broadcast must not grow the
 * queue of a peer that is not reading.
 *
 * Lifetime: the owner holds one reference (cb_conn_release when done with
 * it, at any time); the open transport holds another until
 * CB_CONN_EV_CLOSED has been delivered, so the memory goes once both are
 * gone, whichever is last. */
#include <stddef.h>
#include <stdint.h>
#include "cb_buf.h"
#include "cb_framing.h"

typedef struct cb_conn_s cb_conn_t;
struct uv_loop_s;

typedef enum {
    CB_CONN_EV_EOF = 1,         /* the peer closed its side (or reading failed) */
    CB_CONN_EV_WRITE_ERROR = 2, /* the peer stopped accepting output (EPIPE...) */
    CB_CONN_EV_CLOSED = 3,      /* closing finished: output flushed, handles closed */
} cb_conn_event;

typedef enum {
    CB_TRANSPORT_MEMORY = 0,
    CB_TRANSPORT_STDIO = 1,
    CB_TRANSPORT_SOCKET = 2,
    CB_TRANSPORT_WEBSOCKET = 3,
} cb_transport_kind;

typedef struct {
    size_t max_message_bytes; /* 0: 16 MiB */
    size_t high_water;        /* queued output above which input is paused (0: 4 MiB) */
    size_t low_water;         /* queued output below which input resumes (0: high_water / 4) */
    size_t notify_limit;      /* queued output above which notifications are dropped (0: 256 KiB) */
} cb_conn_limits_t;

/* Where a connection's input goes. Every callback gets `data`. */
typedef struct {
    /* One complete message body (borrowed for the call). */
    void (*on_message)(void *data, cb_conn_t *c, const char *text, size_t len);
    /* A frame that could not be delivered: CB_FRAME_TOO_BIG, _BAD_HEADER or
     * _TRUNCATED, with the framer's size and detail. */
    void (*on_frame_error)(void *data, cb_conn_t *c, cb_frame_event ev, size_t len, const char *detail);
    void (*on_event)(void *data, cb_conn_t *c, cb_conn_event ev);
    /* The connection exists (0), or the handler refuses it (an error: the
     * connection is not created). Optional. */
    int (*on_open)(void *data, cb_conn_t *c);
    /* The connection's memory is about to go. Optional. */
    void (*on_free)(void *data, cb_conn_t *c);
    void *data;
} cb_conn_handler_t;

/* What a transport needs to create a connection. */
typedef struct {
    struct uv_loop_s *loop;
    cb_conn_handler_t handler;
    cb_conn_limits_t limits;
    uint64_t id;
} cb_conn_setup_t;

/* An in-memory connection: bytes go in with cb_conn_feed, output collects
 * in a buffer read with cb_conn_output. */
cb_conn_t *cb_conn_new_memory(const cb_conn_setup_t *setup);
/* The process's stdin/stdout (pipe, socket, file, TTY or /dev/null). */
int cb_conn_new_stdio(const cb_conn_setup_t *setup, cb_conn_t **out);

int cb_conn_feed(cb_conn_t *c, const char *bytes, size_t n);
void cb_conn_feed_eof(cb_conn_t *c);
const char *cb_conn_output(cb_conn_t *c, size_t *len);
void cb_conn_output_clear(cb_conn_t *c);

/* Sends one already-serialised message, framed for this peer; CB_ECLOSED
 * after close. */
int cb_conn_send(cb_conn_t *c, const char *json, size_t len);
/* Sends an already-serialised notification under the slow-reader policy:
 * CB_ETOOBIG (and counted) when more than notify_limit bytes are queued,
 * CB_ECLOSED once closing. */
int cb_conn_send_notification(cb_conn_t *c, const char *json, size_t len);
/* Flushes what is queued, then closes; CB_CONN_EV_CLOSED follows. */
void cb_conn_close(cb_conn_t *c);
/* Closes now: queued output is discarded and writes in flight are cancelled
 * (a peer that does not read); CB_CONN_EV_CLOSED follows once the transport's
 * handles are closed. */
void cb_conn_abort(cb_conn_t *c);

void cb_conn_retain(cb_conn_t *c);
void cb_conn_release(cb_conn_t *c);

uint64_t cb_conn_id(const cb_conn_t *c);
void *cb_conn_data(const cb_conn_t *c);
void cb_conn_set_data(cb_conn_t *c, void *data);
cb_transport_kind cb_conn_transport(const cb_conn_t *c);
cb_framing_kind cb_conn_framing(const cb_conn_t *c);
/* Bytes queued for the peer and not yet written. */
size_t cb_conn_queued(const cb_conn_t *c);
/* No longer reading: cb_conn_close or cb_conn_abort was called. */
int cb_conn_is_closing(const cb_conn_t *c);
/* No more output is accepted (the transport is closing or closed). */
int cb_conn_is_closed(const cb_conn_t *c);
/* 1 until the transport has closed its handles (CB_CONN_EV_CLOSED). */
int cb_conn_has_transport(const cb_conn_t *c);
size_t cb_conn_notify_limit(const cb_conn_t *c);
void cb_conn_set_notify_limit(cb_conn_t *c, size_t limit);
/* The largest message accepted from now on (a network client is held to a
 * small one until it authenticates); 0 is ignored. */
void cb_conn_set_max_message_bytes(cb_conn_t *c, size_t max);

typedef struct {
    uint64_t pauses;                /* times input was paused for a slow reader */
    uint64_t dropped_notifications; /* notifications dropped by the slow-reader policy */
    uint64_t bytes_in, bytes_out;   /* bytes read, bytes the peer has taken */
} cb_conn_stats_t;
cb_conn_stats_t cb_conn_stats(const cb_conn_t *c);
#endif
