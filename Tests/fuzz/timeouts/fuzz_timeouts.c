/* libFuzzer target for the timeout scheduler (manual clock): the input is a
 * program of schedule / schedule_at / cancel / reschedule / advance operations,
 * and callbacks themselves cancel, schedule and reschedule. Every firing is
 * checked against a naive reference model: it must be the live timeout with
 * the smallest (deadline, schedule order), with the clock at its deadline
 * (never early), and an advance must leave nothing due behind. Ids of dead
 * timeouts must be rejected. */
#include "cb_error.h"
#include "cb_timeouts.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 4096
typedef struct {
    cb_timeout_id id;
    uint64_t deadline, seq;
    int live;
} ref_t;

static ref_t refs[MAXR];
static size_t nrefs;
static uint64_t seqc, clock_now;
static const uint8_t *in;
static size_t inlen;
static cb_timeouts *T;

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "CHECK failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static unsigned byte(void) {
    if (!inlen) return 0;
    inlen--;
    return *in++;
}
static uint64_t delay(void) {
    unsigned b = byte();
    /* mostly small, with ties; sometimes far or saturating */
    if (b < 200) return b % 50;
    if (b < 250) return (uint64_t)byte() * 97;
    return b == 255 ? UINT64_MAX - byte() : (uint64_t)1 << 40;
}
static uint64_t sat(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

static void on_fire(cb_timeouts *t, cb_timeout_id id, void *data);

static void do_schedule(int absolute) {
    if (nrefs == MAXR) return;
    ref_t *r = &refs[nrefs];
    uint64_t d = delay();
    uint64_t at = absolute ? (byte() & 1 ? sat(clock_now, d) : (d > clock_now ? 0 : clock_now - d)) : sat(clock_now, d);
    int rc = absolute ? cb_timeouts_schedule_at(T, at, on_fire, (void *)(uintptr_t)nrefs, &r->id)
                      : cb_timeouts_schedule(T, d, on_fire, (void *)(uintptr_t)nrefs, &r->id);
    CHECK(rc == 0 && r->id != 0);
    r->deadline = at;
    r->seq = seqc++;
    r->live = 1;
    nrefs++;
}
static void do_cancel(void) {
    if (!nrefs) return;
    ref_t *r = &refs[byte() % nrefs];
    CHECK(cb_timeouts_cancel(T, r->id) == (r->live ? 0 : CB_ENOTFOUND));
    r->live = 0;
}
static void do_reschedule(void) {
    if (!nrefs) return;
    ref_t *r = &refs[byte() % nrefs];
    uint64_t d = delay();
    CHECK(cb_timeouts_reschedule(T, r->id, d) == (r->live ? 0 : CB_ENOTFOUND));
    if (r->live) {
        r->deadline = sat(clock_now, d);
        r->seq = seqc++;
    }
}
static size_t live_min(void) {
    size_t m = SIZE_MAX;
    for (size_t i = 0; i < nrefs; i++)
        if (refs[i].live && (m == SIZE_MAX || refs[i].deadline < refs[m].deadline ||
                             (refs[i].deadline == refs[m].deadline && refs[i].seq < refs[m].seq)))
            m = i;
    return m;
}

static void on_fire(cb_timeouts *t, cb_timeout_id id, void *data) {
    size_t i = (size_t)(uintptr_t)data;
    CHECK(i == live_min());
    CHECK(refs[i].id == id);
    uint64_t now = cb_timeouts_now(t);
    CHECK(now >= refs[i].deadline);                                  /* never early */
    CHECK(now == (refs[i].deadline > clock_now ? refs[i].deadline : clock_now)); /* exactly at it */
    clock_now = now;
    refs[i].live = 0;
    CHECK(cb_timeouts_cancel(t, id) == CB_ENOTFOUND); /* its own id is dead */
    /* re-entrant work driven by the input */
    switch (byte() % 5) {
    case 0: do_cancel(); break;
    case 1: do_schedule(0); break;
    case 2: do_reschedule(); break;
    case 3: do_schedule(1); break;
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    in = data;
    inlen = size;
    nrefs = 0;
    seqc = 0;
    clock_now = 0;
    CHECK(cb_timeouts_new(NULL, CB_CLOCK_MANUAL, &T) == 0);
    while (inlen) {
        switch (byte() % 6) {
        case 0: case 1: do_schedule(0); break;
        case 2: do_cancel(); break;
        case 3: do_reschedule(); break;
        case 4: do_schedule(1); break;
        case 5: {
            uint64_t ms = byte() == 255 ? UINT64_MAX : (uint64_t)byte() * 3;
            uint64_t target = sat(clock_now, ms);
            size_t fired;
            CHECK(cb_timeouts_advance(T, ms, &fired) == 0);
            clock_now = target;
            CHECK(cb_timeouts_now(T) == target);
            size_t m = live_min();
            CHECK(m == SIZE_MAX || refs[m].deadline > target); /* nothing due left behind */
            break;
        }
        }
        size_t live = 0;
        for (size_t i = 0; i < nrefs; i++) live += refs[i].live;
        CHECK(cb_timeouts_pending(T) == live);
        uint64_t nd;
        size_t m = live_min();
        if (m == SIZE_MAX) CHECK(cb_timeouts_next_deadline(T, &nd) == CB_ENOTFOUND);
        else CHECK(cb_timeouts_next_deadline(T, &nd) == 0 && nd == refs[m].deadline);
    }
    cb_timeouts_close(T);
    return 0;
}
