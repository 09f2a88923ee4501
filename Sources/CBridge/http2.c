/* The push client: libcurl's multi interface on the daemon's libuv loop (the
 * pattern of curl's multi-uv.c example). curl tells us which sockets to watch
 * (on_socket: a uv_poll each) and when to wake it (on_curl_timer: one uv
 * timer); we hand readiness back with curl_multi_socket_action and collect
 * finished transfers with curl_multi_info_read. Contract in include/cb_http2.h.
 *
 * Each request is one easy handle, taken by cb_http2_post from a small pool of
 * finished ones (curl keeps an easy handle's options and caches between
 * transfers; the per-client options are set once, when it is created) or
 * made anew, and handed back to the pool before its callback runs; close
 * cleans the pool up. Connections live in the multi handle's cache,
 * so they outlive requests; the share handle keeps TLS sessions so a
 * reconnect resumes instead of doing a full handshake.
 *
 * Re-entrancy: user callbacks run only from check_multi_info (after curl has
 * returned, so a callback may post or close) and from finish_close. A close
 * from a callback tears curl down at once; check_multi_info then stops, and
 * nothing touches the multi handle again. The struct itself goes only after
 * the last uv_close callback, so no stack frame above can see it freed. */
#include "cb_http2.h"
#include "cb_error.h"
#include <curl/curl.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_TIMEOUT_MS 30000
#define MAX_BODY (1u << 20)     /* a push service answers a few hundred bytes */
#define MAX_HEADERS (64u << 10) /* name\0value\0 bytes */
#define MAX_STREAMS 1000        /* APNs allows up to 1000 concurrent streams */
#define IDLE_CONN_SECONDS 600   /* curl's default (118 s) would reconnect after every lull */
#define EASY_POOL 256           /* finished easy handles kept for the next requests */

typedef struct http2_req http2_req;
typedef struct http2_sock http2_sock;

struct cb_http2_s {
    uv_timer_t timer;
    uv_loop_t *loop;
    CURLM *multi;
    CURLSH *share;
    char *ca_file;
    void *data;
    http2_req *live;      /* in flight, doubly linked */
    http2_req *cancelled; /* by close: called back once the handles are closed */
    http2_sock *socks;    /* sockets curl asked us to watch */
    int open_handles;     /* the timer + polls whose close callback has not run */
    int closing;
    void (*closed)(void *data);
    void *closed_data;
    uint64_t started, connects, failed;
    size_t in_flight;
    CURL *pool[EASY_POOL]; /* idle easy handles, their per-client options set */
    int n_pool;
};

struct http2_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    int events; /* what the poll watches (UV_READABLE | UV_WRITABLE) */
    cb_http2_t *c;
    http2_sock *prev, *next;
};

struct http2_req {
    http2_req *prev, *next;
    cb_http2_t *c;
    CURL *easy;
    struct curl_slist *headers;
    cb_http2_done_cb done;
    void *data;
    uint64_t t0;
    char *body, *hdr; /* hdr: "name\0value\0" pairs of the response */
    size_t body_len, body_cap, hdr_len, hdr_cap, n_hdr;
    int too_large;
    char err[CURL_ERROR_SIZE];
};

static void check_multi_info(cb_http2_t *c);
static void maybe_finish_close(cb_http2_t *c);

/* ---- buffers ---- */

/* Appends n bytes plus a NUL (not counted), growing geometrically up to `max`. */
static int append(char **buf, size_t *len, size_t *cap, const char *p, size_t n, size_t max) {
    if (*len + n + 1 > max) return -1;
    if (*len + n + 1 > *cap) {
        size_t want = *cap ? *cap * 2 : 256;
        while (want < *len + n + 1) want *= 2;
        char *b = realloc(*buf, want);
        if (!b) return -1;
        *buf = b;
        *cap = want;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *userp) {
    http2_req *r = userp;
    if (append(&r->body, &r->body_len, &r->body_cap, p, size * n, MAX_BODY) != 0) {
        r->too_large = 1;
        return 0; /* curl aborts the transfer: CURLE_WRITE_ERROR */
    }
    return size * n;
}

/* One header line at a time, status line included. A status line starts a
 * new header set, so an interim (1xx) response leaves only the final one's. */
static size_t on_header(char *p, size_t size, size_t n, void *userp) {
    http2_req *r = userp;
    size_t len = size * n, i = 0;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        r->hdr_len = r->n_hdr = 0;
        return len;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon || colon == p) return len; /* the blank end line, or not a header */
    size_t name_len = (size_t)(colon - p), v = name_len + 1, end = len;
    while (v < end && (p[v] == ' ' || p[v] == '\t')) v++;
    while (end > v && (p[end - 1] == '\r' || p[end - 1] == '\n' || p[end - 1] == ' ' || p[end - 1] == '\t')) end--;
    size_t at = r->hdr_len;
    if (append(&r->hdr, &r->hdr_len, &r->hdr_cap, p, name_len, MAX_HEADERS) != 0 ||
        append(&r->hdr, &r->hdr_len, &r->hdr_cap, "", 1, MAX_HEADERS) != 0 ||
        append(&r->hdr, &r->hdr_len, &r->hdr_cap, p + v, end - v, MAX_HEADERS) != 0 ||
        append(&r->hdr, &r->hdr_len, &r->hdr_cap, "", 1, MAX_HEADERS) != 0) {
        r->too_large = 1;
        return 0;
    }
    for (i = 0; i < name_len; i++) r->hdr[at + i] = (char)tolower((unsigned char)r->hdr[at + i]);
    r->n_hdr++;
    return len;
}

