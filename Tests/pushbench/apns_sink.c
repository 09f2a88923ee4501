/* An APNs stand-in for `cb-bench push`: an HTTP/2 (TLS, ALPN h2) server on
 * H2O's libuv build that answers every POST /3/device/<token> with 200 and
 * the request's apns-id, and counts what it saw: requests, TCP connections,
 * distinct authorization values. It timestamps each request on arrival
 * (uv_hrtime: CLOCK_MONOTONIC, the clock cb-bench reads too).
 *
 * Why not nghttpd (nghttp2-server): Debian's nghttp2 1.52 has the rapid-reset
 * limit, and libcurl 7.88 sends RST_STREAM(STREAM_CLOSED) after every
 * completed stream, so nghttpd answers with GOAWAY every ~1,000-2,000 pushes
 * (20 connections for 20,000 requests); and it timestamps only in -v frame
 * dumps, relative to its own start.
 *
 *   apns_sink CERT.pem KEY.pem      prints "PORT\n", then serves until stdin closes.
 *
 * Commands on stdin, one a line; answers on stdout, one a line:
 *   watch        from now on print "R <arrival ns>" for each request
 *   quiet        stop that
 *   mark         start a window: its count and first/last arrival restart
 *   wait N       "W <count> <first ns> <last ns>" once the window has N requests
 *   stats        "S <requests> <connections> <distinct authorization values> <h2 requests> <non-POST or bad path>"
 *   sample       the last request: "H <n>", n lines "name: value", "B <body in hex>" */
#define H2O_USE_LIBUV 1
#include <h2o.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static h2o_globalconf_t config;
static h2o_context_t ctx;
static h2o_accept_ctx_t accept_ctx;

static uint64_t requests, connections, h2_requests, bad;
static int watching;
static uint64_t window_count, window_first, window_last, wait_for;
#define MAX_AUTH 64
static char *auths[MAX_AUTH];
static size_t n_auth;
static char sample_headers[16384];
static size_t sample_headers_len;
static int sample_n;
static char sample_body[8192];
static size_t sample_body_len;

static void say(const char *s, size_t len) {
    while (len > 0) {
        ssize_t n = write(1, s, len);
        if (n <= 0) exit(0);
        s += n;
        len -= (size_t)n;
    }
}

static void say_window(void) {
    char line[128];
    int n = snprintf(line, sizeof line, "W %llu %llu %llu\n", (unsigned long long)window_count,
                     (unsigned long long)window_first, (unsigned long long)window_last);
    say(line, (size_t)n);
    wait_for = 0;
}

static void note_auth(h2o_iovec_t v) {
    for (size_t i = 0; i < n_auth; i++)
        if (strlen(auths[i]) == v.len && memcmp(auths[i], v.base, v.len) == 0) return;
    if (n_auth < MAX_AUTH) auths[n_auth++] = strndup(v.base, v.len);
    else n_auth++; /* more than we keep: still counted */
}

static void keep_sample(h2o_req_t *req) {
    sample_headers_len = 0;
    sample_n = 0;
    for (size_t i = 0; i < req->headers.size; i++) {
        h2o_header_t *h = req->headers.entries + i;
        size_t need = h->name->len + 2 + h->value.len + 1;
        if (sample_headers_len + need >= sizeof sample_headers) break;
        char *p = sample_headers + sample_headers_len;
        memcpy(p, h->name->base, h->name->len);
        p += h->name->len;
        *p++ = ':';
        *p++ = ' ';
        memcpy(p, h->value.base, h->value.len);
        p += h->value.len;
        *p++ = '\n';
        sample_headers_len += need;
        sample_n++;
    }
    sample_body_len = req->entity.len < sizeof sample_body ? req->entity.len : sizeof sample_body;
    if (req->entity.base) memcpy(sample_body, req->entity.base, sample_body_len);
}

static int on_req(h2o_handler_t *self, h2o_req_t *req) {
    (void)self;
    uint64_t now = uv_hrtime();
    requests++;
    if (req->version >= 0x200) h2_requests++;
    window_count++;
    if (window_count == 1) window_first = now;
    window_last = now;
    if (watching) {
        char line[64];
        int n = snprintf(line, sizeof line, "R %llu\n", (unsigned long long)now);
        say(line, (size_t)n);
    }
    ssize_t a = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    if (a >= 0) note_auth(req->headers.entries[a].value);
    keep_sample(req);
    int ok = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")) && req->path.len > 10 &&
             memcmp(req->path.base, "/3/device/", 10) == 0;
    if (!ok) bad++;
    req->res.status = ok ? 200 : 404;
    req->res.reason = ok ? "OK" : "Not Found";
    ssize_t id = h2o_find_header_by_str(&req->headers, H2O_STRLIT("apns-id"), -1);
    if (id >= 0) {
        h2o_iovec_t v = req->headers.entries[id].value;
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("apns-id"), 0, NULL, v.base, v.len);
    }
    h2o_send_inline(req, ok ? "" : "{\"reason\":\"BadPath\"}", ok ? 0 : 20);
    if (wait_for && window_count >= wait_for) say_window();
    return 0;
}

