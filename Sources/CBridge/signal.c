#include "cb_signal.h"
#include "cb_error.h"
#include <signal.h>
#include <stdlib.h>

struct cb_signals_s {
    uv_signal_t term, intr;
    cb_signal_cb cb;
    void *data;
    int open;
};

static void on_signal(uv_signal_t *h, int signum) {
    cb_signals_t *s = h->data;
    s->cb(s->data, signum);
}

int cb_signals_watch(uv_loop_t *loop, cb_signal_cb cb, void *data, cb_signals_t **out) {
    signal(SIGPIPE, SIG_IGN);
    cb_signals_t *s = calloc(1, sizeof *s);
    if (!s) return CB_ENOMEM;
    s->cb = cb;
    s->data = data;
    uv_signal_init(loop, &s->term);
    uv_signal_init(loop, &s->intr);
    s->term.data = s->intr.data = s;
    s->open = 2;
    int rc = uv_signal_start(&s->term, on_signal, SIGTERM);
    if (!rc) rc = uv_signal_start(&s->intr, on_signal, SIGINT);
    /* the watchers must not keep the loop alive on their own */
    uv_unref((uv_handle_t *)&s->term);
    uv_unref((uv_handle_t *)&s->intr);
    *out = s;
    return rc;
}

static void on_closed(uv_handle_t *h) {
    cb_signals_t *s = h->data;
    if (--s->open == 0) free(s);
}

void cb_signals_close(cb_signals_t *s) {
    if (!s) return;
    uv_close((uv_handle_t *)&s->term, on_closed);
    uv_close((uv_handle_t *)&s->intr, on_closed);
}
