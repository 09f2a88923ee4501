#ifndef CB_STORE_H
#define CB_STORE_H
/* The durable store: one SQLite database (WAL, synchronous=FULL) in a state
 * directory, holding the outbox (messages waiting for delivery), drafts, a
 * namespaced key-value area, paired devices and the audit log. Mechanism only: the caller passes the time
 * (milliseconds since the Unix epoch) and decides retry delays.
 *
 * Group commit: every write goes into one open transaction; cb_store_commit()
 * (or the loop hook from cb_store_attach) commits it with one fsync. Nothing a
 * write returned may be shown to a client before that commit succeeded.
 *
 * Errors: functions return 0 or a negative CB_E* code; cb_store_fault() says
 * what kind of failure it was and cb_store_errmsg() explains it in words. */
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define CB_STORE_SCHEMA_VERSION 3
/* PRAGMA application_id of our databases ("CBst"): tells ours from foreign ones. */
#define CB_STORE_APPLICATION_ID 0x43427374

typedef struct cb_store_s cb_store_t;

/* Why the last call failed. Stable numbers: the Swift wrapper maps them. */
typedef enum {
    CB_STORE_OK = 0,
    CB_STORE_FAULT_LOCKED = 1,   /* another process serves this state directory */
    CB_STORE_FAULT_NEWER = 2,    /* database schema newer than this build */
    CB_STORE_FAULT_NOTADB = 3,   /* file is not a SQLite database (corrupt or foreign) */
    CB_STORE_FAULT_FOREIGN = 4,  /* a SQLite database, but not a CodingBridge store */
    CB_STORE_FAULT_READONLY = 5, /* directory or file cannot be written */
    CB_STORE_FAULT_FULL = 6,     /* disk (or configured size limit) full */
    CB_STORE_FAULT_IO = 7,       /* other I/O error */
    CB_STORE_FAULT_CORRUPT = 8,  /* database damaged */
    CB_STORE_FAULT_DIRECTORY = 9,/* state directory missing/unusable */
    CB_STORE_FAULT_NOTFOUND = 10,/* no such id / key */
    CB_STORE_FAULT_STATE = 11,   /* record exists but not in a state that allows this */
    CB_STORE_FAULT_ABORTED = 12, /* the turn's transaction was rolled back */
    CB_STORE_FAULT_INTERNAL = 13
} cb_store_fault_t;

typedef enum {
    CB_OUTBOX_QUEUED = 0,    /* waiting for (re)delivery */
    CB_OUTBOX_INFLIGHT = 1,  /* handed to the client, waiting for ack/fail */
    CB_OUTBOX_DELIVERED = 2, /* acknowledged */
    CB_OUTBOX_FAILED = 3,    /* gave up: max attempts reached */
    CB_OUTBOX_EXPIRED = 4    /* not delivered before its expiry */
} cb_outbox_status_t;

typedef struct {
    int64_t id;
    const char *session_id;
    const char *kind;
    const char *payload;     /* JSON text */
    const char *idem_key;    /* NULL when none */
    int status;              /* cb_outbox_status_t */
    int attempts;
    int max_attempts;
    int64_t created_ms;
    int64_t next_attempt_ms;
    int64_t expires_ms;      /* 0: never */
    const char *last_error;  /* NULL when none */
} cb_outbox_msg_t;

/* Called for each row; strings are valid only during the call. Return nonzero to stop. */
typedef int (*cb_outbox_visit_cb)(const cb_outbox_msg_t *msg, void *data);

/* Opens (creating when needed) the store. `dir` NULL: in memory (ephemeral).
 * Always sets *out (unless out of memory) so the caller can read the fault and
 * message, and must cb_store_close() it even when this fails. Creates `dir`
 * (and missing parents) with mode 0700 and the database with 0600; takes an
 * exclusive lock file (`dir`/codingbridge.lock holding our pid). */
int cb_store_open(const char *dir, cb_store_t **out);
/* Commits pending writes (if any), detaches from the loop, closes. NULL ok. */
void cb_store_close(cb_store_t *s);

cb_store_fault_t cb_store_fault(const cb_store_t *s);
const char *cb_store_errmsg(const cb_store_t *s);
/* The path of the database file ("" when ephemeral). */
const char *cb_store_path(const cb_store_t *s);
int cb_store_schema_version(const cb_store_t *s);

/* Group commit. cb_store_commit commits the open transaction (if any);
 * 0 also when there was nothing to commit. On failure everything written
 * since the last commit is rolled back and the fault says why. */
