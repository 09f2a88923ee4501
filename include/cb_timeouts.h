#ifndef CB_TIMEOUTS_H
#define CB_TIMEOUTS_H
/* Many timeouts on ONE loop wake-up source (a timerfd on Linux, else one
 * uv timer): an indexed 4-ary min-heap ordered by (absolute deadline,
 * schedule sequence), so callbacks run in deadline order and ties run
 * first-scheduled-first.
 *
 * Clocks. A SYSTEM scheduler keeps deadlines in ns of CLOCK_MONOTONIC
 * (uv_hrtime): a relative deadline is now + delay, taken from the precise
 * clock (never from the loop's cached, possibly stale time), and a timeout
 * runs only once uv_hrtime() has reached it, so it never fires early in real
 * time. The loop wakes through a timerfd armed at the absolute deadline
 * (Linux; lateness = wake-up latency) or a uv timer elsewhere (ms-granular:
 * up to ~2 ms late). The API speaks ms; reported deadlines round up.
 * A MANUAL scheduler counts ms and has no wake-up source: time moves only
 * through cb_timeouts_advance(), which fires
 * everything due, in order, with the clock set to each timeout's deadline
 * while its callback runs (so a callback that schedules +10 ms lands inside
 * the same window when it fits). The heap and firing code are the same.
 *
 * Deadlines are absolute: re-arming never accumulates error, so a timeout an
 * hour out fires at its deadline, and a periodic job that reschedules with
 * cb_timeouts_schedule_at(prev_deadline + period) never drifts.
 *
 * Ids. An id is (generation << 32 | slot); it dies when its timeout fires or is
 * cancelled. Using a dead id (stale, or cancel of a timeout from inside its own
 * callback) returns CB_ENOTFOUND and changes nothing. 0 is never an id. A slot's
 * generation wraps after 2^31 reuses of that slot.
 *
 * Memory per pending timeout: 16 B heap key (deadline, seq) + 4 B heap->slot
 * index + 24 B slot (fn, data, heap index, generation) = 44 B, plus growth
 * slack of the arrays (they double); cb_timeouts_memory() reports the total.
 *
 * Re-entrancy: from a callback you may schedule, cancel (any id, including
 * ones due in the same pass), reschedule, advance (manual: a nested advance
 * moves the clock further; time never goes back and nothing fires twice) and
 * cb_timeouts_close() (deferred until the callback returns). A manual-clock
 * callback that keeps scheduling itself with delay 0 never lets advance()
 * return: that is the caller's infinite loop, as with any event queue.
 * Single-threaded: the loop thread only. */
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct cb_timeouts cb_timeouts;
typedef uint64_t cb_timeout_id;
typedef void (*cb_timeout_fn)(cb_timeouts *t, cb_timeout_id id, void *data);

typedef enum cb_clock_kind { CB_CLOCK_SYSTEM = 0, CB_CLOCK_MANUAL = 1 } cb_clock_kind;

/* loop may be NULL only for CB_CLOCK_MANUAL. A manual clock starts at 0 ms. */
int cb_timeouts_new(uv_loop_t *loop, cb_clock_kind clock, cb_timeouts **out);
/* Drops every pending timeout without calling it. A system scheduler closes
 * its uv timer and is freed in the close callback (run the loop once more);
 * from inside a callback the close is deferred until it returns. */
void cb_timeouts_close(cb_timeouts *t);

void cb_timeouts_set_data(cb_timeouts *t, void *data);
void *cb_timeouts_get_data(const cb_timeouts *t);

/* The scheduler's clock in ms (system: the loop's monotonic time, refreshed;
 * manual: starts at 0 and moves only by advance). */
uint64_t cb_timeouts_now(cb_timeouts *t);

/* Run fn(t, id, data) once, at now + delay_ms or later (saturating). */
int cb_timeouts_schedule(cb_timeouts *t, uint64_t delay_ms, cb_timeout_fn fn, void *data,
                         cb_timeout_id *out);
/* Same at an absolute deadline; one already past fires on the next turn/advance. */
int cb_timeouts_schedule_at(cb_timeouts *t, uint64_t deadline_ms, cb_timeout_fn fn, void *data,
                            cb_timeout_id *out);
/* 0, or CB_ENOTFOUND when the id already fired, was cancelled or never existed. */
int cb_timeouts_cancel(cb_timeouts *t, cb_timeout_id id);
/* Moves a pending timeout (same id, fn, data); it queues behind others that
 * share its new deadline, as if newly scheduled. CB_ENOTFOUND if dead. */
int cb_timeouts_reschedule(cb_timeouts *t, cb_timeout_id id, uint64_t delay_ms);
int cb_timeouts_reschedule_at(cb_timeouts *t, cb_timeout_id id, uint64_t deadline_ms);
/* The pending timeout's deadline, or CB_ENOTFOUND. */
int cb_timeouts_deadline(const cb_timeouts *t, cb_timeout_id id, uint64_t *deadline_ms);

size_t cb_timeouts_pending(const cb_timeouts *t);
/* Earliest pending deadline, or CB_ENOTFOUND when nothing is pending. */
int cb_timeouts_next_deadline(const cb_timeouts *t, uint64_t *deadline_ms);
/* Bytes allocated for the heap and slot arrays (not counting the struct). */
size_t cb_timeouts_memory(const cb_timeouts *t);

/* Manual clock only (else CB_EINVAL): moves time forward by ms, firing every
 * timeout due up to the new time in deadline order, including ones scheduled
 * by those callbacks inside the window. *fired (may be NULL) gets the count. */
int cb_timeouts_advance(cb_timeouts *t, uint64_t ms, size_t *fired);

/* System clock: whether pending timeouts keep uv_run() from returning (on by
 * default, like a uv timer; a server may turn it off so only I/O does). */
void cb_timeouts_set_ref(cb_timeouts *t, int ref);
#endif
