/* C unit driver of the push client (run.sh builds it with ASan+UBSan and
 * starts the APNs test server, Tests/e2e/apnsserver.py --serve): a 200 over
 * HTTP/2 with its headers, 100 concurrent requests on ONE connection, a 403
 * with its JSON body, a stream the server never answers and a server that
 * never answers (timeouts), a refused port, garbage and an empty reply
 * (status 0 and an error), a server that aborts the connection or sends
 * GOAWAY under streams in flight (all fail, the next request reconnects), HTTP/1.1 over plain http://, close() with requests
 * in flight and from inside a callback (every callback exactly once), and the
 * argument errors.
 *
 *   http2_test PORT CA_FILE JWT TOPIC STALL_TOKEN DROP_TOKEN GOAWAY_TOKEN
 *   http2_test bench URL CA_FILE JWT TOPIC N CONCURRENCY   (requests/s) */
#define _GNU_SOURCE /* memmem */
#include "cb_error.h"
#include "cb_http2.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #x); exit(1); } } while (0)

static uv_loop_t loop;
static char url_ok[256], url_stall[256], url_drop[256], url_goaway[256], auth[2048], topic_hdr[256];
static const char *payload = "{\"aps\":{\"alert\":\"hello\"}}";
static const char *token_ok = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

typedef struct {
    int calls, status, version;
    char error[256], apns_id[64], reason[128], location[64];
    int *counter; /* incremented on every call, when set */
} result_t;

static int in_post; /* a callback from inside cb_http2_post would see it set */

static void on_done(const cb_http2_response_t *r, void *data) {
    result_t *res = data;
    CHECK(!in_post);
    res->calls++;
    res->status = r->status;
    res->version = r->http_version;
    snprintf(res->error, sizeof res->error, "%s", r->error ? r->error : "");
    const char *id = cb_http2_response_header(r, "apns-id");
    snprintf(res->apns_id, sizeof res->apns_id, "%s", id ? id : "");
    const char *loc = cb_http2_response_header(r, "location");
    snprintf(res->location, sizeof res->location, "%s", loc ? loc : "");
    snprintf(res->reason, sizeof res->reason, "%.*s", (int)r->body_len, (const char *)r->body);
    CHECK(((const char *)r->body)[r->body_len] == 0);
    CHECK((r->status == 0) == (r->error != NULL));
    if (res->counter) (*res->counter)++;
}

static int post(cb_http2_t *c, const char *url, const char *authorization, int timeout_ms, result_t *res) {
    const char *h[] = {authorization, topic_hdr, "apns-push-type: alert", "apns-priority: 10"};
    in_post = 1;
    int rc = cb_http2_post(c, url, h, 4, payload, strlen(payload), timeout_ms, on_done, res);
    in_post = 0;
    return rc;
}

static void on_tick(uv_timer_t *t) { (void)t; }

/* Runs the loop until *flag reaches want (or a deadline: the test fails). */
static void run_until(int *flag, int want, int max_ms) {
    uv_timer_t tick; /* wakes the loop so the deadline is checked */
    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, on_tick, 20, 20);
    uint64_t end = uv_now(&loop) + (uint64_t)max_ms;
    while (*flag < want && uv_now(&loop) < end) uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    if (*flag < want) fprintf(stderr, "timed out waiting: %d of %d\n", *flag, want);
    CHECK(*flag >= want);
}

/* ---- raw TCP servers on the loop: misbehaving peers ---- */

enum raw_mode { RAW_STALL, RAW_GARBAGE, RAW_CLOSE, RAW_HTTP11 };
typedef struct { uv_tcp_t tcp; enum raw_mode mode; int port; } raw_server_t;

static void on_raw_closed(uv_handle_t *h) { free(h); }
static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *b) { (void)h; static char buf[65536]; (void)size; *b = uv_buf_init(buf, sizeof buf); }
static void on_written(uv_write_t *w, int status) {
    (void)status;
    uv_close((uv_handle_t *)w->handle, on_raw_closed);
    free(w);
}

