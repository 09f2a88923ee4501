/* C unit driver for the timeout scheduler: a randomized differential test
 * against a naive reference model (sorted by deadline, then schedule order),
 * plus the re-entrancy cases and a real-clock check on a libuv loop.
 * Build and run: Tests/ctime/run.sh */
#include "cb_timeouts.h"
#include "cb_error.h"
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* ---- reference model ---- */
typedef struct { cb_timeout_id id; uint64_t deadline, seq; int live; int tag; } ref_t;
static ref_t refs[200000];
static size_t nrefs;
static uint64_t ref_seq;
static int fired_tags[200000];
static size_t nfired;

static void on_fire(cb_timeouts *t, cb_timeout_id id, void *data) {
    (void)id;
    int tag = (int)(intptr_t)data;
    CHECK(refs[tag].live);
    CHECK(cb_timeouts_now(t) == refs[tag].deadline || cb_timeouts_now(t) >= refs[tag].deadline);
    CHECK(cb_timeouts_cancel(t, id) == CB_ENOTFOUND); /* own id is dead */
    refs[tag].live = 0;
    fired_tags[nfired++] = tag;
}

static int ref_cmp(const void *a, const void *b) {
    const ref_t *x = *(ref_t *const *)a, *y = *(ref_t *const *)b;
    if (x->deadline != y->deadline) return x->deadline < y->deadline ? -1 : 1;
    return x->seq < y->seq ? -1 : 1;
}

static void differential(void) {
    cb_timeouts *t;
    CHECK(cb_timeouts_new(NULL, CB_CLOCK_MANUAL, &t) == 0);
    uint64_t now = 0;
    static ref_t *due[200000];
    for (int step = 0; step < 120000; step++) {
        uint64_t r = rnd() % 100;
        if (r < 50 && nrefs < 200000) {
            uint64_t delay = rnd() % 4 == 0 ? rnd() % 3 : rnd() % 5000; /* many ties */
            ref_t *x = &refs[nrefs];
            x->deadline = now + delay; x->seq = ref_seq++; x->live = 1; x->tag = (int)nrefs;
            CHECK(cb_timeouts_schedule(t, delay, on_fire, (void *)(intptr_t)nrefs, &x->id) == 0);
            CHECK(x->id != 0);
            nrefs++;
        } else if (r < 70 && nrefs) {
            ref_t *x = &refs[rnd() % nrefs];
            int rc = cb_timeouts_cancel(t, x->id);
            CHECK(rc == (x->live ? 0 : CB_ENOTFOUND));
            x->live = 0;
        } else if (r < 80 && nrefs) {
            ref_t *x = &refs[rnd() % nrefs];
            uint64_t delay = rnd() % 5000;
            int rc = cb_timeouts_reschedule(t, x->id, delay);
            CHECK(rc == (x->live ? 0 : CB_ENOTFOUND));
            if (x->live) { x->deadline = now + delay; x->seq = ref_seq++; }
        } else {
            uint64_t adv = rnd() % 400;
            size_t nd = 0;
            for (size_t i = 0; i < nrefs; i++)
                if (refs[i].live && refs[i].deadline <= now + adv) due[nd++] = &refs[i];
            qsort(due, nd, sizeof *due, ref_cmp);
            nfired = 0;
            size_t fired;
            CHECK(cb_timeouts_advance(t, adv, &fired) == 0);
            CHECK(fired == nd && nfired == nd);
            for (size_t i = 0; i < nd; i++) CHECK(fired_tags[i] == due[i]->tag);
            now += adv;
            CHECK(cb_timeouts_now(t) == now);
        }
        size_t live = 0;
        if (step % 1000 == 0) {
            for (size_t i = 0; i < nrefs; i++) live += refs[i].live;
            CHECK(cb_timeouts_pending(t) == live);
        }
    }
    printf("differential: %zu timeouts, pending at end %zu, memory %zu B\n", nrefs, cb_timeouts_pending(t),
           cb_timeouts_memory(t));
    cb_timeouts_close(t);
}

/* ---- re-entrancy ---- */
static cb_timeout_id ids[8];
static char order[64];
static int norder;

static void rec(cb_timeouts *t, cb_timeout_id id, void *data) {
    (void)t; (void)id;
    order[norder++] = (char)(intptr_t)data;
}
static void cancel_b(cb_timeouts *t, cb_timeout_id id, void *data) {
    rec(t, id, data);
    CHECK(cb_timeouts_cancel(t, ids[1]) == 0);            /* B, due in the same pass */
    CHECK(cb_timeouts_cancel(t, ids[1]) == CB_ENOTFOUND); /* twice: harmless */
    CHECK(cb_timeouts_schedule(t, 5, rec, (void *)'N', &ids[3]) == 0); /* within the window */
    CHECK(cb_timeouts_schedule(t, 0, rec, (void *)'Z', &ids[4]) == 0); /* due now, behind C */
}
static void closer(cb_timeouts *t, cb_timeout_id id, void *data) {
    rec(t, id, data);
    cb_timeouts_close(t);
    CHECK(cb_timeouts_schedule(t, 1, rec, (void *)'X', NULL) == CB_ECLOSED);
}