int cb_store_commit(cb_store_t *s);
/* Nonzero while writes are waiting for cb_store_commit. */
int cb_store_dirty(const cb_store_t *s);
/* Number of commits that wrote something (each is one fsync of the WAL). */
uint64_t cb_store_commit_count(const cb_store_t *s);

/* Loop integration: a uv_check and a uv_prepare handle commit at the end of
 * every loop turn and then call `on_commit(rc, data)` (rc 0 or the commit's
 * error) so the caller can send the replies it held back. A uv_timer calls
 * `on_wakeup(data)` at the time set with cb_store_set_wakeup. */
typedef void (*cb_store_commit_cb)(int rc, void *data);
typedef void (*cb_store_wakeup_cb)(void *data);
int cb_store_attach(cb_store_t *s, uv_loop_t *loop, cb_store_commit_cb on_commit,
                    cb_store_wakeup_cb on_wakeup, void *data);
/* Arms the wakeup timer to fire in `delay_ms` (replacing any earlier one);
 * negative disarms. */
void cb_store_set_wakeup(cb_store_t *s, int64_t delay_ms);
/* Asks for an on_commit callback at the end of this turn even with nothing to
 * commit (a reply waiting for the turn's end uses this). */
void cb_store_request_turn_end(cb_store_t *s);
/* 1 when the end of this turn will commit or call on_commit: writes are
 * waiting, a turn end was requested, or a failed write must be reported. */
int cb_store_turn_pending(const cb_store_t *s);
/* Ends the turn (the loop hook, or by hand without a loop): commits and
 * clears the request for a turn end; 0 or the commit's error. */
int cb_store_end_turn(cb_store_t *s);
/* Rolls back everything this turn wrote and makes its commit fail with
 * `why` (a write the turn's replies depend on failed). */
void cb_store_abort_turn(cb_store_t *s, const char *why);
/* Called (with the attach data) at the end of a pending turn, right before
 * its commit, so writes coalesced over the turn join that commit. */
typedef void (*cb_store_before_commit_cb)(void *data);
void cb_store_set_before_commit(cb_store_t *s, cb_store_before_commit_cb before);

/* Fault injection for tests: lets the database grow by at most `pages` more
 * pages (PRAGMA max_page_count), after which writes fail as on a full disk. */
int cb_store_limit_growth(cb_store_t *s, int64_t pages);

/* ---- outbox ---- */
/* Enqueues; with a non-NULL idem_key that was already used, returns the first
 * message's id and sets *existed = 1 (nothing written). expires_ms 0: never. */
int cb_outbox_enqueue(cb_store_t *s, const char *session_id, const char *kind,
                      const char *payload_json, const char *idem_key,
                      int max_attempts, int64_t now_ms, int64_t expires_ms,
                      int64_t *id_out, int *existed);
int cb_outbox_get(cb_store_t *s, int64_t id, cb_outbox_visit_cb cb, void *data);
/* Visits messages in id order. session_id NULL: all sessions. status_mask: bit
 * (1 << status) per status wanted. after_id: start after this id. limit <= 0:
 * no limit. */
int cb_outbox_list(cb_store_t *s, const char *session_id, unsigned status_mask,
                   int64_t after_id, int limit, cb_outbox_visit_cb cb, void *data);
int64_t cb_outbox_count(cb_store_t *s, unsigned status_mask);
/* Marks the message acknowledged. CB_ENOTFOUND for an unknown id; fault STATE
 * when it is already delivered/failed/expired. */
int cb_outbox_ack(cb_store_t *s, int64_t id, int64_t now_ms);
/* Records a failed attempt: back to QUEUED due at retry_at_ms, or FAILED when
 * retry_at_ms < 0 (no retries left; now_ms is when it finished). */
int cb_outbox_fail(cb_store_t *s, int64_t id, const char *error, int64_t retry_at_ms, int64_t now_ms);
/* Hands out messages due now, at most one per session (the oldest unfinished
 * one: FIFO per session): each becomes INFLIGHT with attempts+1 and
 * next_attempt_ms = ack_deadline_ms, then is visited. Messages past expiry
 * become EXPIRED (visited with that status, so the caller can tell someone).
 * In-flight messages whose ack deadline passed are visited with status
 * INFLIGHT and unchanged: the caller decides (usually cb_outbox_fail). */
int cb_outbox_take_due(cb_store_t *s, int64_t now_ms, int64_t ack_deadline_ms,
                       int limit, cb_outbox_visit_cb cb, void *data);