static void on_connect(uv_stream_t *server, int status) {
    if (status != 0) return;
    uv_tcp_t *conn = h2o_mem_alloc(sizeof *conn);
    uv_tcp_init(server->loop, conn);
    if (uv_accept(server, (uv_stream_t *)conn) != 0) {
        uv_close((uv_handle_t *)conn, (uv_close_cb)free);
        return;
    }
    connections++;
    uv_tcp_nodelay(conn, 1);
    h2o_accept(&accept_ctx, h2o_uv_socket_create((uv_stream_t *)conn, (uv_close_cb)free));
}

static void command(char *line) {
    char out[128];
    if (strcmp(line, "watch") == 0) {
        watching = 1;
    } else if (strcmp(line, "quiet") == 0) {
        watching = 0;
    } else if (strcmp(line, "mark") == 0) {
        window_count = window_first = window_last = 0;
    } else if (strncmp(line, "wait ", 5) == 0) {
        wait_for = strtoull(line + 5, NULL, 10);
        if (wait_for == 0) wait_for = 1;
        if (window_count >= wait_for) say_window();
    } else if (strcmp(line, "stats") == 0) {
        int n = snprintf(out, sizeof out, "S %llu %llu %zu %llu %llu\n", (unsigned long long)requests,
                         (unsigned long long)connections, n_auth, (unsigned long long)h2_requests,
                         (unsigned long long)bad);
        say(out, (size_t)n);
    } else if (strcmp(line, "sample") == 0) {
        int n = snprintf(out, sizeof out, "H %d\n", sample_n);
        say(out, (size_t)n);
        say(sample_headers, sample_headers_len);
        char *hex = malloc(sample_body_len * 2 + 4);
        hex[0] = 'B';
        hex[1] = ' ';
        for (size_t i = 0; i < sample_body_len; i++) sprintf(hex + 2 + 2 * i, "%02x", (unsigned char)sample_body[i]);
        hex[2 + 2 * sample_body_len] = '\n';
        say(hex, 3 + 2 * sample_body_len);
        free(hex);
    }
}

static char inbuf[4096];
static size_t inlen;

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(inbuf + inlen, (unsigned)(sizeof inbuf - inlen));
}

static void on_stdin(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    (void)s;
    (void)buf;
    if (n < 0) exit(0); /* EOF: cb-bench is done */
    inlen += (size_t)n;
    char *nl;
    while ((nl = memchr(inbuf, '\n', inlen)) != NULL) {
        *nl = 0;
        command(inbuf);
        size_t used = (size_t)(nl - inbuf) + 1;
        memmove(inbuf, nl + 1, inlen - used);
        inlen -= used;
    }
    if (inlen == sizeof inbuf) inlen = 0; /* a line too long: dropped */
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: apns_sink CERT.pem KEY.pem\n");
        return 2;
    }
    uv_loop_t *loop = uv_default_loop();
    SSL_CTX *ssl = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(ssl, TLS1_2_VERSION);
    SSL_CTX_set_options(ssl, SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_use_certificate_chain_file(ssl, argv[1]) != 1 ||
        SSL_CTX_use_PrivateKey_file(ssl, argv[2], SSL_FILETYPE_PEM) != 1) {
        fprintf(stderr, "apns_sink: cannot load %s / %s\n", argv[1], argv[2]);
        return 1;
    }
    h2o_ssl_register_alpn_protocols(ssl, h2o_http2_alpn_protocols);

    uv_tcp_t listener;
    struct sockaddr_in addr;
    uv_tcp_init(loop, &listener);
    uv_ip4_addr("127.0.0.1", 0, &addr);
    int r = uv_tcp_bind(&listener, (struct sockaddr *)&addr, 0);
    if (r == 0) r = uv_listen((uv_stream_t *)&listener, 128, on_connect);
    if (r != 0) {
        fprintf(stderr, "apns_sink: %s\n", uv_strerror(r));
        return 1;
    }
    int len = sizeof addr;
    uv_tcp_getsockname(&listener, (struct sockaddr *)&addr, &len);

    h2o_config_init(&config);
    config.http2.max_concurrent_requests_per_connection = 1000;
    h2o_hostconf_t *host = h2o_config_register_host(&config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_create_handler(h2o_config_register_path(host, "/", 0), sizeof(h2o_handler_t))->on_req = on_req;
    h2o_context_init(&ctx, loop, &config);
    accept_ctx.ctx = &ctx;
    accept_ctx.hosts = config.hosts;
    accept_ctx.ssl_ctx = ssl;

    uv_pipe_t in;
    uv_pipe_init(loop, &in, 0);
    uv_pipe_open(&in, 0);
    uv_read_start((uv_stream_t *)&in, on_alloc, on_stdin);

    char line[32];
    int n = snprintf(line, sizeof line, "%d\n", ntohs(addr.sin_port));
    say(line, (size_t)n);
    return uv_run(loop, UV_RUN_DEFAULT);
}
