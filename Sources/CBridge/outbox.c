/* The outbox: messages waiting to reach the client, with idempotent enqueue,
 * FIFO per session, attempts, retry times, expiry, ack and fail. */
#include "store_internal.h"

#include <stdlib.h>
#include <string.h>

static int step_done(cb_store_t *s, sqlite3_stmt *st, const char *what) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, what);
}

static const char *text_or_null(sqlite3_stmt *st, int col) {
    return sqlite3_column_type(st, col) == SQLITE_NULL ? NULL : (const char *)sqlite3_column_text(st, col);
}

static void read_row(sqlite3_stmt *st, cb_outbox_msg_t *m) {
    m->id = sqlite3_column_int64(st, 0);
    m->session_id = (const char *)sqlite3_column_text(st, 1);
    m->kind = (const char *)sqlite3_column_text(st, 2);
    m->payload = (const char *)sqlite3_column_text(st, 3);
    m->idem_key = text_or_null(st, 4);
    m->status = sqlite3_column_int(st, 5);
    m->attempts = sqlite3_column_int(st, 6);
    m->max_attempts = sqlite3_column_int(st, 7);
    m->created_ms = sqlite3_column_int64(st, 8);
    m->next_attempt_ms = sqlite3_column_int64(st, 9);
    m->expires_ms = sqlite3_column_int64(st, 10);
    m->last_error = text_or_null(st, 11);
}

/* A row copied out of SQLite, so callbacks may call back into the store. */
typedef struct {
    cb_outbox_msg_t m;
    char *buf;
} owned_row;

static char *dup_into(char **p, const char *src) {
    if (!src) return NULL;
    size_t n = strlen(src) + 1;
    memcpy(*p, src, n);
    char *r = *p;
    *p += n;
    return r;
}

static int own_row(cb_store_t *s, sqlite3_stmt *st, owned_row *o) {
    cb_outbox_msg_t m;
    read_row(st, &m);
    const char *strs[5] = {m.session_id, m.kind, m.payload, m.idem_key, m.last_error};
    size_t total = 0;
    for (int i = 0; i < 5; i++) total += strs[i] ? strlen(strs[i]) + 1 : 0;
    o->buf = malloc(total ? total : 1);
    if (!o->buf) return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ENOMEM, "out of memory");
    char *p = o->buf;
    o->m = m;
    o->m.session_id = dup_into(&p, m.session_id);
    o->m.kind = dup_into(&p, m.kind);
    o->m.payload = dup_into(&p, m.payload);
    o->m.idem_key = dup_into(&p, m.idem_key);
    o->m.last_error = dup_into(&p, m.last_error);
    return 0;
}

int cb_outbox_enqueue(cb_store_t *s, const char *session_id, const char *kind,
                      const char *payload_json, const char *idem_key,
                      int max_attempts, int64_t now_ms, int64_t expires_ms,
                      int64_t *id_out, int *existed) {
    if (!session_id || !kind || !payload_json || max_attempts < 1)
        return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_EINVAL, "enqueue: missing field or max_attempts < 1");
    *existed = 0;
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st;
    if (!(st = cb_store_stmt(s, ST_OB_INSERT))) return CB_ESTORE;
    sqlite3_bind_text(st, 1, session_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, payload_json, -1, SQLITE_STATIC);
    if (idem_key) sqlite3_bind_text(st, 4, idem_key, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, max_attempts);
    sqlite3_bind_int64(st, 6, now_ms);
    sqlite3_bind_int64(st, 7, expires_ms > 0 ? expires_ms : 0);
    if ((rc = step_done(s, st, "enqueueing a message"))) return rc;
    if (idem_key && sqlite3_changes(s->db) == 0) {
        /* The key was used before (maybe earlier in this same turn: we are
         * inside its transaction, so that one is found too). */
        if (!(st = cb_store_stmt(s, ST_OB_BY_IDEM))) return CB_ESTORE;
        sqlite3_bind_text(st, 1, idem_key, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) *id_out = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
        if (rc != SQLITE_ROW) return cb_store_sqlite_fail(s, rc == SQLITE_DONE ? SQLITE_INTERNAL : rc,
                                                          "looking up the idempotency key");
        *existed = 1;
        return 0;
    }
    *id_out = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int cb_outbox_get(cb_store_t *s, int64_t id, cb_outbox_visit_cb cb, void *data) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_OB_GET);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        cb_outbox_msg_t m;
        read_row(st, &m);
        cb(&m, data);
        sqlite3_reset(st);
        return 0;
    }
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return cb_store_fail(s, CB_STORE_FAULT_NOTFOUND, CB_ENOTFOUND, "no outbox message with id %lld", (long long)id);
    return cb_store_sqlite_fail(s, rc, "reading a message");
}

/* The WHERE condition for a status mask. Exactly "pending" becomes
 * `status < 2`, which the partial index outbox_pending answers by itself
 * (count(*) over a million queued messages reads no table rows). */
