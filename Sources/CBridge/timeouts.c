/* Timeout scheduler: an indexed 4-ary min-heap on one loop wake-up source.
 * Contract in include/cb_timeouts.h.
 *
 * Time. Heap keys are "ticks": milliseconds on a manual clock, nanoseconds of
 * CLOCK_MONOTONIC (uv_hrtime) on the system clock. The API speaks ms; a
 * relative deadline on the system clock is now_ns + delay exactly, so firing
 * when uv_hrtime() >= deadline is never early and needs no rounding.
 *
 * Wake-up (system clock). Linux: a timerfd armed at the absolute deadline in
 * ns, watched by a uv_poll handle, so the loop wakes at the deadline itself.
 * Elsewhere: a uv timer, whose ms-granular poll timeout adds up to ~2 ms of
 * lateness (ceil of the deadline to the next loop ms + the fraction of the ms
 * at which the loop went to sleep).
 *
 * Layout, chosen for the 1M-pending case:
 *   keys[]  (deadline, seq) pairs, 16 B, the only thing comparisons touch.
 *           The array is offset so keys[1] is 64-byte aligned: the 4 children
 *           of any node (4i+1..4i+4) then share one cache line.
 *   hslot[] heap position -> slot index (4 B), kept apart from keys so sifting
 *           compares on dense data.
 *   slots[] per-id state: fn, data, heap index, generation (24 B). Free slots
 *           chain through `hidx`; generation is odd while pending, even while
 *           free, so a stale or forged id never matches a free slot.
 *
 * Cancel is lazy: it frees the slot at once (the id dies, the slot is reusable)
 * and leaves a tombstone in the heap (hslot[i] = NONE), which costs one cache
 * miss instead of a sift through random heap lines. Tombstones are dropped when
 * they reach the top, and the heap is compacted (filter + Floyd heapify, both
 * sequential) once they outnumber half the live entries, so heap memory stays
 * <= 1.5x live and the amortized cost stays O(1); a full heap reclaims its
 * tombstones before it grows, so churn at a steady count does not grow it.
 * Invariant after every public call: the top of the heap is live (or the heap
 * is empty). */
#include "cb_timeouts.h"
#include "cb_error.h"
#include <stdlib.h>
#include <string.h>
/* CB_NO_TIMERFD builds the portable uv-timer wake-up on Linux too (tests). */
#if defined(__linux__) && !defined(CB_NO_TIMERFD)
#include <errno.h>
#include <sys/timerfd.h>
#include <unistd.h>
#define CB_USE_TIMERFD 1
#endif

#define NONE UINT32_MAX
#define KEY_PAD 3 /* keys = aligned base + 3 entries -> &keys[1] is 64-aligned */

typedef struct {
    uint64_t deadline;
    uint64_t seq;
} hkey;

typedef struct {
    cb_timeout_fn fn;
    void *data;
    uint32_t hidx; /* heap index while pending; next free slot while free */
    uint32_t gen;  /* odd: pending */
} slot;

struct cb_timeouts {
    /* The wake-up handle (system clock only), first so the close callback
     * can free the whole struct from the handle pointer. */
#ifdef CB_USE_TIMERFD
    uv_poll_t wake;
    int tfd;
    int polling;
#else
    uv_timer_t wake;
#endif
    uv_loop_t *loop;
    uint64_t unit; /* ticks per ms: 1 (manual) or 1e6 (system, ns) */
    cb_clock_kind clock;
    void *data;
    uint64_t manual_now;
    uint64_t seq;

    hkey *keys;
    void *keys_alloc;
    uint32_t *hslot; /* NONE: tombstone of a cancelled timeout */
    size_t n, cap;   /* n counts tombstones too */
    size_t ntomb;

    slot *slots;
    uint32_t nslots, slots_cap, free_head;

    uint64_t armed_deadline;
    int armed;
    int running; /* depth of callback dispatch (advance may nest) */
    int closing;
    /* System clock: callbacks per timer turn before yielding to I/O, so a
     * burst of due timeouts cannot starve the loop. */
    size_t batch_limit;
};