static void reentrancy(void) {
    cb_timeouts *t;
    CHECK(cb_timeouts_new(NULL, CB_CLOCK_MANUAL, &t) == 0);
    CHECK(cb_timeouts_schedule(t, 10, cancel_b, (void *)'A', &ids[0]) == 0);
    CHECK(cb_timeouts_schedule(t, 10, rec, (void *)'B', &ids[1]) == 0);
    CHECK(cb_timeouts_schedule(t, 10, rec, (void *)'C', &ids[2]) == 0);
    CHECK(cb_timeouts_schedule(t, 16, rec, (void *)'D', &ids[5]) == 0);
    size_t fired;
    CHECK(cb_timeouts_advance(t, 9, &fired) == 0 && fired == 0); /* never early */
    CHECK(cb_timeouts_advance(t, 1, &fired) == 0);
    CHECK(fired == 3 && memcmp(order, "ACZ", 3) == 0);
    CHECK(cb_timeouts_advance(t, 100, &fired) == 0 && fired == 2);
    CHECK(memcmp(order, "ACZND", 5) == 0); /* N at 15, D at 16 */
    CHECK(cb_timeouts_cancel(t, ids[0]) == CB_ENOTFOUND); /* stale */
    CHECK(cb_timeouts_cancel(t, 0) == CB_ENOTFOUND);
    CHECK(cb_timeouts_cancel(t, 0xdeadbeef00000001ull) == CB_ENOTFOUND);
    /* Reschedule later, earlier; reuse of slots gives new ids. */
    cb_timeout_id a, b;
    CHECK(cb_timeouts_schedule(t, 50, rec, (void *)'a', &a) == 0);
    CHECK(cb_timeouts_schedule(t, 60, rec, (void *)'b', &b) == 0);
    CHECK(a != ids[0] && b != ids[1]);
    CHECK(cb_timeouts_reschedule(t, a, 70) == 0);
    uint64_t d;
    CHECK(cb_timeouts_deadline(t, a, &d) == 0 && d == 110 + 70);
    norder = 0;
    CHECK(cb_timeouts_advance(t, 70, &fired) == 0 && fired == 2 && memcmp(order, "ba", 2) == 0);
    CHECK(cb_timeouts_advance(t, 0, &fired) == 0 && fired == 0);
    /* advance on a system clock is an error; saturation never wraps. */
    CHECK(cb_timeouts_schedule(t, UINT64_MAX, rec, (void *)'M', &a) == 0);
    CHECK(cb_timeouts_deadline(t, a, &d) == 0 && d == UINT64_MAX);
    /* close from inside a callback is deferred. */
    CHECK(cb_timeouts_schedule(t, 1, closer, (void *)'Q', NULL) == 0);
    CHECK(cb_timeouts_schedule(t, 1, rec, (void *)'R', NULL) == 0);
    norder = 0;
    CHECK(cb_timeouts_advance(t, 5, &fired) == 0 && fired == 1 && order[0] == 'Q'); /* t is gone now */
    printf("reentrancy: ok\n");
}

/* 1 hour crossed instantly, periodic via schedule_at without drift. */
static uint64_t ticks, last_deadline;
static void periodic(cb_timeouts *t, cb_timeout_id id, void *data) {
    (void)id; (void)data;
    ticks++;
    uint64_t now = cb_timeouts_now(t);
    CHECK(now == ticks * 1000);
    last_deadline = now;
    CHECK(cb_timeouts_schedule_at(t, now + 1000, periodic, NULL, NULL) == 0);
}
static void hour(void) {
    cb_timeouts *t;
    CHECK(cb_timeouts_new(NULL, CB_CLOCK_MANUAL, &t) == 0);
    CHECK(cb_timeouts_schedule(t, 1000, periodic, NULL, NULL) == 0);
    size_t fired;
    CHECK(cb_timeouts_advance(t, 3600 * 1000, &fired) == 0);
    CHECK(fired == 3600 && ticks == 3600 && cb_timeouts_now(t) == 3600000);
    cb_timeouts_close(t);
    printf("hour: ok\n");
}