static void status_list(char *out, size_t n, unsigned mask) {
    size_t len = 0;
    out[0] = 0;
    if ((mask & 31u) == 3u) { snprintf(out, n, "status < 2"); return; }
    len = (size_t)snprintf(out, n, "status IN (");
    int any = 0;
    for (int i = 0; i <= CB_OUTBOX_EXPIRED; i++)
        if (mask & (1u << i)) len += (size_t)snprintf(out + len, n - len, "%s%d", any++ ? "," : "", i);
    snprintf(out + len, n - len, "%s)", any ? "" : "-1");
}

int cb_outbox_list(cb_store_t *s, const char *session_id, unsigned status_mask,
                   int64_t after_id, int limit, cb_outbox_visit_cb cb, void *data) {
    if (!s->db) return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ECLOSED, "store is not open");
    char statuses[64], q[512];
    status_list(statuses, sizeof statuses, status_mask);
    /* Pending-only listings by session read the partial index. */
    int pending_only = (status_mask & ~3u) == 0;
    snprintf(q, sizeof q,
             "SELECT id, session_id, kind, payload, idem_key, status, attempts, max_attempts, created_ms, "
             "next_attempt_ms, expires_ms, last_error FROM outbox WHERE %s %s AND id > ?1 %s "
             "ORDER BY id LIMIT ?3",
             pending_only ? "status < 2 AND" : "", statuses, session_id ? "AND session_id = ?2" : "");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, q, -1, &st, NULL);
    if (rc != SQLITE_OK) return cb_store_sqlite_fail(s, rc, "listing the outbox");
    sqlite3_bind_int64(st, 1, after_id);
    if (session_id) sqlite3_bind_text(st, 2, session_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, limit > 0 ? limit : -1);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        cb_outbox_msg_t m;
        read_row(st, &m);
        if (cb(&m, data)) { rc = SQLITE_DONE; break; }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, "listing the outbox");
}

int64_t cb_outbox_count(cb_store_t *s, unsigned status_mask) {
    if (!s->db) return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ECLOSED, "store is not open");
    char statuses[64], q[256];
    status_list(statuses, sizeof statuses, status_mask);
    snprintf(q, sizeof q, "SELECT count(*) FROM outbox WHERE %s %s",
             (status_mask & ~3u) == 0 ? "status < 2 AND" : "", statuses);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, q, -1, &st, NULL);
    int64_t n = 0;
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) { n = sqlite3_column_int64(st, 0); rc = SQLITE_OK; }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? n : cb_store_sqlite_fail(s, rc, "counting the outbox");
}

static const char *status_name(int st) {
    static const char *const names[] = {"queued", "inflight", "delivered", "failed", "expired"};
    return st >= 0 && st <= 4 ? names[st] : "unknown";
}

/* After an UPDATE ... WHERE status < 2 changed nothing: unknown id or finished. */
static int explain_no_change(cb_store_t *s, int64_t id, const char *verb) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_OB_STATUS);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int status = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_reset(st);
    if (rc == SQLITE_ROW)
        return cb_store_fail(s, CB_STORE_FAULT_STATE, CB_EINVAL, "cannot %s message %lld: it is already %s",
                             verb, (long long)id, status_name(status));
    if (rc == SQLITE_DONE)
        return cb_store_fail(s, CB_STORE_FAULT_NOTFOUND, CB_ENOTFOUND, "no outbox message with id %lld", (long long)id);
    return cb_store_sqlite_fail(s, rc, "reading a message status");
}

int cb_outbox_ack(cb_store_t *s, int64_t id, int64_t now_ms) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_OB_ACK);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, now_ms);
    if ((rc = step_done(s, st, "acknowledging a message"))) return rc;
    return sqlite3_changes(s->db) ? 0 : explain_no_change(s, id, "acknowledge");
}

int cb_outbox_fail(cb_store_t *s, int64_t id, const char *error, int64_t retry_at_ms, int64_t now_ms) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_OB_FAIL);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, retry_at_ms < 0 ? CB_OUTBOX_FAILED : CB_OUTBOX_QUEUED);
    sqlite3_bind_int64(st, 3, retry_at_ms < 0 ? 0 : retry_at_ms);
    if (error) sqlite3_bind_text(st, 4, error, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, now_ms);
    if ((rc = step_done(s, st, "recording a failed delivery"))) return rc;
    return sqlite3_changes(s->db) ? 0 : explain_no_change(s, id, "fail");
}

/* The next session (in key order) after `after` that has unfinished messages;
 * *out is malloc'd, NULL when there is none. */
static int next_session(cb_store_t *s, const char *after, char **out) {
    *out = NULL;
    sqlite3_stmt *st = cb_store_stmt(s, ST_OB_NEXT_SESSION);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, after ? after : "", -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_reset(st);
        return *out ? 0 : cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ENOMEM, "out of memory");
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, "scanning sessions");
}

/* The oldest unfinished message of a session. 1: found, 0: none, <0 error. */
static int session_head(cb_store_t *s, const char *session, owned_row *o) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_OB_HEAD);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        rc = own_row(s, st, o);
        sqlite3_reset(st);
        return rc ? rc : 1;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, "reading a session's queue");
}