static int schedule_ticks(cb_timeouts *t, uint64_t deadline, cb_timeout_fn fn, void *data,
                          cb_timeout_id *out);

static inline int key_less(hkey a, hkey b) {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.seq < b.seq);
}

static inline uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

/* ---- heap ---------------------------------------------------------------- */

/* Heap position i now holds slot s (or a tombstone). */
static inline void set_pos(cb_timeouts *t, size_t i, uint32_t s) {
    t->hslot[i] = s;
    if (s != NONE) t->slots[s].hidx = (uint32_t)i;
}

static void sift_up(cb_timeouts *t, size_t i, hkey k, uint32_t s) {
    hkey *keys = t->keys;
    while (i > 0) {
        size_t p = (i - 1) >> 2;
        if (!key_less(k, keys[p])) break;
        keys[i] = keys[p];
        set_pos(t, i, t->hslot[p]);
        i = p;
    }
    keys[i] = k;
    set_pos(t, i, s);
}

/* fix: keep slot back-pointers current on every move (a live heap); 0 for
 * compact()'s heapify, which fixes them all in one pass afterwards so it
 * touches the slot table once per entry. A constant at each call site, so
 * the branch folds away. */
static inline void sift_down_impl(cb_timeouts *t, size_t i, hkey k, uint32_t s, int fix) {
    hkey *keys = t->keys;
    uint32_t *hs = t->hslot;
    size_t n = t->n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t m = c, end = c + 4 < n ? c + 4 : n;
        for (size_t j = c + 1; j < end; j++)
            if (key_less(keys[j], keys[m])) m = j;
        if (!key_less(keys[m], k)) break;
        keys[i] = keys[m];
        if (fix) set_pos(t, i, hs[m]);
        else hs[i] = hs[m];
        i = m;
    }
    keys[i] = k;
    if (fix) set_pos(t, i, s);
    else hs[i] = s;
}

static void sift_down(cb_timeouts *t, size_t i, hkey k, uint32_t s) { sift_down_impl(t, i, k, s, 1); }

/* Puts k/s at heap position i (which is vacant or being overwritten) and
 * restores order in whichever direction it is broken. */
static void heap_fix(cb_timeouts *t, size_t i, hkey k, uint32_t s) {
    if (i > 0 && key_less(k, t->keys[(i - 1) >> 2]))
        sift_up(t, i, k, s);
    else
        sift_down(t, i, k, s);
}

static void heap_remove(cb_timeouts *t, size_t i) {
    size_t last = --t->n;
    if (i == last) return;
    heap_fix(t, i, t->keys[last], t->hslot[last]);
}

/* Restores the invariant that the top is live. */
static void drop_top_tombstones(cb_timeouts *t) {
    while (t->n && t->hslot[0] == NONE) {
        heap_remove(t, 0);
        t->ntomb--;
    }
}

/* Removes every tombstone: filter in place, heapify, fix back-pointers. */
static void compact(cb_timeouts *t) {
    size_t w = 0;
    for (size_t r = 0; r < t->n; r++) {
        if (t->hslot[r] == NONE) continue;
        t->keys[w] = t->keys[r];
        t->hslot[w] = t->hslot[r];
        w++;
    }
    t->n = w;
    t->ntomb = 0;
    if (w > 1)
        for (size_t i = (w - 2) / 4 + 1; i-- > 0;) sift_down_impl(t, i, t->keys[i], t->hslot[i], 0);
    /* Random writes into the slot table: prefetch a little ahead. */
    for (size_t i = 0; i < w; i++) {
        if (i + 16 < w) __builtin_prefetch(&t->slots[t->hslot[i + 16]], 1);
        t->slots[t->hslot[i]].hidx = (uint32_t)i;
    }
}

/* Doubling up to 2^19 entries, then 1.5x: growth slack stays under half, so
 * a count just past a power of two (or a heap grown by churn) does not cost
 * twice its entries; 1M pending fill 1.18M entries, 52 bytes each. */
static size_t grown(size_t cap) { return cap == 0 ? 64 : cap < (1u << 19) ? cap * 2 : cap + cap / 2; }

