/* Timeout scheduler: an indexed 4-ary min-heap on one uv timer. Contract in
 * include/cb_timeouts.h.
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
 * <= 1.5x live and the amortized cost stays O(1). Invariant after every public
 * call: the top of the heap is live (or the heap is empty). */
#include "cb_timeouts.h"
#include "cb_error.h"
#include <stdlib.h>
#include <string.h>

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
    uv_timer_t timer; /* system clock only; first so the close cb finds us */
    uv_loop_t *loop;
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
    size_t batch_limit;
};

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

static void sift_down(cb_timeouts *t, size_t i, hkey k, uint32_t s) {
    hkey *keys = t->keys;
    size_t n = t->n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t m = c, end = c + 4 < n ? c + 4 : n;
        for (size_t j = c + 1; j < end; j++)
            if (key_less(keys[j], keys[m])) m = j;
        if (!key_less(keys[m], k)) break;
        keys[i] = keys[m];
        set_pos(t, i, t->hslot[m]);
        i = m;
    }
    keys[i] = k;
    set_pos(t, i, s);
}

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

/* Floyd's sift-down on keys/hslot only; slot back-pointers are fixed in one
 * pass afterwards, so heapify touches the slot table once per entry. */
static void sift_down_plain(hkey *keys, uint32_t *hs, size_t n, size_t i) {
    hkey k = keys[i];
    uint32_t s = hs[i];
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t m = c, end = c + 4 < n ? c + 4 : n;
        for (size_t j = c + 1; j < end; j++)
            if (key_less(keys[j], keys[m])) m = j;
        if (!key_less(keys[m], k)) break;
        keys[i] = keys[m];
        hs[i] = hs[m];
        i = m;
    }
    keys[i] = k;
    hs[i] = s;
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
        for (size_t i = (w - 2) / 4 + 1; i-- > 0;) sift_down_plain(t->keys, t->hslot, w, i);
    for (size_t i = 0; i < w; i++) t->slots[t->hslot[i]].hidx = (uint32_t)i;
}

static int heap_grow(cb_timeouts *t) {
    size_t ncap = t->cap ? t->cap * 2 : 64;
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
            uint64_t ncap = t->slots_cap ? (uint64_t)t->slots_cap * 2 : 64;
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

/* ---- clock and timer ----------------------------------------------------- */

uint64_t cb_timeouts_now(cb_timeouts *t) {
    if (t->clock == CB_CLOCK_MANUAL) return t->manual_now;
    uv_update_time(t->loop); /* the cached loop time may be stale */
    return uv_now(t->loop);
}

static void on_timer(uv_timer_t *h);

/* Keeps the uv timer armed at or before the earliest deadline. Lazy about
 * later deadlines: if the minimum moved later (cancel), the timer fires once
 * early, finds nothing due, and re-arms; that spares every cancel a libuv
 * heap operation. */
static void rearm(cb_timeouts *t) {
    if (t->clock != CB_CLOCK_SYSTEM || t->running || t->closing) return;
    if (t->n == 0) {
        if (t->armed) {
            uv_timer_stop(&t->timer);
            t->armed = 0;
        }
        return;
    }
    uint64_t d = t->keys[0].deadline;
    if (t->armed && t->armed_deadline <= d) return;
    uint64_t now = uv_now(t->loop);
    uv_timer_start(&t->timer, on_timer, d > now ? d - now : 0, 0);
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

static void on_timer(uv_timer_t *h) {
    cb_timeouts *t = (cb_timeouts *)h;
    t->armed = 0;
    uint64_t now = uv_now(t->loop);
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
        uv_timer_start(&t->timer, on_timer, 0, 0);
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
    t->free_head = NONE;
    t->batch_limit = 4096;
    if (clock == CB_CLOCK_SYSTEM) {
        int rc = uv_timer_init(loop, &t->timer);
        if (rc) {
            free(t);
            return rc;
        }
    }
    *out = t;
    return 0;
}

static void on_close(uv_handle_t *h) { free(h); /* timer is the first member */ }

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
        uv_close((uv_handle_t *)&t->timer, on_close);
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
cb_clock_kind cb_timeouts_clock(const cb_timeouts *t) { return t->clock; }
void cb_timeouts_set_batch_limit(cb_timeouts *t, size_t limit) { t->batch_limit = limit ? limit : 1; }

void cb_timeouts_set_ref(cb_timeouts *t, int ref) {
    if (t->clock != CB_CLOCK_SYSTEM) return;
    if (ref)
        uv_ref((uv_handle_t *)&t->timer);
    else
        uv_unref((uv_handle_t *)&t->timer);
}

int cb_timeouts_schedule_at(cb_timeouts *t, uint64_t deadline, cb_timeout_fn fn, void *data,
                            cb_timeout_id *out) {
    if (!t || !fn) return CB_EINVAL;
    if (t->closing) return CB_ECLOSED;
    if (t->n == t->cap) {
        if (t->ntomb * 4 >= t->n && t->ntomb) {
            compact(t); /* make room from tombstones before growing */
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

/* The base for relative deadlines. System: the precise monotonic clock rounded
 * UP to the next ms. The loop's cached time can be arbitrarily stale (set
 * before a long callback, or before the loop last ran) and is truncated (and
 * may come from the coarse clock), so a deadline computed from it could fire
 * up to that much early in real time; rounding up costs at most 1 ms of
 * lateness and makes "never early" hold against the real clock. Firing
 * compares against loop time, which never runs ahead of the real clock. */
static uint64_t deadline_base(cb_timeouts *t) {
    if (t->clock == CB_CLOCK_MANUAL) return t->manual_now;
    return (uv_hrtime() + 999999) / 1000000;
}

int cb_timeouts_schedule(cb_timeouts *t, uint64_t delay_ms, cb_timeout_fn fn, void *data,
                         cb_timeout_id *out) {
    if (!t) return CB_EINVAL;
    return cb_timeouts_schedule_at(t, sat_add(deadline_base(t), delay_ms), fn, data, out);
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

int cb_timeouts_reschedule_at(cb_timeouts *t, cb_timeout_id id, uint64_t deadline) {
    if (!t) return CB_EINVAL;
    slot *sl = lookup(t, id);
    if (!sl) return CB_ENOTFOUND;
    hkey k = {deadline, t->seq++};
    heap_fix(t, sl->hidx, k, (uint32_t)id);
    drop_top_tombstones(t); /* moving the top down may surface a tombstone */
    rearm(t);
    return 0;
}

int cb_timeouts_reschedule(cb_timeouts *t, cb_timeout_id id, uint64_t delay_ms) {
    if (!t) return CB_EINVAL;
    if (!lookup(t, id)) return CB_ENOTFOUND;
    return cb_timeouts_reschedule_at(t, id, sat_add(deadline_base(t), delay_ms));
}

int cb_timeouts_deadline(const cb_timeouts *t, cb_timeout_id id, uint64_t *deadline) {
    const slot *sl = t ? lookup(t, id) : NULL;
    if (!sl) return CB_ENOTFOUND;
    if (deadline) *deadline = t->keys[sl->hidx].deadline;
    return 0;
}

size_t cb_timeouts_pending(const cb_timeouts *t) { return t->n - t->ntomb; }

int cb_timeouts_next_deadline(const cb_timeouts *t, uint64_t *deadline) {
    if (!t->n) return CB_ENOTFOUND;
    if (deadline) *deadline = t->keys[0].deadline;
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
