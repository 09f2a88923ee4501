/* Paired devices and the audit log. A device row holds its token's SHA-256
 * only: reading the database never yields a usable token. */
#include "store_internal.h"

static void bind_opt_text(sqlite3_stmt *st, int i, const char *v) {
    if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, i);
}

static const char *col_text(sqlite3_stmt *st, int i) { return (const char *)sqlite3_column_text(st, i); }

int cb_device_put(cb_store_t *s, const cb_device_t *d) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_DEV_PUT);
    if (!st) return CB_ESTORE;
    sqlite3_bind_text(st, 1, d->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, d->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, d->token_hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, d->created_ms);
    sqlite3_bind_int64(st, 5, d->last_seen_ms);
    sqlite3_bind_int64(st, 6, d->revoked_ms);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, "writing a device");
}

int cb_device_list(cb_store_t *s, cb_device_visit_cb cb, void *data) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_DEV_LIST);
    if (!st) return CB_ESTORE;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        cb_device_t d = {col_text(st, 0), col_text(st, 1), col_text(st, 2), sqlite3_column_int64(st, 3),
                         sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5)};
        if (cb(&d, data)) { rc = SQLITE_DONE; break; }
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, "listing devices");
}

int cb_audit_append(cb_store_t *s, const cb_audit_entry_t *e, int64_t *id_out) {
    int rc = cb_store_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = cb_store_stmt(s, ST_AUDIT_APPEND);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, e->time_ms);
    sqlite3_bind_text(st, 2, e->kind, -1, SQLITE_STATIC);
    bind_opt_text(st, 3, e->device_id);
    bind_opt_text(st, 4, e->conn_kind);
    bind_opt_text(st, 5, e->address);
    sqlite3_bind_text(st, 6, e->detail ? e->detail : "{}", -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return cb_store_sqlite_fail(s, rc, "appending to the audit log");
    *id_out = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int cb_audit_list(cb_store_t *s, int64_t after_id, int limit, cb_audit_visit_cb cb, void *data) {
    sqlite3_stmt *st = cb_store_stmt(s, ST_AUDIT_LIST);
    if (!st) return CB_ESTORE;
    sqlite3_bind_int64(st, 1, after_id);
    sqlite3_bind_int(st, 2, limit > 0 ? limit : -1);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        cb_audit_entry_t e = {sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), col_text(st, 2),
                              col_text(st, 3), col_text(st, 4), col_text(st, 5), col_text(st, 6)};
        if (cb(&e, data)) { rc = SQLITE_DONE; break; }
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : cb_store_sqlite_fail(s, rc, "listing the audit log");
}