static int heap_grow(cb_timeouts *t) {
    size_t ncap = grown(t->cap);
    if (ncap > NONE) ncap = NONE;
    if (ncap <= t->cap) return CB_ETOOBIG;
    /* aligned_alloc wants a size that is a multiple of the alignment. */
    size_t bytes = ((ncap + KEY_PAD) * sizeof(hkey) + 63) & ~(size_t)63;
    void *ka = aligned_alloc(64, bytes);
    uint32_t *hs = realloc(t->hslot, ncap * sizeof *hs);
    if (!ka || !hs) {
        free(ka);
        if (hs) t->hslot = hs;
        return CB_ENOMEM;
    }
    hkey *nk = (hkey *)ka + KEY_PAD;
    if (t->n) memcpy(nk, t->keys, t->n * sizeof(hkey));
    free(t->keys_alloc);
    t->keys_alloc = ka;
    t->keys = nk;
    t->hslot = hs;
    t->cap = ncap;
    return 0;
}

/* ---- slots --------------------------------------------------------------- */

static int slot_alloc(cb_timeouts *t, uint32_t *out) {
    uint32_t s = t->free_head;
    if (s != NONE) {
        t->free_head = t->slots[s].hidx;
    } else {
        if (t->nslots == t->slots_cap) {
            uint64_t ncap = grown(t->slots_cap);
            if (ncap > NONE) ncap = NONE;
            if (ncap <= t->slots_cap) return CB_ETOOBIG;
            slot *ns = realloc(t->slots, ncap * sizeof *ns);
            if (!ns) return CB_ENOMEM;
            t->slots = ns;
            t->slots_cap = (uint32_t)ncap;
        }
        s = t->nslots++;
        t->slots[s].gen = 0;
    }
    t->slots[s].gen++; /* even -> odd: pending */
    *out = s;
    return 0;
}

static void slot_free(cb_timeouts *t, uint32_t s) {
    slot *sl = &t->slots[s];
    sl->gen++; /* odd -> even: every id naming this slot is now stale */
    sl->fn = NULL;
    sl->data = NULL;
    sl->hidx = t->free_head;
    t->free_head = s;
}

static inline cb_timeout_id make_id(uint32_t gen, uint32_t s) { return ((uint64_t)gen << 32) | s; }

static slot *lookup(const cb_timeouts *t, cb_timeout_id id) {
    uint32_t s = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (s >= t->nslots || !(gen & 1) || t->slots[s].gen != gen) return NULL;
    return &t->slots[s];
}

/* ---- clock and wake-up ---------------------------------------------------- */

static inline uint64_t now_ticks(const cb_timeouts *t) {
    return t->clock == CB_CLOCK_MANUAL ? t->manual_now : uv_hrtime();
}
static inline uint64_t ms_to_ticks(const cb_timeouts *t, uint64_t ms) {
    return ms > UINT64_MAX / t->unit ? UINT64_MAX : ms * t->unit;
}
/* Rounded up: a reported deadline is never earlier than the real one. */
static inline uint64_t ticks_to_ms(const cb_timeouts *t, uint64_t ticks) {
    return ticks / t->unit + (ticks % t->unit != 0);
}

uint64_t cb_timeouts_now(cb_timeouts *t) {
    return t->clock == CB_CLOCK_MANUAL ? t->manual_now : uv_hrtime() / 1000000;
}

static void on_wake(cb_timeouts *t);

#ifdef CB_USE_TIMERFD
static void on_poll(uv_poll_t *h, int status, int events) {
    (void)status;
    (void)events;
    cb_timeouts *t = (cb_timeouts *)h;
    uint64_t expirations;
    /* Drain; EAGAIN (already drained, or re-armed meanwhile) is fine. */
    while (read(t->tfd, &expirations, sizeof expirations) < 0 && errno == EINTR) {}
    on_wake(t);
}

