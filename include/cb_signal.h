#ifndef CB_SIGNAL_H
#define CB_SIGNAL_H
/* SIGTERM/SIGINT as loop events, so the server can flush and exit cleanly
 * instead of dying mid-write. Also ignores SIGPIPE: a peer that closes its
 * end must surface as EPIPE on write, not kill the process. */
#include <uv.h>

typedef struct cb_signals_s cb_signals_t;
typedef void (*cb_signal_cb)(void *data, int signum);

int cb_signals_watch(uv_loop_t *loop, cb_signal_cb cb, void *data, cb_signals_t **out);
void cb_signals_close(cb_signals_t *s);
#endif
