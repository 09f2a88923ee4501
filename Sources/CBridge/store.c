/* The durable store: opening, locking, schema, faults and group commit.
 * The outbox, drafts and key-value tables live in outbox.c and store_kv.c,
 * devices and the audit log in store_devices.c. */
#include "store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Schema migrations: entry i takes the database from version i to i+1.
 * Never edit a shipped entry; append a new one and bump CB_STORE_SCHEMA_VERSION. */
static const char *const migrations[CB_STORE_SCHEMA_VERSION] = {
    /* 0 -> 1 */
    "CREATE TABLE outbox("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT," /* never reused: ids handed to clients stay unique */
    "  session_id TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  payload TEXT NOT NULL,"
    "  idem_key TEXT,"
    "  status INTEGER NOT NULL DEFAULT 0,"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  max_attempts INTEGER NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  next_attempt_ms INTEGER NOT NULL,"
    "  expires_ms INTEGER NOT NULL DEFAULT 0,"
    "  last_error TEXT);"
    /* Only unfinished messages are indexed by session: delivery and FIFO per
     * session never scan the delivered history. */
    "CREATE INDEX outbox_pending ON outbox(session_id, id) WHERE status < 2;"
    "CREATE UNIQUE INDEX outbox_idem ON outbox(idem_key) WHERE idem_key IS NOT NULL;"
    /* Requeueing in-flight deliveries at start-up must not scan a million rows. */
    "CREATE INDEX outbox_inflight ON outbox(id) WHERE status = 1;"
    "CREATE TABLE drafts(session_id TEXT PRIMARY KEY, text TEXT NOT NULL,"
    "  updated_ms INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE kv(ns TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
    "  is_json INTEGER NOT NULL, updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY(ns, key)) WITHOUT ROWID;",
    /* 1 -> 2: when a message finished (delivered, failed, expired), indexed
     * for finished ones only, so pruning the delivery history by age never
     * scans the table and never touches unfinished messages. Rows finished
     * before: their ack time (kept in next_attempt_ms), else their creation. */
    "ALTER TABLE outbox ADD COLUMN finished_ms INTEGER NOT NULL DEFAULT 0;"
    "UPDATE outbox SET finished_ms = CASE status WHEN 2 THEN next_attempt_ms ELSE created_ms END WHERE status >= 2;"
    "CREATE INDEX outbox_finished ON outbox(finished_ms) WHERE status >= 2;",
    /* 2 -> 3: paired devices (a token's SHA-256 only, never the token) and
     * the audit log of decisions, pairings and revocations. */
    "CREATE TABLE devices(id TEXT PRIMARY KEY, name TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,"
    "  created_ms INTEGER NOT NULL, last_seen_ms INTEGER NOT NULL DEFAULT 0,"
    "  revoked_ms INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
    "CREATE TABLE audit(id INTEGER PRIMARY KEY AUTOINCREMENT," /* never reused: paging by afterId */
    "  time_ms INTEGER NOT NULL, kind TEXT NOT NULL, device_id TEXT, conn_kind TEXT,"
    "  address TEXT, detail TEXT NOT NULL);",
};

int cb_store_fail(cb_store_t *s, cb_store_fault_t fault, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
    va_end(ap);
    s->fault = fault;
    return code;
}

static cb_store_fault_t fault_of_sqlite(int rc) {
    switch (rc & 0xff) {
    case SQLITE_FULL: return CB_STORE_FAULT_FULL;
    case SQLITE_READONLY: return CB_STORE_FAULT_READONLY;
    case SQLITE_NOTADB: return CB_STORE_FAULT_NOTADB;
    case SQLITE_CORRUPT: return CB_STORE_FAULT_CORRUPT;
    case SQLITE_IOERR: case SQLITE_CANTOPEN: case SQLITE_PERM: return CB_STORE_FAULT_IO;
    case SQLITE_BUSY: case SQLITE_LOCKED: return CB_STORE_FAULT_LOCKED;
    default: return CB_STORE_FAULT_INTERNAL;
    }
}