static void wake_at(cb_timeouts *t, uint64_t deadline_ns) {
    struct itimerspec its = {{0, 0}, {0, 0}};
    /* An all-zero it_value would disarm: a deadline at or before 0 ns is
     * simply "now", 1 ns after the clock's epoch. */
    if (deadline_ns == 0) deadline_ns = 1;
    its.it_value.tv_sec = (time_t)(deadline_ns / 1000000000u);
    its.it_value.tv_nsec = (long)(deadline_ns % 1000000000u);
    if (deadline_ns / 1000000000u > (uint64_t)INT64_MAX / 2) its.it_value.tv_sec = (time_t)(INT64_MAX / 2);
    timerfd_settime(t->tfd, TFD_TIMER_ABSTIME, &its, NULL);
    if (!t->polling) {
        uv_poll_start(&t->wake, UV_READABLE, on_poll);
        t->polling = 1;
    }
}

static void wake_stop(cb_timeouts *t) {
    /* A stopped poll handle does not keep uv_run() alive. The timerfd may
     * still expire; the next wake_at() re-arms it (which resets it) before
     * polling again, and a stale readiness only causes one empty wake-up. */
    if (t->polling) {
        uv_poll_stop(&t->wake);
        t->polling = 0;
    }
}
#else
static void on_timer(uv_timer_t *h) { on_wake((cb_timeouts *)h); }

static void wake_at(cb_timeouts *t, uint64_t deadline_ns) {
    /* libuv decides a timer is due when loop time (floor of ms) reaches
     * loop time at start + timeout, so aim at the deadline's ms rounded up. */
    uint64_t due_ms = deadline_ns / 1000000 + (deadline_ns % 1000000 != 0);
    uv_update_time(t->loop);
    uint64_t loop_ms = uv_now(t->loop);
    uv_timer_start(&t->wake, on_timer, due_ms > loop_ms ? due_ms - loop_ms : 0, 0);
}

static void wake_stop(cb_timeouts *t) { uv_timer_stop(&t->wake); }
#endif

/* Keeps the wake-up armed at or before the earliest deadline. Lazy about
 * later deadlines: if the minimum moved later (cancel), the loop wakes once
 * early, finds nothing due, and re-arms; that spares every cancel a syscall
 * or libuv heap operation. */
static void rearm(cb_timeouts *t) {
    if (t->clock != CB_CLOCK_SYSTEM || t->running || t->closing) return;
    if (t->n == 0) {
        /* Also after a wake-up (armed already 0): the handle may be active. */
        wake_stop(t);
        t->armed = 0;
        return;
    }
    uint64_t d = t->keys[0].deadline;
    if (t->armed && t->armed_deadline <= d) return;
    wake_at(t, d);
    t->armed = 1;
    t->armed_deadline = d;
}

static void finalize(cb_timeouts *t);

/* Pops the minimum and runs its callback. The slot is freed first, so the
 * callback sees its own id as dead and may reuse everything freely. */
static void fire_min(cb_timeouts *t) {
    uint32_t s = t->hslot[0]; /* live: the invariant */
    heap_remove(t, 0);
    drop_top_tombstones(t);
    slot *sl = &t->slots[s];
    cb_timeout_fn fn = sl->fn;
    void *data = sl->data;
    cb_timeout_id id = make_id(sl->gen, s);
    slot_free(t, s);
    fn(t, id, data);
}

static void on_wake(cb_timeouts *t) {
    t->armed = 0;
    uint64_t now = uv_hrtime();
    /* Only what was scheduled before this turn: a callback that schedules
     * with delay 0 runs next turn, after I/O, as with libuv's own timers. */
    uint64_t seq_bound = t->seq;
    size_t fired = 0;
    t->running++;
    while (t->n && !t->closing && fired < t->batch_limit) {
        hkey k = t->keys[0];
        if (k.deadline > now || k.seq >= seq_bound) break;
        fire_min(t);
        fired++;
    }
    t->running--;
    if (t->closing) {
        if (!t->running) finalize(t);
        return;
    }
    if (fired == t->batch_limit && t->n && t->keys[0].deadline <= now) {
        /* Yield to I/O, continue on the next turn. */
        wake_at(t, now);
        t->armed = 1;
        t->armed_deadline = now;
        return;
    }
    rearm(t);
}

