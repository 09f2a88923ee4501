/* The store's SQL, prepared once per connection (SQLITE_PREPARE_PERSISTENT)
 * so the hot paths (enqueue, ack) never re-parse SQL. */
#include "store_internal.h"

#define OB_COLS "id, session_id, kind, payload, idem_key, status, attempts, max_attempts, " \
                "created_ms, next_attempt_ms, expires_ms, last_error"

static const char *const sql[ST_COUNT] = {
    [ST_OB_INSERT] = "INSERT INTO outbox(session_id, kind, payload, idem_key, max_attempts, created_ms, "
                     "next_attempt_ms, expires_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7) "
                     /* A repeated idempotency key inserts nothing (changes() == 0): one
                      * index probe in the common case instead of a lookup first. */
                     "ON CONFLICT(idem_key) WHERE idem_key IS NOT NULL DO NOTHING",
    [ST_OB_BY_IDEM] = "SELECT id FROM outbox WHERE idem_key = ?1",
    [ST_OB_GET] = "SELECT " OB_COLS " FROM outbox WHERE id = ?1",
    [ST_OB_STATUS] = "SELECT status FROM outbox WHERE id = ?1",
    [ST_OB_ACK] = "UPDATE outbox SET status = 2, next_attempt_ms = ?2, finished_ms = ?2 WHERE id = ?1 AND status < 2",
    [ST_OB_FAIL] = "UPDATE outbox SET status = ?2, next_attempt_ms = ?3, last_error = ?4, finished_ms = ?5 "
                   "WHERE id = ?1 AND status < 2",
    /* `status < 2` verbatim so the planner uses the partial index outbox_pending. */
    [ST_OB_NEXT_SESSION] = "SELECT session_id FROM outbox WHERE status < 2 AND session_id > ?1 "
                           "ORDER BY session_id LIMIT 1",
    [ST_OB_HEAD] = "SELECT " OB_COLS " FROM outbox WHERE status < 2 AND session_id = ?1 ORDER BY id LIMIT 1",
    [ST_OB_SET_INFLIGHT] = "UPDATE outbox SET status = 1, attempts = attempts + 1, next_attempt_ms = ?2 "
                           "WHERE id = ?1",
    [ST_OB_SET_EXPIRED] = "UPDATE outbox SET status = 4, last_error = 'expired before delivery', finished_ms = ?2 "
                          "WHERE id = ?1",
    /* An agent's message in flight stays so: its hooks may still show it was read. */
    [ST_OB_REQUEUE] = "UPDATE outbox SET status = 0, next_attempt_ms = ?1 WHERE status = 1 AND kind <> '"
                      CB_OUTBOX_AGENT_KIND "'",
    /* `status >= 2` verbatim so the planner uses the partial index outbox_finished. */
    [ST_OB_PRUNE] = "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE status >= 2 "
                    "AND finished_ms < ?1 LIMIT ?2)",
    [ST_DR_SAVE] = "INSERT INTO drafts(session_id, text, updated_ms) VALUES(?1, ?2, ?3) "
                   "ON CONFLICT(session_id) DO UPDATE SET text = excluded.text, updated_ms = excluded.updated_ms",
    [ST_DR_GET] = "SELECT text, updated_ms FROM drafts WHERE session_id = ?1",
    [ST_DR_CLEAR] = "DELETE FROM drafts WHERE session_id = ?1",
    [ST_DR_COUNT] = "SELECT count(*) FROM drafts",
    [ST_KV_PUT] = "INSERT INTO kv(ns, key, value, is_json, updated_ms) VALUES(?1, ?2, ?3, ?4, ?5) "
                  "ON CONFLICT(ns, key) DO UPDATE SET value = excluded.value, is_json = excluded.is_json, "
                  "updated_ms = excluded.updated_ms",
    [ST_KV_GET] = "SELECT value, is_json FROM kv WHERE ns = ?1 AND key = ?2",
    [ST_KV_DELETE] = "DELETE FROM kv WHERE ns = ?1 AND key = ?2",
    [ST_KV_LIST] = "SELECT key, value, is_json FROM kv WHERE ns = ?1 ORDER BY key",
    [ST_DEV_PUT] = "INSERT OR REPLACE INTO devices(id, name, token_hash, created_ms, last_seen_ms, revoked_ms) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_DEV_LIST] = "SELECT id, name, token_hash, created_ms, last_seen_ms, revoked_ms FROM devices "
                    "ORDER BY created_ms, id",
    [ST_AUDIT_APPEND] = "INSERT INTO audit(time_ms, kind, device_id, conn_kind, address, detail) "
                        "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_AUDIT_LIST] = "SELECT id, time_ms, kind, device_id, conn_kind, address, detail FROM audit "
                      "WHERE id > ?1 ORDER BY id LIMIT ?2",
};

sqlite3_stmt *cb_store_stmt(cb_store_t *s, int which) {
    if (!s->db) { cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ECLOSED, "store is not open"); return NULL; }
    sqlite3_stmt *st = s->st[which];
    if (!st) {
        int rc = sqlite3_prepare_v3(s->db, sql[which], -1, SQLITE_PREPARE_PERSISTENT, &s->st[which], NULL);
        if (rc != SQLITE_OK) { cb_store_sqlite_fail(s, rc, "preparing a statement"); return NULL; }
        return s->st[which];
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

void cb_store_finalize_statements(cb_store_t *s) {
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(s->st[i]);
        s->st[i] = NULL;
    }
}
