/* Drafts (one text per session) and the namespaced key-value area the engine
 * uses to snapshot sessions, approvals and settings. */
#include "store_internal.h"

#include <stdlib.h>
#include <string.h>

static int step_done(cb_store_t *s, sqlite3_stmt *st, const char *what) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, what);
}

/* Copies a column into a malloc'd, NUL-terminated buffer. */
static int copy_column(cb_store_t *s, sqlite3_stmt *st, int col, void **out, size_t *len) {
    const void *p = sqlite3_column_blob(st, col);
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    char *buf = malloc(n + 1);
    if (!buf) return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ENOMEM, "out of memory");
    if (n) memcpy(buf, p, n);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}

int cb_draft_save(cb_store_t *s, const char *session_id, const char *text, size_t len, int64_t now_ms) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_DR_SAVE);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, session_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, text ? text : "", (int)len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now_ms);
    return step_done(s, st, "saving a draft");
}

int cb_draft_get(cb_store_t *s, const char *session_id, char **text_out, size_t *len_out, int64_t *saved_ms) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_DR_GET);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, session_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        /* sqlite3_column_blob on a TEXT value returns its bytes, NULs included. */
        rc = copy_column(s, st, 0, (void **)text_out, len_out);
        if (saved_ms) *saved_ms = sqlite3_column_int64(st, 1);
        sqlite3_reset(st);
        return rc;
    }
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return cb_store_fail(s, CB_STORE_FAULT_NOTFOUND, CB_ENOTFOUND, "no draft for session '%s'", session_id);
    return cb_store_sqlite_fail(s, rc, "reading a draft");
}

int cb_draft_clear(cb_store_t *s, const char *session_id, int *removed) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_DR_CLEAR);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, session_id, -1, SQLITE_STATIC);
    if ((rc = step_done(s, st, "clearing a draft"))) return rc;
    *removed = sqlite3_changes(s->db) > 0;
    return 0;
}

int64_t cb_draft_count(cb_store_t *s) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_DR_COUNT);
    if (!st) return CB_ESTORE;
    int rc = sqlite3_step(st);
    int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return rc == SQLITE_ROW ? n : cb_store_sqlite_fail(s, rc, "counting drafts");
}

int cb_kv_put(cb_store_t *s, const char *ns, const char *key, const void *value, size_t len,
              int is_json, int64_t now_ms) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_KV_PUT);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 3, len ? value : "", (int)len, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, is_json ? 1 : 0);
    sqlite3_bind_int64(st, 5, now_ms);
    return step_done(s, st, "writing a key");
}

int cb_kv_get(cb_store_t *s, const char *ns, const char *key, void **value_out, size_t *len_out, int *is_json) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_KV_GET);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        rc = copy_column(s, st, 0, value_out, len_out);
        if (is_json) *is_json = sqlite3_column_int(st, 1);
        sqlite3_reset(st);
        return rc;
    }
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return cb_store_fail(s, CB_STORE_FAULT_NOTFOUND, CB_ENOTFOUND, "no key '%s' in namespace '%s'", key, ns);
    return cb_store_sqlite_fail(s, rc, "reading a key");
}

int cb_kv_delete(cb_store_t *s, const char *ns, const char *key, int *removed) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_KV_DELETE);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    if ((rc = step_done(s, st, "deleting a key"))) return rc;
    *removed = sqlite3_changes(s->db) > 0;
    return 0;
}

int cb_kv_list(cb_store_t *s, const char *ns, cb_kv_visit_cb cb, void *data) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_KV_LIST);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, ns, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cb((const char *)sqlite3_column_text(st, 0), sqlite3_column_blob(st, 1),
               (size_t)sqlite3_column_bytes(st, 1), sqlite3_column_int(st, 2), data)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, "listing keys");
}