int cb_store_sqlite_fail(cb_store_t *s, int rc, const char *what) {
    cb_store_fault_t f = fault_of_sqlite(rc);
    const char *detail = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    const char *hint = "";
    if (f == CB_STORE_FAULT_FULL) hint = " (free disk space; nothing of this turn was acknowledged)";
    else if (f == CB_STORE_FAULT_CORRUPT) hint = " (the database file is damaged; it was left untouched)";
    else if (f == CB_STORE_FAULT_READONLY) hint = " (the state directory or database file is not writable)";
    cb_store_fail(s, f, CB_ESTORE, "%s: %s%s", what, detail, hint);
    /* Some errors (disk full, I/O) make SQLite roll the whole transaction
     * back. Then earlier writes of this turn are gone too: remember it so the
     * turn's commit reports failure instead of acknowledging lost writes. */
    if (s->in_txn && s->db && sqlite3_get_autocommit(s->db)) {
        s->in_txn = 0;
        s->aborted = 1;
        s->abort_fault = f;
        snprintf(s->abort_msg, sizeof s->abort_msg, "%s", s->errmsg);
    }
    return CB_ESTORE;
}

cb_store_fault_t cb_store_fault(const cb_store_t *s) { return s ? s->fault : CB_STORE_FAULT_INTERNAL; }
const char *cb_store_errmsg(const cb_store_t *s) { return s ? s->errmsg : "out of memory"; }
const char *cb_store_path(const cb_store_t *s) { return s && s->path ? s->path : ""; }
int cb_store_schema_version(const cb_store_t *s) { return s ? s->schema_version : 0; }
int cb_store_dirty(const cb_store_t *s) { return s->in_txn; }
uint64_t cb_store_commit_count(const cb_store_t *s) { return s->commits; }

/* ---- opening ---- */

/* mkdir -p with mode 0700 for every directory we create (XDG wants the state
 * home private; a pre-existing directory keeps its mode). */
static int make_dirs(cb_store_t *s, const char *dir) {
    char *p = strdup(dir);
    if (!p) return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ENOMEM, "out of memory");
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    for (char *c = p + 1;; c++) {
        int end = *c == 0;
        if (*c == '/' || end) {
            *c = 0;
            if (mkdir(p, 0700) != 0 && errno != EEXIST) {
                int e = errno;
                cb_store_fault_t f = (e == EACCES || e == EROFS || e == EPERM) ? CB_STORE_FAULT_READONLY
                                                                               : CB_STORE_FAULT_DIRECTORY;
                cb_store_fail(s, f, CB_ESTORE, "cannot create state directory '%s': %s", p, strerror(e));
                free(p);
                return CB_ESTORE;
            }
            if (end) break;
            *c = '/';
        }
    }
    free(p);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return cb_store_fail(s, CB_STORE_FAULT_DIRECTORY, CB_ESTORE,
                             "state directory '%s' is not a directory", dir);
    return 0;
}

/* One server per state directory: an exclusive flock on a lock file that holds
 * the owner's pid. flock (not fcntl) locks belong to the open file, so a second
 * open in the same process is refused too, and the kernel drops the lock when
 * the process dies (kill -9 included): no stale-lock cleanup needed. */
static int take_lock(cb_store_t *s, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/codingbridge.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        cb_store_fault_t f = (e == EACCES || e == EROFS || e == EPERM) ? CB_STORE_FAULT_READONLY
                                                                       : CB_STORE_FAULT_DIRECTORY;
        return cb_store_fail(s, f, CB_ESTORE, "state directory '%s' is not writable (cannot create %s: %s)",
                             dir, path, strerror(e));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char buf[32] = {0};
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        close(fd);
        long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
        if (e == EWOULDBLOCK) {
            if (pid > 0)
                return cb_store_fail(s, CB_STORE_FAULT_LOCKED, CB_EBUSY,
                                     "state directory '%s' is in use by another codingbridge process (pid %ld); "
                                     "stop it or choose another --state-dir", dir, pid);
            return cb_store_fail(s, CB_STORE_FAULT_LOCKED, CB_EBUSY,
                                 "state directory '%s' is in use by another codingbridge process; "
                                 "stop it or choose another --state-dir", dir);
        }
        return cb_store_fail(s, CB_STORE_FAULT_IO, CB_ESTORE, "cannot lock %s: %s", path, strerror(e));
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        int e = errno;
        close(fd);
        cb_store_fault_t f = (e == ENOSPC || e == EDQUOT) ? CB_STORE_FAULT_FULL
                           : (e == EROFS || e == EACCES) ? CB_STORE_FAULT_READONLY : CB_STORE_FAULT_IO;
        return cb_store_fail(s, f, CB_ESTORE, "cannot write lock file %s: %s", path, strerror(e));
    }
    s->lock_fd = fd;
    return 0;
}