static void on_raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
    enum raw_mode mode = (enum raw_mode)(intptr_t)s->data;
    if (n < 0) { uv_close((uv_handle_t *)s, on_raw_closed); return; }
    if (n == 0 || mode == RAW_STALL || (mode == RAW_HTTP11 && !memmem(b->base, (size_t)n, "\r\n\r\n", 4))) return;
    static char garbage[] = "\x16\x03\x01 this is not HTTP at all \x00\xff\r\n\r\n";
    static char http11[] = "HTTP/1.1 201 Created\r\nLocation: /push/42\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    uv_buf_t out = mode == RAW_GARBAGE ? uv_buf_init(garbage, sizeof garbage - 1) : uv_buf_init(http11, sizeof http11 - 1);
    uv_read_stop(s);
    uv_write_t *w = malloc(sizeof *w);
    uv_write(w, s, &out, 1, on_written);
}

static void on_raw_conn(uv_stream_t *server, int status) {
    raw_server_t *rs = (raw_server_t *)server;
    if (status < 0) return;
    uv_tcp_t *p = malloc(sizeof *p);
    uv_tcp_init(&loop, p);
    CHECK(uv_accept(server, (uv_stream_t *)p) == 0);
    p->data = (void *)(intptr_t)rs->mode;
    if (rs->mode == RAW_CLOSE) uv_close((uv_handle_t *)p, on_raw_closed);
    else uv_read_start((uv_stream_t *)p, on_alloc, on_raw_read);
}

static raw_server_t *raw_server(enum raw_mode mode) {
    raw_server_t *rs = calloc(1, sizeof *rs);
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", 0, &sa);
    uv_tcp_init(&loop, &rs->tcp);
    rs->mode = mode;
    CHECK(uv_tcp_bind(&rs->tcp, (struct sockaddr *)&sa, 0) == 0);
    CHECK(uv_listen((uv_stream_t *)&rs->tcp, 64, on_raw_conn) == 0);
    int len = sizeof sa;
    uv_tcp_getsockname(&rs->tcp, (struct sockaddr *)&sa, &len);
    rs->port = ntohs(sa.sin_port);
    return rs;
}

static int free_port(void) {
    raw_server_t *rs = raw_server(RAW_CLOSE);
    int port = rs->port;
    uv_close((uv_handle_t *)&rs->tcp, on_raw_closed);
    uv_run(&loop, UV_RUN_NOWAIT);
    return port;
}

/* ---- the cases ---- */

static int closed_calls;
static void on_closed(void *data) { (void)data; closed_calls++; }

static void close_client(cb_http2_t *c) {
    int before = closed_calls;
    cb_http2_close(c, on_closed, NULL);
    run_until(&closed_calls, before + 1, 2000);
}

static void test_ok_and_reuse(const char *ca) {
    cb_http2_t *c;
    CHECK(cb_http2_new(&loop, &c) == 0);
    CHECK(cb_http2_set_ca_file(c, ca) == 0);
    /* 100 at once on a fresh client: one connection, all streams on it */
    enum { N = 100 };
    static result_t res[N];
    int done = 0;
    for (int i = 0; i < N; i++) {
        res[i] = (result_t){.counter = &done};
        CHECK(post(c, url_ok, auth, 5000, &res[i]) == 0);
    }
    CHECK(cb_http2_in_flight(c) == N && done == 0);
    run_until(&done, N, 10000);
    for (int i = 0; i < N; i++) {
        CHECK(res[i].calls == 1 && res[i].status == 200 && res[i].version == 20);
        CHECK(strlen(res[i].apns_id) == 36);
    }
    printf("100 concurrent: %llu connection(s)\n", (unsigned long long)cb_http2_connects(c));
    CHECK(cb_http2_connects(c) == 1 && cb_http2_started(c) == N && cb_http2_in_flight(c) == 0);
    /* a rejected request: the status and Apple's JSON body */
    result_t bad = {0};
    CHECK(post(c, url_ok, "authorization: bearer not.a.jwt", 5000, &bad) == 0);
    run_until(&bad.calls, 1, 5000);
    CHECK(bad.status == 403 && strstr(bad.reason, "InvalidProviderToken") && bad.error[0] == 0);
    CHECK(cb_http2_connects(c) == 1 && cb_http2_failed(c) == 0);
    close_client(c);
}