/* ---- completion ---- */

static void unlink_req(cb_http2_t *c, http2_req *r) {
    if (r->prev) r->prev->next = r->next;
    else c->live = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void free_req(http2_req *r) {
    if (r->easy) curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    free(r->body);
    free(r->hdr);
    free(r);
}

/* Calls the request back and frees it; it is already out of every list. */
static void deliver(http2_req *r, int status, const char *error, int version) {
    cb_http2_t *c = r->c;
    cb_http2_header_t *hs = r->n_hdr ? malloc(r->n_hdr * sizeof *hs) : NULL;
    size_t nh = 0;
    for (size_t off = 0; hs && nh < r->n_hdr; nh++) {
        hs[nh].name = r->hdr + off;
        off += strlen(hs[nh].name) + 1;
        hs[nh].value = r->hdr + off;
        off += strlen(hs[nh].value) + 1;
    }
    cb_http2_response_t resp = {
        .status = status, .error = error, .body = r->body ? r->body : "", .body_len = r->body_len,
        .headers = hs, .n_headers = nh, .http_version = version,
        .total_ms = (double)(uv_hrtime() - r->t0) / 1e6,
    };
    c->in_flight--;
    if (status == 0) c->failed++;
    r->done(&resp, r->data);
    free(hs);
    free_req(r);
}

static int version_of(long v) {
    switch (v) {
    case CURL_HTTP_VERSION_1_0: return 10;
    case CURL_HTTP_VERSION_1_1: return 11;
    case CURL_HTTP_VERSION_2_0: return 20;
    case CURL_HTTP_VERSION_3: return 30;
    default: return 0;
    }
}

/* A finished (removed) easy handle back to the pool, or cleaned up. Its
 * pointers into the request go: nothing may write to the freed request. */
static void release_easy(cb_http2_t *c, CURL *e) {
    if (c->closing || c->n_pool >= EASY_POOL) {
        curl_easy_cleanup(e);
        return;
    }
    curl_easy_setopt(e, CURLOPT_PRIVATE, NULL);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, NULL);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, NULL);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    c->pool[c->n_pool++] = e;
}

static void drain_pool(cb_http2_t *c) {
    while (c->n_pool) curl_easy_cleanup(c->pool[--c->n_pool]);
}

static void complete(cb_http2_t *c, http2_req *r, CURLcode res) {
    long status = 0, version = 0, conns = 0;
    curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &conns);
    c->connects += (uint64_t)conns;
    curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &version);
    if (res == CURLE_OK) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    const char *error = NULL;
    if (res != CURLE_OK || status <= 0) {
        status = 0;
        if (r->too_large) error = "the response is too large";
        else if (res == CURLE_OK) error = "no HTTP status in the response";
        else error = r->err[0] ? r->err : curl_easy_strerror(res);
    }
    /* before the callback, which may close the client: the share handle
     * cannot go while an easy handle still uses it (close drains the pool) */
    release_easy(c, r->easy);
    r->easy = NULL;
    deliver(r, (int)status, error, status ? version_of(version) : 0);
}

static void check_multi_info(cb_http2_t *c) {
    CURLMsg *m;
    int pending;
    while (!c->closing && (m = curl_multi_info_read(c->multi, &pending))) {
        if (m->msg != CURLMSG_DONE) continue;
        http2_req *r = NULL;
        CURLcode res = m->data.result;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        curl_multi_remove_handle(c->multi, r->easy); /* m is invalid from here */
        unlink_req(c, r);
        complete(c, r, res);
    }
}

/* ---- curl's sockets and timer on the loop ---- */