static int exec_sql(cb_store_t *s, const char *sql, const char *what) {
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : cb_store_sqlite_fail(s, rc, what);
}

static int pragma_int(cb_store_t *s, const char *sql, int64_t *out) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) { *out = sqlite3_column_int64(st, 0); rc = SQLITE_OK; }
    }
    sqlite3_finalize(st);
    return rc;
}

static int migrate(cb_store_t *s, int from) {
    int rc = exec_sql(s, "BEGIN IMMEDIATE", "starting schema migration");
    if (rc) return rc;
    for (int v = from; v < CB_STORE_SCHEMA_VERSION; v++) {
        if ((rc = exec_sql(s, migrations[v], "migrating the store schema"))) break;
    }
    if (!rc) {
        char sql[128];
        snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d",
                 CB_STORE_APPLICATION_ID, CB_STORE_SCHEMA_VERSION);
        rc = exec_sql(s, sql, "recording the schema version");
    }
    if (!rc) rc = exec_sql(s, "COMMIT", "committing schema migration");
    if (rc) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    else s->schema_version = CB_STORE_SCHEMA_VERSION;
    return rc;
}

/* Decides whether the file is ours, empty, foreign, damaged or too new, BEFORE
 * changing anything in it (even the journal mode). */
static int check_identity(cb_store_t *s, int *version_out) {
    int64_t app = 0, ver = 0, tables = 0;
    int rc = pragma_int(s, "PRAGMA application_id", &app);
    if (rc == SQLITE_OK) rc = pragma_int(s, "PRAGMA user_version", &ver);
    if (rc == SQLITE_OK) rc = pragma_int(s, "SELECT count(*) FROM sqlite_schema", &tables);
    if (rc != SQLITE_OK) {
        if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT)
            return cb_store_fail(s, (rc & 0xff) == SQLITE_NOTADB ? CB_STORE_FAULT_NOTADB : CB_STORE_FAULT_CORRUPT,
                                 CB_ESTORE,
                                 "'%s' is not a readable SQLite database (%s): corrupt or a foreign file. "
                                 "It was left untouched; move it away to start with an empty store.",
                                 s->path, sqlite3_errmsg(s->db));
        return cb_store_sqlite_fail(s, rc, "reading the store header");
    }
    if (app == 0 && ver == 0 && tables == 0) { *version_out = 0; return 0; }
    if (app != CB_STORE_APPLICATION_ID)
        return cb_store_fail(s, CB_STORE_FAULT_FOREIGN, CB_ESTORE,
                             "'%s' is a SQLite database but not a CodingBridge store (application_id 0x%llx, "
                             "%lld schema objects). It was left untouched; use another --state-dir.",
                             s->path, (unsigned long long)app, (long long)tables);
    if (ver > CB_STORE_SCHEMA_VERSION)
        return cb_store_fail(s, CB_STORE_FAULT_NEWER, CB_ESTORE,
                             "'%s' has store schema version %lld, newer than this build supports (%d): "
                             "it was written by a newer codingbridge. Upgrade; the file was left untouched.",
                             s->path, (long long)ver, CB_STORE_SCHEMA_VERSION);
    if (ver < 1)
        return cb_store_fail(s, CB_STORE_FAULT_FOREIGN, CB_ESTORE,
                             "'%s' has our application_id but no schema version; left untouched", s->path);
    *version_out = (int)ver;
    return 0;
}

/* Opens (creating 0600) the database file in dir. */
static int open_file(cb_store_t *s, const char *dir) {
    size_t n = strlen(dir) + 32;
    s->path = malloc(n);
    if (!s->path) return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ENOMEM, "out of memory");
    snprintf(s->path, n, "%s/codingbridge.db", dir);
    /* Create the file ourselves so it is 0600 from the first byte; SQLite
     * gives its -wal and -shm files the database file's mode. */
    int created = 1;
    int fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        created = 0;
        fd = open(s->path, O_RDWR | O_CLOEXEC);
    }
    if (fd < 0) {
        int e = errno;
        cb_store_fault_t f = (e == EACCES || e == EROFS || e == EPERM) ? CB_STORE_FAULT_READONLY
                           : (e == ENOSPC || e == EDQUOT) ? CB_STORE_FAULT_FULL
                           : (e == EISDIR) ? CB_STORE_FAULT_FOREIGN : CB_STORE_FAULT_IO;
        return cb_store_fail(s, f, CB_ESTORE, "cannot open database %s: %s", s->path, strerror(e));
    }
    struct stat st;
    int isreg = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    if (created) {
        /* Make the new file's directory entry durable before anything
         * written into it is acknowledged (power loss right after start). */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) { fsync(dfd); close(dfd); }
    }
    if (!isreg) return cb_store_fail(s, CB_STORE_FAULT_FOREIGN, CB_ESTORE, "%s is not a regular file", s->path);
    int rc = sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    return rc == SQLITE_OK ? 0 : cb_store_sqlite_fail(s, rc, "opening the database");
}

