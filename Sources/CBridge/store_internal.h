/* Private to the store's C files: the handle layout and shared helpers. */
#ifndef CB_STORE_INTERNAL_H
#define CB_STORE_INTERNAL_H
#include "cb_error.h"
#include "cb_store.h"
#include <sqlite3.h>

/* Prepared statements, compiled on first use and kept for the store's life. */
enum {
    ST_OB_INSERT, ST_OB_BY_IDEM, ST_OB_GET, ST_OB_STATUS, ST_OB_ACK, ST_OB_FAIL,
    ST_OB_NEXT_SESSION, ST_OB_HEAD, ST_OB_SET_INFLIGHT, ST_OB_SET_EXPIRED, ST_OB_REQUEUE, ST_OB_PRUNE,
    ST_DR_SAVE, ST_DR_GET, ST_DR_CLEAR, ST_DR_COUNT,
    ST_KV_PUT, ST_KV_GET, ST_KV_DELETE, ST_KV_LIST,
    ST_DEV_PUT, ST_DEV_LIST, ST_AUDIT_APPEND, ST_AUDIT_LIST,
    ST_COUNT
};

struct cb_store_hooks {
    uv_check_t check;
    uv_prepare_t prepare;
    uv_timer_t timer;
    int closed;
};

struct cb_store_s {
    sqlite3 *db;
    char *path;
    int lock_fd;
    int schema_version;
    int in_txn;         /* BEGIN issued, COMMIT pending (the turn's group) */
    int aborted;        /* SQLite rolled the turn back under us */
    int turn_requested;
    cb_store_fault_t abort_fault;
    uint64_t commits;
    cb_store_fault_t fault;
    char errmsg[768];
    char abort_msg[768];
    sqlite3_stmt *st[ST_COUNT];
    struct cb_store_hooks *hooks;
    cb_store_commit_cb on_commit;
    cb_store_wakeup_cb on_wakeup;
    cb_store_before_commit_cb before_commit;
    void *hook_data;
};

int cb_store_fail(cb_store_t *s, cb_store_fault_t fault, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int cb_store_sqlite_fail(cb_store_t *s, int rc, const char *what);
/* Opens the turn's transaction if needed (all writes call this first). */
int cb_store_begin(cb_store_t *s);
/* The cached statement `which`, reset and with bindings cleared; NULL on error. */
sqlite3_stmt *cb_store_stmt(cb_store_t *s, int which);
void cb_store_finalize_statements(cb_store_t *s);
#endif
