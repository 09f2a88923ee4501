#ifndef CB_DEADLINE_H
#define CB_DEADLINE_H
/* A one-shot timer that does not keep the loop alive: "stop waiting after N ms".
 * The server uses it so that flushing to a peer that never reads cannot delay
 * exit forever. */
#include <stdint.h>
#include <uv.h>

typedef struct cb_deadline_s cb_deadline_t;
typedef void (*cb_deadline_cb)(void *data);

/* Calls cb(data) after ms milliseconds unless cancelled first. */
int cb_deadline_start(uv_loop_t *loop, uint64_t ms, cb_deadline_cb cb, void *data, cb_deadline_t **out);
/* Cancels (if still pending) and frees. Safe after it fired. */
void cb_deadline_cancel(cb_deadline_t *d);
#endif