/* WAL: appends + one fsync per commit, readers never block the writer. */
static int enable_wal(cb_store_t *s) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(st, 0);
        rc = mode && strcmp(mode, "wal") == 0 ? SQLITE_OK : SQLITE_ERROR;
        if (rc) {
            sqlite3_finalize(st);
            return cb_store_fail(s, CB_STORE_FAULT_IO, CB_ESTORE,
                                 "cannot switch %s to WAL mode (got '%s'); is the file system local?",
                                 s->path, mode ? mode : "?");
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : cb_store_sqlite_fail(s, rc, "enabling WAL mode");
}

int cb_store_open(const char *dir, cb_store_t **out) {
    cb_store_t *s = calloc(1, sizeof *s);
    *out = s;
    if (!s) return CB_ENOMEM;
    s->lock_fd = -1;
    int rc;
    if (dir) {
        if (!*dir) return cb_store_fail(s, CB_STORE_FAULT_DIRECTORY, CB_EINVAL, "empty state directory path");
        if ((rc = make_dirs(s, dir)) || (rc = take_lock(s, dir)) || (rc = open_file(s, dir))) return rc;
    } else {
        rc = sqlite3_open_v2(":memory:", &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK) return cb_store_sqlite_fail(s, rc, "opening the database");
    }
    sqlite3_extended_result_codes(s->db, 1);
    if (sqlite3_db_readonly(s->db, "main") == 1)
        return cb_store_fail(s, CB_STORE_FAULT_READONLY, CB_ESTORE,
                             "database %s can only be opened read-only; the store needs to write", s->path);
    int version = 0;
    if ((rc = check_identity(s, &version))) return rc;
    if (dir && (rc = enable_wal(s))) return rc;
    /* synchronous=FULL in WAL mode fsyncs the WAL on every commit: a commit
     * that returned survives kill -9 and power loss. Group commit keeps that
     * to one fsync per loop turn. */
    if ((rc = exec_sql(s, "PRAGMA synchronous=FULL; PRAGMA temp_store=MEMORY; PRAGMA cache_size=-16384;"
                          "PRAGMA busy_timeout=0", "configuring the database")))
        return rc;
    if (version < CB_STORE_SCHEMA_VERSION) return migrate(s, version);
    s->schema_version = version;
    return 0;
}

/* ---- group commit ---- */

int cb_store_begin(cb_store_t *s) {
    if (!s->db) return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_ECLOSED, "store is not open");
    if (s->aborted)
        return cb_store_fail(s, CB_STORE_FAULT_ABORTED, CB_ESTORE,
                             "this turn's writes were rolled back (%s); retry", s->abort_msg);
    if (s->in_txn) return 0;
    int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return cb_store_sqlite_fail(s, rc, "starting a transaction");
    s->in_txn = 1;
    return 0;
}

int cb_store_commit(cb_store_t *s) {
    if (s->aborted) {
        s->aborted = 0;
        return cb_store_fail(s, s->abort_fault, CB_ESTORE, "%s", s->abort_msg);
    }
    if (!s->in_txn) return 0;
    if (s->path) {
        /* Someone deleted or renamed the state directory/database while we
         * serve: SQLite would keep writing to an unlinked file and everything
         * "acknowledged" from now on would vanish at restart. Refuse instead. */
        int moved = 0;
        if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            s->in_txn = 0;
            return cb_store_fail(s, CB_STORE_FAULT_DIRECTORY, CB_ESTORE,
                                 "the database %s was deleted or moved while the server was running; "
                                 "nothing of this turn was stored. Restart the server to recreate it.", s->path);
        }
    }
    int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        s->in_txn = 0;
        s->commits++;
        return 0;
    }
    int err = cb_store_sqlite_fail(s, rc, "committing");
    if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->in_txn = 0;
    s->aborted = 0;
    return err;
}