/* Real clock: fire times never early against uv_hrtime, order preserved. */
static uint64_t t0;
static int nreal;
static uint64_t want[200];
static void real_cb(cb_timeouts *t, cb_timeout_id id, void *data) {
    (void)t; (void)id;
    int i = (int)(intptr_t)data;
    uint64_t el = (uv_hrtime() - t0) / 1000000;
    CHECK(el >= want[i]);
    /* deadlines are now + delay at scheduling: later-scheduled ties come due
     * later, so the firing order is exactly the scheduling order */
    CHECK(i == nreal);
    nreal++;
}
static void real_clock(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    cb_timeouts *t;
    CHECK(cb_timeouts_new(&loop, CB_CLOCK_SYSTEM, &t) == 0);
    CHECK(cb_timeouts_advance(t, 1, NULL) == CB_EINVAL);
    /* stale loop time: sleep before scheduling, must still not fire early */
    uv_sleep(30);
    t0 = uv_hrtime();
    for (int i = 0; i < 200; i++) {
        want[i] = (uint64_t)i / 2; /* pairs tie */
        CHECK(cb_timeouts_schedule(t, want[i], real_cb, (void *)(intptr_t)i, NULL) == 0);
    }
    cb_timeout_id c;
    CHECK(cb_timeouts_schedule(t, 5000, real_cb, NULL, &c) == 0);
    CHECK(cb_timeouts_cancel(t, c) == 0);
    uv_run(&loop, UV_RUN_DEFAULT); /* returns once nothing is pending */
    CHECK(nreal == 200);
    cb_timeouts_close(t);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
    printf("real clock: ok\n");
}

/* Real clock, periodic: each run reschedules at its own deadline + period,
 * while the callback itself takes time (2 ms of a 5 ms period). The k-th run
 * is due at base + k * period exactly, whatever the lateness before it (no
 * drift), and never runs before that. */
static uint64_t pr_base, pr_k;
enum { PR_PERIOD = 5, PR_RUNS = 40 };
static void periodic_real(cb_timeouts *t, cb_timeout_id id, void *data) {
    (void)id; (void)data;
    uint64_t due = pr_base + pr_k * PR_PERIOD;
    CHECK(cb_timeouts_now(t) >= due);
    pr_k++;
    uv_sleep(2);
    if (pr_k > PR_RUNS) return;
    cb_timeout_id next;
    CHECK(cb_timeouts_schedule_at(t, due + PR_PERIOD, periodic_real, NULL, &next) == 0);
    uint64_t d;
    CHECK(cb_timeouts_deadline(t, next, &d) == 0 && d == pr_base + pr_k * PR_PERIOD);
}
static void real_clock_periodic(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    cb_timeouts *t;
    CHECK(cb_timeouts_new(&loop, CB_CLOCK_SYSTEM, &t) == 0);
    pr_base = cb_timeouts_now(t) + PR_PERIOD;
    pr_k = 0;
    CHECK(cb_timeouts_schedule_at(t, pr_base, periodic_real, NULL, NULL) == 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(pr_k == PR_RUNS + 1);
    cb_timeouts_close(t);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
    printf("real clock, periodic without drift: ok\n");
}

/* Mass cancel: tombstones, compaction and slot reuse under a heavy mix,
 * checked for order and for memory staying bounded. */
static uint64_t mc_last_deadline, mc_last_seq_tag;
static size_t mc_fired;
static void mc_fire(cb_timeouts *t, cb_timeout_id id, void *data) {
    (void)id;
    uint64_t now = cb_timeouts_now(t), tag = (uint64_t)(uintptr_t)data;
    CHECK(now >= mc_last_deadline);
    if (now == mc_last_deadline) CHECK(tag > mc_last_seq_tag); /* FIFO among ties */
    mc_last_deadline = now;
    mc_last_seq_tag = tag;
    mc_fired++;
}
static void mass_cancel(void) {
    cb_timeouts *t;
    CHECK(cb_timeouts_new(NULL, CB_CLOCK_MANUAL, &t) == 0);
    enum { N = 100000 };
    static cb_timeout_id id[N];
    static uint64_t dl[N];
    uint64_t tag = 1;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N; i++) {
            CHECK(cb_timeouts_schedule(t, rnd() % 1000, mc_fire, (void *)(uintptr_t)tag++, &id[i]) == 0);
            CHECK(cb_timeouts_deadline(t, id[i], &dl[i]) == 0);
        }
        size_t live = N;
        for (int i = 0; i < N; i++)
            if (rnd() % 10 < 9) { CHECK(cb_timeouts_cancel(t, id[i]) == 0); live--; }
        CHECK(cb_timeouts_pending(t) == live);
        /* every survivor still knows its deadline (back-pointers fixed by compaction) */
        for (int i = 0; i < N; i++) {
            uint64_t d;
            if (cb_timeouts_deadline(t, id[i], &d) == 0) CHECK(d == dl[i]);
        }
        CHECK(cb_timeouts_memory(t) <= 64 * (size_t)N * 2); /* heap+slots for N, not 5N */
        mc_fired = 0;
        mc_last_deadline = 0;
        mc_last_seq_tag = 0;
        CHECK(cb_timeouts_advance(t, 1000, NULL) == 0);
        CHECK(mc_fired == live && cb_timeouts_pending(t) == 0);
    }
    printf("mass cancel: ok, memory %zu B for %d per round\n", cb_timeouts_memory(t), N);
    cb_timeouts_close(t);
}

int main(void) {
    differential();
    mass_cancel();
    reentrancy();
    hour();
    real_clock();
    real_clock_periodic();
    return 0;
}