/* ---- public -------------------------------------------------------------- */

int cb_timeouts_new(uv_loop_t *loop, cb_clock_kind clock, cb_timeouts **out) {
    if (!out || (clock != CB_CLOCK_SYSTEM && clock != CB_CLOCK_MANUAL)) return CB_EINVAL;
    if (clock == CB_CLOCK_SYSTEM && !loop) return CB_EINVAL;
    cb_timeouts *t = calloc(1, sizeof *t);
    if (!t) return CB_ENOMEM;
    t->loop = loop;
    t->clock = clock;
    t->unit = clock == CB_CLOCK_MANUAL ? 1 : 1000000;
    t->free_head = NONE;
    t->batch_limit = 4096;
    if (clock == CB_CLOCK_SYSTEM) {
#ifdef CB_USE_TIMERFD
        t->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (t->tfd < 0) {
            int rc = -errno;
            free(t);
            return rc;
        }
        int rc = uv_poll_init(loop, &t->wake, t->tfd);
        if (rc) {
            close(t->tfd);
            free(t);
            return rc;
        }
#else
        int rc = uv_timer_init(loop, &t->wake);
        if (rc) {
            free(t);
            return rc;
        }
#endif
    }
    *out = t;
    return 0;
}

static void on_close(uv_handle_t *h) {
    cb_timeouts *t = (cb_timeouts *)h; /* the wake handle is the first member */
#ifdef CB_USE_TIMERFD
    close(t->tfd);
#endif
    free(t);
}

static void finalize(cb_timeouts *t) {
    free(t->keys_alloc);
    free(t->hslot);
    free(t->slots);
    t->keys_alloc = NULL;
    t->keys = NULL;
    t->hslot = NULL;
    t->slots = NULL;
    t->n = t->cap = t->ntomb = 0;
    t->nslots = t->slots_cap = 0;
    if (t->clock == CB_CLOCK_SYSTEM)
        uv_close((uv_handle_t *)&t->wake, on_close);
    else
        free(t);
}

void cb_timeouts_close(cb_timeouts *t) {
    if (!t || t->closing) return;
    t->closing = 1;
    if (!t->running) finalize(t);
}

void cb_timeouts_set_data(cb_timeouts *t, void *data) { t->data = data; }
void *cb_timeouts_get_data(const cb_timeouts *t) { return t->data; }

void cb_timeouts_set_ref(cb_timeouts *t, int ref) {
    if (t->clock != CB_CLOCK_SYSTEM) return;
    if (ref)
        uv_ref((uv_handle_t *)&t->wake);
    else
        uv_unref((uv_handle_t *)&t->wake);
}

int cb_timeouts_schedule_at(cb_timeouts *t, uint64_t deadline_ms, cb_timeout_fn fn, void *data,
                            cb_timeout_id *out) {
    if (!t) return CB_EINVAL;
    return schedule_ticks(t, ms_to_ticks(t, deadline_ms), fn, data, out);
}

static int schedule_ticks(cb_timeouts *t, uint64_t deadline, cb_timeout_fn fn, void *data,
                          cb_timeout_id *out) {
    if (!t || !fn) return CB_EINVAL;
    if (t->closing) return CB_ECLOSED;
    if (t->n == t->cap) {
        /* Under steady churn the heap fills with tombstones: reclaim them
         * before growing once they are an eighth of it (at most 8 moves per
         * insert, amortized, and no growth while the live count is flat). */
        if (t->ntomb * 8 >= t->n && t->ntomb) {
            compact(t);
        } else {
            int rc = heap_grow(t);
            if (rc) return rc;
        }
    }
    uint32_t s;
    int rc = slot_alloc(t, &s);
    if (rc) return rc;
    slot *sl = &t->slots[s];
    sl->fn = fn;
    sl->data = data;
    hkey k = {deadline, t->seq++};
    sift_up(t, t->n++, k, s);
    if (out) *out = make_id(sl->gen, s);
    if (t->clock == CB_CLOCK_SYSTEM && t->keys[0].seq == k.seq) rearm(t);
    return 0;
}