static void turn_end(cb_store_t *s) {
    if (!cb_store_turn_pending(s)) return;
    /* Writes coalesced over the turn (the engine's snapshots) join its commit. */
    if (s->before_commit) s->before_commit(s->hook_data);
    int rc = cb_store_end_turn(s);
    if (s->on_commit) s->on_commit(rc, s->hook_data);
}

static void on_check(uv_check_t *h) { turn_end(h->data); }
static void on_prepare(uv_prepare_t *h) { turn_end(h->data); }
static void on_timer(uv_timer_t *h) {
    cb_store_t *s = h->data;
    if (s->on_wakeup) s->on_wakeup(s->hook_data);
}

int cb_store_attach(cb_store_t *s, uv_loop_t *loop, cb_store_commit_cb on_commit,
                    cb_store_wakeup_cb on_wakeup, void *data) {
    if (s->hooks) return cb_store_fail(s, CB_STORE_FAULT_INTERNAL, CB_EINVAL, "store already attached to a loop");
    struct cb_store_hooks *k = calloc(1, sizeof *k);
    if (!k) return CB_ENOMEM;
    uv_check_init(loop, &k->check);
    uv_prepare_init(loop, &k->prepare);
    uv_timer_init(loop, &k->timer);
    k->check.data = k->prepare.data = k->timer.data = s;
    /* The hooks must not keep the loop alive by themselves: the server's
     * stdin and timers decide when the loop ends. */
    uv_check_start(&k->check, on_check);
    uv_prepare_start(&k->prepare, on_prepare);
    uv_unref((uv_handle_t *)&k->check);
    uv_unref((uv_handle_t *)&k->prepare);
    uv_unref((uv_handle_t *)&k->timer);
    s->hooks = k;
    s->on_commit = on_commit;
    s->on_wakeup = on_wakeup;
    s->hook_data = data;
    return 0;
}

void cb_store_set_wakeup(cb_store_t *s, int64_t delay_ms) {
    if (!s->hooks) return;
    if (delay_ms < 0) { uv_timer_stop(&s->hooks->timer); return; }
    uv_timer_start(&s->hooks->timer, on_timer, (uint64_t)delay_ms, 0);
}

void cb_store_request_turn_end(cb_store_t *s) { s->turn_requested = 1; }

void cb_store_abort_turn(cb_store_t *s, const char *why) {
    if (s->aborted) return;
    if (s->in_txn && s->db) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->in_txn = 0;
    s->aborted = 1;
    s->abort_fault = s->fault ? s->fault : CB_STORE_FAULT_ABORTED;
    snprintf(s->abort_msg, sizeof s->abort_msg, "%s", why);
}

int cb_store_end_turn(cb_store_t *s) {
    s->turn_requested = 0;
    return cb_store_commit(s);
}

int cb_store_turn_pending(const cb_store_t *s) { return s->in_txn || s->aborted || s->turn_requested; }

void cb_store_set_before_commit(cb_store_t *s, cb_store_before_commit_cb before) { s->before_commit = before; }

static void hook_closed(uv_handle_t *h) {
    struct cb_store_hooks *k = h->data;
    if (++k->closed == 3) free(k);
}

void cb_store_close(cb_store_t *s) {
    if (!s) return;
    if (s->hooks) {
        struct cb_store_hooks *k = s->hooks;
        uv_handle_t *hs[3] = {(uv_handle_t *)&k->check, (uv_handle_t *)&k->prepare, (uv_handle_t *)&k->timer};
        int pending = 0;
        for (int i = 0; i < 3; i++) {
            hs[i]->data = k;
            /* If the loop was torn down first it already closed our handles. */
            if (!uv_is_closing(hs[i])) { uv_close(hs[i], hook_closed); pending++; }
            else k->closed++;
        }
        if (!pending) free(k);
        s->hooks = NULL;
    }
    if (s->db) {
        if (s->in_txn && !s->aborted) cb_store_commit(s);
        cb_store_finalize_statements(s);
        sqlite3_close_v2(s->db);
    }
    if (s->lock_fd >= 0) close(s->lock_fd); /* releases the flock */
    free(s->path);
    free(s);
}

int cb_store_limit_growth(cb_store_t *s, int64_t pages) {
    int64_t count = 0;
    int rc = pragma_int(s, "PRAGMA page_count", &count);
    if (rc != SQLITE_OK) return cb_store_sqlite_fail(s, rc, "reading page_count");
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld", (long long)(count + pages));
    return exec_sql(s, sql, "setting max_page_count");
}