static int set_row(cb_store_t *s, int which, int64_t id, int64_t v, const char *what) {
    sqlite3_stmt *st = cb_store_stmt(s, which);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, v);
    return step_done(s, st, what);
}

/* Who takes a session's head: the pump (client delivery) leaves the agent's
 * messages alone and only reports an overdue ack; the agent's hooks take
 * only their own kind and hand an unacknowledged one out again. */
typedef enum { TAKE_FOR_CLIENTS, TAKE_FOR_AGENT } take_mode;

static int agent_kind(const cb_outbox_msg_t *m) { return strcmp(m->kind, CB_OUTBOX_AGENT_KIND) == 0; }

/* One session's head, then the next one if the head just expired; visited
 * rows are counted in *taken. Returns 0 or a negative error. */
static int take_head(cb_store_t *s, const char *session, take_mode mode, int64_t now_ms, int64_t ack_deadline_ms,
                     cb_outbox_visit_cb cb, void *data, int *taken) {
    for (;;) {
        owned_row o;
        int found = session_head(s, session, &o);
        if (found <= 0) return found;
        int rc = 0, visit = 0, again = 0;
        if (agent_kind(&o.m) != (mode == TAKE_FOR_AGENT)) {
            /* another consumer's message: FIFO, so what follows it waits */
        } else if (o.m.expires_ms > 0 && o.m.expires_ms <= now_ms) {
            if (!(rc = cb_store_begin(s)) && !(rc = set_row(s, ST_OB_SET_EXPIRED, o.m.id, now_ms, "expiring a message"))) {
                o.m.status = CB_OUTBOX_EXPIRED;
                visit = again = 1;
            }
        } else if (o.m.next_attempt_ms <= now_ms) {
            if (o.m.status == CB_OUTBOX_INFLIGHT && mode == TAKE_FOR_CLIENTS) {
                visit = 1; /* ack overdue: the caller decides */
            } else if (!(rc = cb_store_begin(s)) &&
                       !(rc = set_row(s, ST_OB_SET_INFLIGHT, o.m.id, ack_deadline_ms, "starting a delivery"))) {
                o.m.status = CB_OUTBOX_INFLIGHT;
                o.m.attempts++;
                o.m.next_attempt_ms = ack_deadline_ms;
                visit = 1;
            }
        }
        if (visit) { (*taken)++; cb(&o.m, data); }
        free(o.buf);
        if (rc || !again) return rc;
    }
}

int cb_outbox_take_due(cb_store_t *s, int64_t now_ms, int64_t ack_deadline_ms,
                       int limit, cb_outbox_visit_cb cb, void *data) {
    int taken = 0, rc = 0;
    char *session = NULL;
    for (;;) {
        char *next = NULL;
        if ((rc = next_session(s, session, &next))) break;
        free(session);
        session = next;
        if (!session || (limit > 0 && taken >= limit)) break;
        if ((rc = take_head(s, session, TAKE_FOR_CLIENTS, now_ms, ack_deadline_ms, cb, data, &taken))) break;
    }
    free(session);
    return rc < 0 ? rc : taken;
}

int cb_outbox_take_session(cb_store_t *s, const char *session_id, int64_t now_ms, int64_t ack_deadline_ms,
                           cb_outbox_visit_cb cb, void *data) {
    int taken = 0;
    int rc = take_head(s, session_id, TAKE_FOR_AGENT, now_ms, ack_deadline_ms, cb, data, &taken);
    return rc < 0 ? rc : taken;
}

int64_t cb_outbox_next_due(cb_store_t *s) {
    int64_t best = -1;
    char *session = NULL;
    int rc;
    for (;;) {
        char *next = NULL;
        if ((rc = next_session(s, session, &next))) break;
        free(session);
        if (!(session = next)) break;
        owned_row o;
        int found = session_head(s, session, &o);
        if (found < 0) { rc = found; break; }
        if (!found) continue;
        if (agent_kind(&o.m)) { free(o.buf); continue; } /* taken by the agent's hooks, not on a timer */
        int64_t t = o.m.next_attempt_ms;
        if (o.m.expires_ms > 0 && o.m.expires_ms < t) t = o.m.expires_ms;
        if (best < 0 || t < best) best = t;
        free(o.buf);
    }
    free(session);
    return rc < 0 ? rc : best;
}

int64_t cb_outbox_requeue_inflight(cb_store_t *s, int64_t now_ms) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_OB_REQUEUE);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, now_ms);
    if ((rc = step_done(s, st, "requeueing in-flight messages"))) return rc;
    return sqlite3_changes(s->db);
}

int64_t cb_outbox_prune(cb_store_t *s, int64_t before_ms, int limit) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_OB_PRUNE);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, before_ms);
    sqlite3_bind_int(st, 2, limit > 0 ? limit : -1);
    if ((rc = step_done(s, st, "pruning finished messages"))) return rc;
    return sqlite3_changes(s->db);
}