/* Messages of this kind go into an agent's session through its hooks
 * (cb_outbox_take_session), not to clients: cb_outbox_take_due,
 * cb_outbox_next_due and cb_outbox_requeue_inflight leave them alone, and a
 * session's other messages wait behind them (FIFO). */
#define CB_OUTBOX_AGENT_KIND "agent.message"

/* The head of one session's queue when it is an agent message: an expired
 * head is marked expired and visited, and the next one looked at; a queued
 * head that is due, or an inflight one whose ack is overdue, becomes
 * inflight with attempt+1 and is visited. An inflight head still within its
 * ack deadline is left alone. Returns the number visited, or a negative error. */
int cb_outbox_take_session(cb_store_t *s, const char *session_id, int64_t now_ms, int64_t ack_deadline_ms,
                           cb_outbox_visit_cb cb, void *data);
/* Earliest next_attempt_ms among session heads (QUEUED or INFLIGHT), or -1 when
 * nothing is waiting. Expiry times count too. */
int64_t cb_outbox_next_due(cb_store_t *s);
/* Every INFLIGHT message back to QUEUED, due at now_ms (connection lost,
 * process restarted). Returns how many, or a negative error. */
int64_t cb_outbox_requeue_inflight(cb_store_t *s, int64_t now_ms);
/* Deletes up to `limit` (<= 0: all) messages that finished (delivered,
 * failed, expired) before before_ms; their ids are never reused and their
 * idempotency keys become free. Returns how many, or a negative error. */
int64_t cb_outbox_prune(cb_store_t *s, int64_t before_ms, int limit);

/* ---- drafts (one per session) ---- */
int cb_draft_save(cb_store_t *s, const char *session_id, const char *text, size_t len, int64_t now_ms);
/* *text_out is malloc'd (caller frees) and NUL-terminated; CB_ENOTFOUND if none. */
int cb_draft_get(cb_store_t *s, const char *session_id, char **text_out, size_t *len_out, int64_t *saved_ms);
/* 0 and *removed = 0/1. */
int cb_draft_clear(cb_store_t *s, const char *session_id, int *removed);
/* How many sessions have a draft, or a negative error. */
int64_t cb_draft_count(cb_store_t *s);

/* ---- key-value area: (namespace, key) -> value (JSON text or bytes) ---- */
int cb_kv_put(cb_store_t *s, const char *ns, const char *key, const void *value, size_t len,
              int is_json, int64_t now_ms);
/* *value_out malloc'd (caller frees, NUL-terminated for convenience). */
int cb_kv_get(cb_store_t *s, const char *ns, const char *key, void **value_out, size_t *len_out,
              int *is_json);
int cb_kv_delete(cb_store_t *s, const char *ns, const char *key, int *removed);
typedef int (*cb_kv_visit_cb)(const char *key, const void *value, size_t len, int is_json, void *data);
int cb_kv_list(cb_store_t *s, const char *ns, cb_kv_visit_cb cb, void *data);

/* ---- paired devices: the token's SHA-256 hex only ---- */
typedef struct {
    const char *id;
    const char *name;
    const char *token_hash;
    int64_t created_ms;
    int64_t last_seen_ms; /* 0: never authenticated */
    int64_t revoked_ms;   /* 0: not revoked */
} cb_device_t;
typedef int (*cb_device_visit_cb)(const cb_device_t *d, void *data);
/* Inserts the device or replaces the row with its id. */
int cb_device_put(cb_store_t *s, const cb_device_t *d);
/* Visits every device in creation order. */
int cb_device_list(cb_store_t *s, cb_device_visit_cb cb, void *data);

/* ---- audit log: append-only, ids increasing ---- */
typedef struct {
    int64_t id;
    int64_t time_ms;
    const char *kind;
    const char *device_id; /* NULL when none */
    const char *conn_kind; /* NULL when no connection caused it (a timer) */
    const char *address;   /* NULL for local connections */
    const char *detail;    /* JSON object text */
} cb_audit_entry_t;
typedef int (*cb_audit_visit_cb)(const cb_audit_entry_t *e, void *data);
/* Appends; *id_out gets the new entry's id (e->id is ignored). */
int cb_audit_append(cb_store_t *s, const cb_audit_entry_t *e, int64_t *id_out);
/* Visits up to `limit` entries with id > after_id in id order. */
int cb_audit_list(cb_store_t *s, int64_t after_id, int limit, cb_audit_visit_cb cb, void *data);

#endif