/* Relative deadlines start from the precise monotonic clock, never from the
 * loop's cached time, which can be arbitrarily stale (set before a long
 * callback, or before the loop last ran): a deadline computed from it would
 * fire early in real time. */
int cb_timeouts_schedule(cb_timeouts *t, uint64_t delay_ms, cb_timeout_fn fn, void *data,
                         cb_timeout_id *out) {
    if (!t) return CB_EINVAL;
    return schedule_ticks(t, sat_add(now_ticks(t), ms_to_ticks(t, delay_ms)), fn, data, out);
}

int cb_timeouts_cancel(cb_timeouts *t, cb_timeout_id id) {
    if (!t) return CB_EINVAL;
    slot *sl = lookup(t, id);
    if (!sl) return CB_ENOTFOUND;
    uint32_t i = sl->hidx;
    t->hslot[i] = NONE;
    t->ntomb++;
    slot_free(t, (uint32_t)id);
    if (i == 0) drop_top_tombstones(t);
    if (t->ntomb * 2 > t->n - t->ntomb && t->ntomb >= 64) compact(t);
    if (t->n == 0) rearm(t);
    return 0;
}

static int reschedule_ticks(cb_timeouts *t, cb_timeout_id id, uint64_t deadline) {
    slot *sl = lookup(t, id);
    if (!sl) return CB_ENOTFOUND;
    hkey k = {deadline, t->seq++};
    heap_fix(t, sl->hidx, k, (uint32_t)id);
    drop_top_tombstones(t); /* moving the top down may surface a tombstone */
    rearm(t);
    return 0;
}

int cb_timeouts_reschedule_at(cb_timeouts *t, cb_timeout_id id, uint64_t deadline_ms) {
    if (!t) return CB_EINVAL;
    return reschedule_ticks(t, id, ms_to_ticks(t, deadline_ms));
}

int cb_timeouts_reschedule(cb_timeouts *t, cb_timeout_id id, uint64_t delay_ms) {
    if (!t) return CB_EINVAL;
    if (!lookup(t, id)) return CB_ENOTFOUND;
    return reschedule_ticks(t, id, sat_add(now_ticks(t), ms_to_ticks(t, delay_ms)));
}

int cb_timeouts_deadline(const cb_timeouts *t, cb_timeout_id id, uint64_t *deadline) {
    const slot *sl = t ? lookup(t, id) : NULL;
    if (!sl) return CB_ENOTFOUND;
    if (deadline) *deadline = ticks_to_ms(t, t->keys[sl->hidx].deadline);
    return 0;
}

size_t cb_timeouts_pending(const cb_timeouts *t) { return t->n - t->ntomb; }

int cb_timeouts_next_deadline(const cb_timeouts *t, uint64_t *deadline) {
    if (!t->n) return CB_ENOTFOUND;
    if (deadline) *deadline = ticks_to_ms(t, t->keys[0].deadline);
    return 0;
}

size_t cb_timeouts_memory(const cb_timeouts *t) {
    size_t keys = t->cap ? (((t->cap + KEY_PAD) * sizeof(hkey) + 63) & ~(size_t)63) : 0;
    return keys + t->cap * sizeof(uint32_t) + (size_t)t->slots_cap * sizeof(slot);
}

int cb_timeouts_advance(cb_timeouts *t, uint64_t ms, size_t *fired) {
    if (!t || t->clock != CB_CLOCK_MANUAL) return CB_EINVAL;
    if (t->closing) return CB_ECLOSED;
    uint64_t target = sat_add(t->manual_now, ms);
    size_t count = 0;
    t->running++;
    while (t->n && !t->closing && t->keys[0].deadline <= target) {
        /* The clock reads each timeout's own deadline while it runs, so
         * relative schedules from a callback are exact, never early. */
        if (t->keys[0].deadline > t->manual_now) t->manual_now = t->keys[0].deadline;
        fire_min(t);
        count++;
    }
    t->running--;
    if (fired) *fired = count;
    if (t->closing) {
        if (!t->running) finalize(t);
        return 0;
    }
    if (t->manual_now < target) t->manual_now = target;
    return 0;
}
