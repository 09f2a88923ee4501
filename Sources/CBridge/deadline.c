#include "cb_deadline.h"
#include "cb_error.h"
#include <stdlib.h>

struct cb_deadline_s {
    uv_timer_t timer;
    cb_deadline_cb cb;
    void *data;
};

static void on_fire(uv_timer_t *t) {
    cb_deadline_t *d = t->data;
    if (d->cb) d->cb(d->data);
}

static void on_closed(uv_handle_t *h) { free(h->data); }

int cb_deadline_start(uv_loop_t *loop, uint64_t ms, cb_deadline_cb cb, void *data, cb_deadline_t **out) {
    cb_deadline_t *d = calloc(1, sizeof *d);
    if (!d) return CB_ENOMEM;
    d->cb = cb;
    d->data = data;
    uv_timer_init(loop, &d->timer);
    d->timer.data = d;
    int rc = uv_timer_start(&d->timer, on_fire, ms, 0);
    uv_unref((uv_handle_t *)&d->timer);
    *out = d;
    return rc;
}

void cb_deadline_cancel(cb_deadline_t *d) {
    if (!d) return;
    d->cb = NULL;
    uv_close((uv_handle_t *)&d->timer, on_closed);
}