static void expect_failure(cb_http2_t *c, const char *url, int timeout_ms, const char *what) {
    result_t r = {0};
    uint64_t t0 = uv_hrtime();
    CHECK(post(c, url, auth, timeout_ms, &r) == 0);
    run_until(&r.calls, 1, timeout_ms + 3000);
    double ms = (double)(uv_hrtime() - t0) / 1e6;
    printf("%-26s status %d after %4.0f ms: %s\n", what, r.status, ms, r.error);
    CHECK(r.calls == 1 && r.status == 0 && r.error[0] && r.version == 0);
}

static void test_failures(const char *ca) {
    cb_http2_t *c;
    char url[256];
    CHECK(cb_http2_new(&loop, &c) == 0);
    CHECK(cb_http2_set_ca_file(c, ca) == 0);
    expect_failure(c, url_stall, 300, "unanswered stream:");
    result_t after = {0}; /* the connection still serves */
    CHECK(post(c, url_ok, auth, 5000, &after) == 0);
    run_until(&after.calls, 1, 5000);
    CHECK(after.status == 200);
    raw_server_t *stall = raw_server(RAW_STALL), *garbage = raw_server(RAW_GARBAGE), *closing = raw_server(RAW_CLOSE);
    snprintf(url, sizeof url, "https://127.0.0.1:%d/3/device/%s", stall->port, token_ok);
    expect_failure(c, url, 300, "silent server (TLS):");
    snprintf(url, sizeof url, "https://127.0.0.1:%d/3/device/%s", free_port(), token_ok);
    expect_failure(c, url, 2000, "refused port:");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/push", garbage->port);
    expect_failure(c, url, 2000, "garbage reply:");
    snprintf(url, sizeof url, "https://127.0.0.1:%d/push", garbage->port);
    expect_failure(c, url, 2000, "garbage TLS reply:");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/push", closing->port);
    expect_failure(c, url, 2000, "closed at once:");
    expect_failure(c, "https://no-such-host.invalid/x", 2000, "unknown host:");
    CHECK(cb_http2_failed(c) == 7 && cb_http2_in_flight(c) == 0);
    close_client(c);
    uv_close((uv_handle_t *)&stall->tcp, on_raw_closed);
    uv_close((uv_handle_t *)&garbage->tcp, on_raw_closed);
    uv_close((uv_handle_t *)&closing->tcp, on_raw_closed);
}

/* The server aborts the connection, or sends GOAWAY, while streams are in
 * flight: each fails once with an error, and the next request opens a new
 * connection. */
static void test_lost_connection(const char *ca, const char *url_kill, const char *what) {
    cb_http2_t *c;
    CHECK(cb_http2_new(&loop, &c) == 0);
    CHECK(cb_http2_set_ca_file(c, ca) == 0);
    enum { N = 10 };
    static result_t res[N];
    int done = 0;
    for (int i = 0; i < N; i++) {
        res[i] = (result_t){.counter = &done};
        CHECK(post(c, url_stall, auth, 5000, &res[i]) == 0);
    }
    result_t dropper = {.counter = &done};
    CHECK(post(c, url_kill, auth, 5000, &dropper) == 0);
    run_until(&done, N + 1, 6000);
    for (int i = 0; i < N; i++) CHECK(res[i].calls == 1 && res[i].status == 0 && res[i].error[0]);
    printf("%-26s status 0: %s\n", what, dropper.error);
    CHECK(dropper.calls == 1 && dropper.status == 0);
    result_t again = {0};
    CHECK(post(c, url_ok, auth, 5000, &again) == 0);
    run_until(&again.calls, 1, 5000);
    /* on a new connection (which a stream curl retried may have opened already) */
    CHECK(again.status == 200 && cb_http2_connects(c) == 2);
    close_client(c);
}

static void test_http11(void) {
    cb_http2_t *c;
    char url[256];
    CHECK(cb_http2_new(&loop, &c) == 0);
    raw_server_t *rs = raw_server(RAW_HTTP11);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/push", rs->port);
    /* one at a time on the host's one connection: all answered */
    enum { N = 5 };
    static result_t r[N];
    int done = 0;
    const char *h[] = {"content-encoding: aes128gcm", "ttl: 60"};
    for (int i = 0; i < N; i++) {
        r[i] = (result_t){.counter = &done};
        CHECK(cb_http2_post(c, url, h, 2, "\x01\x02", 2, 2000, on_done, &r[i]) == 0);
    }
    run_until(&done, N, 3000);
    for (int i = 0; i < N; i++) CHECK(r[i].status == 201 && r[i].version == 11 && strcmp(r[i].reason, "ok") == 0 &&
                                     strcmp(r[i].location, "/push/42") == 0);
    close_client(c);
    uv_close((uv_handle_t *)&rs->tcp, on_raw_closed);
}

