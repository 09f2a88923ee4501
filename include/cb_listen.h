#ifndef CB_LISTEN_H
#define CB_LISTEN_H
/* A unix-socket listener: every accepted client becomes a cb_conn_t of the
 * same endpoint (its own framing detection, output queue and slow-reader
 * state), so a socket client is served exactly like stdio.
 *
 * Ownership of the path: a `<path>.lock` file is flock()ed for the life of the
 * listener, so of two servers given the same path only one proceeds. The
 * holder then replaces a socket file left by a dead server (connect() is
 * refused), but refuses a path that something still listens on (CB_EBUSY) or
 * that is not a socket at all (UV_EEXIST): it never deletes what it does not
 * own. The socket is created 0600 (umask during bind, chmod after) and is
 * unlinked on close if it is still the file this listener created. */
#include <stddef.h>
#include <stdint.h>
#include "cb_conn.h"
#include "cb_rpc.h"

typedef struct cb_listener_s cb_listener_t;

/* A client connected; conn belongs to the callee (cb_conn_release when done
 * with it, like any connection). Reading starts after the call. */
typedef void (*cb_listen_cb)(cb_listener_t *l, cb_conn_t *conn);

void *cb_listener_data(const cb_listener_t *l);
void cb_listener_set_data(cb_listener_t *l, void *data);
uint64_t cb_listener_accepted(const cb_listener_t *l);
/* accept() failures, and clients refused for want of memory or of an open endpoint */
uint64_t cb_listener_accept_errors(const cb_listener_t *l);

/* Longest socket path (sun_path minus the terminating NUL). */
size_t cb_listen_path_max(void);

/* Binds and listens at path. Errors: CB_ETOOBIG (path longer than
 * cb_listen_path_max), CB_EBUSY (another server holds the lock or listens
 * there), UV_EEXIST (path exists and is not a socket), or a libuv/errno code
 * from lock/bind/listen (UV_EACCES, UV_ENOENT for a missing directory, ...). */
int cb_listen_unix(cb_rpc_t *rpc, const char *path, int backlog, cb_listen_cb on_accept,
                   void *data, cb_listener_t **out);
/* Stops accepting, unlinks the socket file (if still ours), releases the
 * lock (the empty lock file stays: unlinking it would let two servers hold
 * "the" lock at once), and frees the listener once libuv has closed the
 * handle. Connections already accepted are not touched. The listener holds
 * a reference to rpc until then. */
void cb_listener_close(cb_listener_t *l);

#endif