static void on_poll(uv_poll_t *h, int status, int events) {
    http2_sock *s = h->data;
    cb_http2_t *c = s->c;
    /* On an error (POLLERR: a reset, a refused connect) libuv stops the
     * handle and reports no events: let curl try both ways, so it fails the
     * transfer with the socket's own error rather than a bare "poll error". */
    int flags = status < 0 ? CURL_CSELECT_ERR | CURL_CSELECT_IN | CURL_CSELECT_OUT : 0, running;
    if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(c->multi, s->fd, flags, &running);
    check_multi_info(c);
}

static void on_timer(uv_timer_t *t) {
    cb_http2_t *c = t->data;
    int running;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_multi_info(c);
}

static void on_handle_closed(uv_handle_t *h) {
    cb_http2_t *c = h->data;
    c->open_handles--;
    maybe_finish_close(c);
}

static void on_sock_closed(uv_handle_t *h) {
    http2_sock *s = h->data;
    cb_http2_t *c = s->c;
    free(s);
    c->open_handles--;
    maybe_finish_close(c);
}

static void sock_close(cb_http2_t *c, http2_sock *s) {
    if (s->prev) s->prev->next = s->next;
    else c->socks = s->next;
    if (s->next) s->next->prev = s->prev;
    uv_close((uv_handle_t *)&s->poll, on_sock_closed); /* stops polling now, before curl closes the fd */
}

static http2_sock *sock_open(cb_http2_t *c, curl_socket_t fd) {
    http2_sock *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (uv_poll_init_socket(c->loop, &s->poll, fd) != 0) {
        free(s);
        return NULL;
    }
    /* Only requests keep the loop alive: each has a curl timeout on the timer. */
    uv_unref((uv_handle_t *)&s->poll);
    s->poll.data = s;
    s->fd = fd;
    s->c = c;
    s->next = c->socks;
    if (c->socks) c->socks->prev = s;
    c->socks = s;
    c->open_handles++;
    return s;
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
    (void)easy;
    cb_http2_t *c = userp;
    http2_sock *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s) sock_close(c, s);
        return 0;
    }
    /* A failure here returns 0 all the same: -1 would mark the whole multi
     * handle dead for good. The transfer on this socket then times out. */
    if (!s) {
        if (!(s = sock_open(c, fd))) return 0;
        curl_multi_assign(c->multi, fd, s);
    }
    int events = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
    /* the same again: nothing to change (a restart costs epoll_ctl calls).
     * After a poll error libuv stopped the handle: start it again then. */
    if (events == s->events && uv_is_active((uv_handle_t *)&s->poll)) return 0;
    s->events = events;
    uv_poll_start(&s->poll, events, on_poll);
    return 0;
}

/* curl's "call me in ms" (-1: never). Not a socket_action from here: curl
 * forbids that inside its callback; 0 runs on the next loop turn. */
static int on_curl_timer(CURLM *multi, long ms, void *userp) {
    (void)multi;
    cb_http2_t *c = userp;
    if (ms < 0) uv_timer_stop(&c->timer);
    else uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
    return 0;
}

/* ---- the client ---- */

int cb_http2_new(uv_loop_t *loop, cb_http2_t **out) {
    *out = NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return CB_ENOMEM; /* thread-safe since 7.84 */
    cb_http2_t *c = calloc(1, sizeof *c);
    if (!c) return CB_ENOMEM;
    c->loop = loop;
    if (!(c->multi = curl_multi_init()) || !(c->share = curl_share_init())) {
        if (c->multi) curl_multi_cleanup(c->multi);
        free(c);
        return CB_ENOMEM;
    }
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 1L);
    curl_multi_setopt(c->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)MAX_STREAMS);
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->open_handles = 1;
    *out = c;
    return 0;
}

int cb_http2_set_ca_file(cb_http2_t *c, const char *path) {
    if (c->closing) return CB_ECLOSED;
    char *copy = path ? strdup(path) : NULL;
    if (path && !copy) return CB_ENOMEM;
    free(c->ca_file);
    c->ca_file = copy;
    drain_pool(c); /* pooled handles carry the old CA file */
    return 0;
}

void *cb_http2_data(const cb_http2_t *c) { return c->data; }
void cb_http2_set_data(cb_http2_t *c, void *data) { c->data = data; }
uint64_t cb_http2_started(const cb_http2_t *c) { return c->started; }
uint64_t cb_http2_connects(const cb_http2_t *c) { return c->connects; }
uint64_t cb_http2_failed(const cb_http2_t *c) { return c->failed; }
size_t cb_http2_in_flight(const cb_http2_t *c) { return c->in_flight; }

const char *cb_http2_response_header(const cb_http2_response_t *r, const char *lowercase_name) {
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, lowercase_name) == 0) return r->headers[i].value;
    return NULL;
}

static int has_prefix(const char *h, const char *name) { return strncasecmp(h, name, strlen(name)) == 0; }