/* close() with requests in flight: a stalled stream, a silent server, a
 * request not yet started; each called back once, "closed", before `closed`. */
static int cancelled_seen_before_closed = -1;
static void on_closed_count(void *data) { cancelled_seen_before_closed = *(int *)data; closed_calls++; }

static void test_close_in_flight(const char *ca) {
    cb_http2_t *c;
    char url[256];
    CHECK(cb_http2_new(&loop, &c) == 0);
    CHECK(cb_http2_set_ca_file(c, ca) == 0);
    raw_server_t *stall = raw_server(RAW_STALL);
    snprintf(url, sizeof url, "https://127.0.0.1:%d/3/device/%s", stall->port, token_ok);
    enum { N = 40 };
    static result_t res[N];
    int done = 0;
    for (int i = 0; i < N; i++) {
        res[i] = (result_t){.counter = &done};
        CHECK(post(c, i % 2 ? url_stall : url, auth, 10000, &res[i]) == 0);
    }
    for (int i = 0; i < 20; i++) uv_run(&loop, UV_RUN_NOWAIT); /* let them start */
    result_t late = {.counter = &done};
    CHECK(post(c, url_ok, auth, 10000, &late) == 0); /* never started */
    int before = closed_calls;
    cb_http2_close(c, on_closed_count, &done);
    CHECK(done == 0); /* not from inside close */
    run_until(&closed_calls, before + 1, 2000);
    CHECK(done == N + 1 && cancelled_seen_before_closed == N + 1);
    for (int i = 0; i < N; i++) CHECK(res[i].calls == 1 && res[i].status == 0 && strcmp(res[i].error, "closed") == 0);
    CHECK(late.calls == 1 && strcmp(late.error, "closed") == 0);
    uv_close((uv_handle_t *)&stall->tcp, on_raw_closed);
}

/* close() from inside a done callback while other requests are in flight. */
static cb_http2_t *closing_client;
static result_t others[10];
static void on_done_then_close(const cb_http2_response_t *r, void *data) {
    on_done(r, data);
    cb_http2_close(closing_client, on_closed, NULL);
    cb_http2_close(closing_client, on_closed, NULL); /* a second call does nothing */
    result_t ignored = {0};
    CHECK(cb_http2_post(closing_client, url_ok, NULL, 0, "", 0, 100, on_done, &ignored) == CB_ECLOSED);
}

static void test_close_from_callback(const char *ca) {
    CHECK(cb_http2_new(&loop, &closing_client) == 0);
    CHECK(cb_http2_set_ca_file(closing_client, ca) == 0);
    for (int i = 0; i < 10; i++) CHECK(post(closing_client, url_stall, auth, 10000, &others[i]) == 0);
    result_t first = {0};
    const char *h[] = {auth, topic_hdr, "apns-push-type: alert"};
    CHECK(cb_http2_post(closing_client, url_ok, h, 3, payload, strlen(payload), 5000, on_done_then_close, &first) == 0);
    int before = closed_calls;
    run_until(&closed_calls, before + 1, 5000);
    CHECK(closed_calls == before + 1 && first.calls == 1 && first.status == 200);
    for (int i = 0; i < 10; i++) CHECK(others[i].calls == 1 && strcmp(others[i].error, "closed") == 0);
}

static void test_arguments(void) {
    cb_http2_t *c;
    result_t r = {0};
    CHECK(cb_http2_new(&loop, &c) == 0);
    const char *no_colon[] = {"apns-topic"}, *crlf[] = {"a: b\r\nX-Injected: 1"};
    CHECK(cb_http2_post(c, url_ok, no_colon, 1, "", 0, 100, on_done, &r) == CB_EINVAL);
    CHECK(cb_http2_post(c, url_ok, crlf, 1, "", 0, 100, on_done, &r) == CB_EINVAL);
    CHECK(cb_http2_post(c, "", NULL, 0, "", 0, 100, on_done, &r) == CB_EINVAL);
    CHECK(cb_http2_post(c, url_ok, NULL, 0, NULL, 5, 100, on_done, &r) == CB_EINVAL);
    CHECK(cb_http2_started(c) == 0 && r.calls == 0);
    /* a URL curl cannot use fails later, through the callback */
    CHECK(cb_http2_post(c, "ftp://127.0.0.1/x", NULL, 0, "", 0, 1000, on_done, &r) == 0);
    CHECK(r.calls == 0);
    run_until(&r.calls, 1, 2000);
    CHECK(r.status == 0 && r.error[0]);
    printf("%-26s status 0: %s\n", "a protocol not allowed:", r.error);
    close_client(c);
}

/* ---- the measurement ---- */

typedef struct { cb_http2_t *c; const char *url; int posted, done, total, ok; } bench_t;
static void bench_post(bench_t *b);
static void on_bench_done(const cb_http2_response_t *r, void *data) {
    bench_t *b = data;
    b->done++;
    if (r->status == 200) b->ok++;
    else if (b->done - b->ok < 5) fprintf(stderr, "bench: status %d %s\n", r->status, r->error ? r->error : "");
    if (b->posted < b->total) bench_post(b);
}
static void bench_post(bench_t *b) {
    const char *h[] = {auth, topic_hdr, "apns-push-type: alert", "apns-priority: 10"};
    CHECK(cb_http2_post(b->c, b->url, h, 4, payload, strlen(payload), 30000, on_bench_done, b) == 0);
    b->posted++;
}

static int bench(char **argv) {
    bench_t b = {.url = argv[2], .total = atoi(argv[6])};
    int conc = atoi(argv[7]);
    CHECK(cb_http2_new(&loop, &b.c) == 0);
    CHECK(cb_http2_set_ca_file(b.c, argv[3]) == 0);
    b.total = 1; /* the connection first, outside the measurement */
    bench_post(&b);
    run_until(&b.done, 1, 5000);
    b = (bench_t){.c = b.c, .url = argv[2], .total = atoi(argv[6])};
    uint64_t t0 = uv_hrtime();
    for (int i = 0; i < conc && b.posted < b.total; i++) bench_post(&b);
    run_until(&b.done, b.total, 600000);
    double s = (double)(uv_hrtime() - t0) / 1e9;
    printf("%d requests, %d in flight: %.0f requests/s, %d answered 200, %llu connection(s)\n", b.total, conc,
           b.total / s, b.ok, (unsigned long long)cb_http2_connects(b.c));
    close_client(b.c);
    return b.ok == b.total ? 0 : 1;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* as the daemon does (cb_signals_watch) */
    uv_loop_init(&loop);
    if (argc == 8 && strcmp(argv[1], "bench") == 0) {
        snprintf(auth, sizeof auth, "authorization: bearer %s", argv[4]);
        snprintf(topic_hdr, sizeof topic_hdr, "apns-topic: %s", argv[5]);
        return bench(argv);
    }
    CHECK(argc == 8);
    snprintf(url_ok, sizeof url_ok, "https://127.0.0.1:%s/3/device/%s", argv[1], token_ok);
    snprintf(url_stall, sizeof url_stall, "https://127.0.0.1:%s/3/device/%s", argv[1], argv[5]);
    snprintf(url_drop, sizeof url_drop, "https://127.0.0.1:%s/3/device/%s", argv[1], argv[6]);
    snprintf(url_goaway, sizeof url_goaway, "https://127.0.0.1:%s/3/device/%s", argv[1], argv[7]);
    snprintf(auth, sizeof auth, "authorization: bearer %s", argv[3]);
    snprintf(topic_hdr, sizeof topic_hdr, "apns-topic: %s", argv[4]);
    test_arguments();
    test_ok_and_reuse(argv[2]);
    test_failures(argv[2]);
    test_lost_connection(argv[2], url_drop, "connection dropped:");
    test_lost_connection(argv[2], url_goaway, "GOAWAY:");
    test_http11();
    test_close_in_flight(argv[2]);
    test_close_from_callback(argv[2]);
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(uv_loop_close(&loop) == 0);
    printf("http2: all checks passed\n");
    return 0;
}