/* The caller's headers, and empty ones that remove curl's defaults (a form
 * Content-Type for any POST, Accept, Expect: 100-continue) unless given. */
static int build_headers(http2_req *r, const char *const *headers, int n) {
    int ctype = 0, accept = 0, expect = 0;
    for (int i = 0; i < n; i++) {
        const char *h = headers[i];
        if (!h || !strchr(h, ':') || *h == ':' || strpbrk(h, "\r\n")) return CB_EINVAL;
        ctype |= has_prefix(h, "content-type:");
        accept |= has_prefix(h, "accept:");
        expect |= has_prefix(h, "expect:");
        struct curl_slist *l = curl_slist_append(r->headers, h);
        if (!l) return CB_ENOMEM;
        r->headers = l;
    }
    const char *removals[] = {ctype ? NULL : "Content-Type:", accept ? NULL : "Accept:", expect ? NULL : "Expect:"};
    for (size_t i = 0; i < sizeof removals / sizeof *removals; i++) {
        if (!removals[i]) continue;
        struct curl_slist *l = curl_slist_append(r->headers, removals[i]);
        if (!l) return CB_ENOMEM;
        r->headers = l;
    }
    return 0;
}

/* The options every request of the client shares: once per easy handle. */
static CURL *new_easy(cb_http2_t *c) {
    CURL *e = curl_easy_init();
    if (!e) return NULL;
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_SHARE, c->share);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L); /* wait for the one connection rather than open another */
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 60L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 30L);
    curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, (long)IDLE_CONN_SECONDS);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "codingbridge");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    if (c->ca_file && curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file) != CURLE_OK) {
        curl_easy_cleanup(e);
        return NULL;
    }
    return e;
}

/* The request's own options (all of them each time: a pooled handle keeps the last request's). */
static int setup_easy(http2_req *r, const char *url, const void *body, size_t len, int timeout_ms) {
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->err);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    if (curl_easy_setopt(e, CURLOPT_URL, url) != CURLE_OK) return CB_EINVAL;
    /* the size first: COPYPOSTFIELDS copies that many bytes */
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    if (curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, len ? body : "") != CURLE_OK) return CB_ENOMEM;
    return 0;
}

int cb_http2_post(cb_http2_t *c, const char *url, const char *const *headers, int nheaders, const void *body,
                  size_t len, int timeout_ms, cb_http2_done_cb done, void *req_data) {
    if (!c || c->closing) return CB_ECLOSED;
    if (!url || !*url || !done || nheaders < 0 || (nheaders && !headers) || (len && !body)) return CB_EINVAL;
    http2_req *r = calloc(1, sizeof *r);
    if (!r) return CB_ENOMEM;
    r->c = c;
    r->done = done;
    r->data = req_data;
    r->t0 = uv_hrtime();
    r->easy = c->n_pool ? c->pool[--c->n_pool] : new_easy(c);
    int rc = r->easy ? build_headers(r, headers, nheaders) : CB_ENOMEM;
    if (rc == 0) rc = setup_easy(r, url, body, len, timeout_ms);
    /* the add arms the timer (0 ms): the transfer, and any failure, start on the next loop turn */
    if (rc == 0 && curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) rc = CB_ENOMEM;
    if (rc) {
        free_req(r);
        return rc;
    }
    r->next = c->live;
    if (c->live) c->live->prev = r;
    c->live = r;
    c->started++;
    c->in_flight++;
    return 0;
}

/* ---- teardown ---- */

static void maybe_finish_close(cb_http2_t *c) {
    if (!c->closing || c->open_handles) return;
    while (c->cancelled) {
        http2_req *r = c->cancelled;
        c->cancelled = r->next;
        deliver(r, 0, "closed", 0);
    }
    if (c->closed) c->closed(c->closed_data);
    free(c->ca_file);
    free(c);
}

void cb_http2_close(cb_http2_t *c, void (*closed)(void *data), void *data) {
    if (!c || c->closing) return;
    c->closing = 1;
    c->closed = closed;
    c->closed_data = data;
    while (c->live) {
        http2_req *r = c->live;
        long conns = 0;
        curl_multi_remove_handle(c->multi, r->easy);
        curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &conns);
        c->connects += (uint64_t)conns;
        /* now, not at delivery: the share handle cannot go while an easy handle uses it */
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
        unlink_req(c, r);
        r->next = c->cancelled;
        c->cancelled = r;
    }
    drain_pool(c);
    curl_multi_cleanup(c->multi); /* closes the connections; curl may still report sockets removed */
    c->multi = NULL;
    curl_share_cleanup(c->share);
    c->share = NULL;
    while (c->socks) sock_close(c, c->socks);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}
