/* Load for `cb-bench ws`: many WebSocket clients on one libuv loop (wslay
 * frames them; H2O's picohttpparser reads the upgrade response), or
 * sequential Claude Code http hook POSTs on one keep-alive connection.
 * Prints one JSON line of figures.
 *
 *   cb-ws-load ws PORT [--clients N] [--depth D] [--messages M] [--token T] [--init]
 *       N clients each send M pings keeping D in flight; --init sends an
 *       initialize (with --token as auth, notifications off) first and only
 *       times what follows. Any text message is counted as the reply.
 *   --probe K instead of --messages: after all N are connected, K pings one
 *       at a time, round-robin over the clients (latency with N connected).
 *   cb-ws-load hook PORT --token T --body FILE [--requests N]
 */
#include <uv.h>
#include <wslay/wslay.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
int phr_parse_response(const char *buf, size_t len, int *minor_version, int *status, const char **msg,
                       size_t *msg_len, struct phr_header *headers, size_t *num_headers, size_t last_len);

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void print_figures(size_t clients, uint32_t *lat, size_t n, double seconds) {
    qsort(lat, n, sizeof *lat, cmp_u32);
    printf("{\"clients\":%zu,\"messages\":%zu,\"seconds\":%.4f,\"rate\":%.0f,\"p50_us\":%u,\"p99_us\":%u,\"max_us\":%u}\n",
           clients, n, seconds, n / seconds, n ? lat[n / 2] : 0, n ? lat[(size_t)(n * 0.99)] : 0, n ? lat[n - 1] : 0);
}

/* ---- WebSocket clients ---- */

typedef struct {
    uv_tcp_t tcp;
    uv_connect_t creq;
    wslay_event_context_ptr ws;
    char in[1 << 16];
    size_t in_len, in_off;
    int upgraded, ready;
    size_t sent, got;
    uint64_t *sent_at; /* ring of depth */
    char out[1 << 16];
    size_t out_len;
} client_t;

static struct {
    int port, depth, init;
    size_t clients, messages, ready, done, probe, probed, connecting;
    const char *token;
    client_t *c;
    uint32_t *lat;
    size_t nlat;
    uint64_t start;
} L = {.depth = 1, .clients = 1, .messages = 1000};

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *data) {
    (void)flags;
    client_t *c = data;
    size_t have = c->in_len - c->in_off;
    if (!have) { wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK); return -1; }
    if (len > have) len = have;
    memcpy(buf, c->in + c->in_off, len);
    c->in_off += len;
    return (ssize_t)len;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *arg) {
    (void)flags;
    client_t *c = arg;
    if (c->out_len + len > sizeof c->out) { wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK); return -1; }
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
    return (ssize_t)len;
}

static int mask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *data) {
    (void)ctx; (void)data;
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)rand();
    return 0;
}

static void on_written(uv_write_t *w, int status) { (void)status; free(w); }

static void flush(client_t *c) {
    while (wslay_event_want_write(c->ws)) {
        wslay_event_send(c->ws);
        if (!c->out_len) break;
        uv_write_t *w = malloc(sizeof *w + c->out_len);
        memcpy((char *)(w + 1), c->out, c->out_len);
        uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)c->out_len);
        uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
        c->out_len = 0;
    }
}

static void send_text(client_t *c, const char *text) {
    struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)text, strlen(text)};
    wslay_event_queue_msg(c->ws, &m);
}

static void send_ping(client_t *c) {
    char msg[96];
    snprintf(msg, sizeof msg, "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"ping\"}", c->sent + 1);
    c->sent_at[c->sent % (size_t)L.depth] = now_ns();
    c->sent++;
    send_text(c, msg);
}

static client_t *probe_next(void) { return &L.c[(L.probed * 7919) % L.clients]; }

static void start_all(void) {
    L.start = now_ns();
    if (L.probe) {
        client_t *c = probe_next();
        send_ping(c);
        return flush(c);
    }
    for (size_t i = 0; i < L.clients; i++) {
        client_t *c = &L.c[i];
        while (c->sent < L.messages && c->sent - c->got < (size_t)L.depth) send_ping(c);
        flush(c);
    }
}

static void connect_next(void);

/* Handshakes are kept to a window: the daemon drops clients beyond 256
 * unauthenticated ones from one host. */
#define HANDSHAKE_WINDOW 128

static void became_ready(client_t *c) {
    c->ready = 1;
    connect_next();
    if (++L.ready == L.clients) start_all();
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *m, void *data) {
    (void)ctx;
    client_t *c = data;
    if (m->opcode != WSLAY_TEXT_FRAME) return;
    if (!c->ready) return became_ready(c);
    uint64_t t = c->sent_at[c->got % (size_t)L.depth];
    L.lat[L.nlat++] = (uint32_t)((now_ns() - t) / 1000);
    c->got++;
    if (L.probe) {
        if (++L.probed == L.probe) return uv_stop(c->tcp.loop);
        client_t *next = probe_next();
        send_ping(next);
        return flush(next);
    }
    if (c->sent < L.messages) send_ping(c);
    if (c->got == L.messages && ++L.done == L.clients) uv_stop(c->tcp.loop);
}

static void on_alloc(uv_handle_t *h, size_t s, uv_buf_t *b) {
    (void)s;
    client_t *c = h->data;
    if (c->in_off == c->in_len) c->in_off = c->in_len = 0;
    *b = uv_buf_init(c->in + c->in_len, (unsigned)(sizeof c->in - c->in_len));
}

static void upgrade(client_t *c) {
    int minor, status;
    const char *msg;
    size_t msg_len, nh = 32;
    struct phr_header h[32];
    int n = phr_parse_response(c->in, c->in_len, &minor, &status, &msg, &msg_len, h, &nh, 0);
    if (n == -2) return;
    if (n < 0 || status != 101) { fprintf(stderr, "cb-ws-load: upgrade refused (status %d)\n", status); exit(1); }
    c->upgraded = 1;
    c->in_off = (size_t)n;
    if (!L.init) return became_ready(c);
    char init[512];
    snprintf(init, sizeof init, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"capabilities\":{\"notifications\":false}%s%s%s}}",
             L.token ? ",\"auth\":{\"token\":\"" : "", L.token ? L.token : "", L.token ? "\"}" : "");
    send_text(c, init);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
    (void)b;
    client_t *c = s->data;
    if (n < 0) { fprintf(stderr, "cb-ws-load: connection lost (%s)\n", uv_strerror((int)n)); exit(1); }
    c->in_len += (size_t)n;
    if (!c->upgraded) upgrade(c);
    if (c->upgraded) wslay_event_recv(c->ws);
    flush(c);
}

static void on_connect(uv_connect_t *req, int status) {
    client_t *c = req->data;
    if (status < 0) { fprintf(stderr, "cb-ws-load: connect: %s\n", uv_strerror(status)); exit(1); }
    char head[512];
    int n = snprintf(head, sizeof head,
                     "GET /rpc HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", L.port);
    uv_write_t *w = malloc(sizeof *w + (size_t)n);
    memcpy((char *)(w + 1), head, (size_t)n);
    uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)n);
    uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void connect_next(void) {
    if (L.connecting == L.clients) return;
    client_t *c = &L.c[L.connecting++];
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", L.port, &a);
    uv_tcp_init(uv_default_loop(), &c->tcp);
    uv_tcp_nodelay(&c->tcp, 1);
    c->tcp.data = c;
    c->creq.data = c;
    uv_tcp_connect(&c->creq, &c->tcp, (struct sockaddr *)&a, on_connect);
}

static int run_ws(void) {
    static const struct wslay_event_callbacks cbs = {.recv_callback = recv_cb, .send_callback = send_cb,
                                                     .genmask_callback = mask_cb, .on_msg_recv_callback = on_msg};
    uv_loop_t *loop = uv_default_loop();
    L.c = calloc(L.clients, sizeof *L.c);
    L.lat = malloc((L.probe ? L.probe : L.clients * L.messages) * sizeof *L.lat);
    for (size_t i = 0; i < L.clients; i++) {
        client_t *c = &L.c[i];
        c->sent_at = calloc((size_t)L.depth, sizeof *c->sent_at);
        wslay_event_context_client_init(&c->ws, &cbs, c);
    }
    for (size_t i = 0; i < HANDSHAKE_WINDOW; i++) connect_next();
    uv_run(loop, UV_RUN_DEFAULT);
    print_figures(L.clients, L.lat, L.nlat, (now_ns() - L.start) / 1e9);
    return 0;
}

/* ---- http hooks ---- */

static int run_hook(const char *token, const char *body_path, size_t requests) {
    FILE *f = fopen(body_path, "rb");
    if (!f) { perror(body_path); return 1; }
    char body[1 << 16];
    size_t blen = fread(body, 1, sizeof body, f);
    fclose(f);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", L.port, &a);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 1; }
    char req[1 << 17], in[1 << 16];
    int n = snprintf(req, sizeof req, "POST /hooks/claude HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", token, blen);
    memcpy(req + n, body, blen);
    uint32_t *lat = malloc(requests * sizeof *lat);
    uint64_t start = now_ns();
    for (size_t i = 0; i < requests; i++) {
        uint64_t t = now_ns();
        if (write(fd, req, (size_t)n + blen) < 0) { perror("write"); return 1; }
        size_t have = 0;
        for (;;) {
            ssize_t r = read(fd, in + have, sizeof in - have);
            if (r <= 0) { fprintf(stderr, "cb-ws-load: hook connection closed\n"); return 1; }
            have += (size_t)r;
            int minor, status;
            const char *msg;
            size_t msg_len, nh = 32, clen = 0;
            struct phr_header h[32];
            int hl = phr_parse_response(in, have, &minor, &status, &msg, &msg_len, h, &nh, 0);
            if (hl == -2) continue;
            if (hl < 0 || status != 200) { fprintf(stderr, "cb-ws-load: hook answered %d\n", status); return 1; }
            for (size_t k = 0; k < nh; k++)
                if (h[k].name_len == 14 && strncasecmp(h[k].name, "content-length", 14) == 0) clen = strtoul(h[k].value, NULL, 10);
            if (have >= (size_t)hl + clen) break;
        }
        lat[i] = (uint32_t)((now_ns() - t) / 1000);
    }
    print_figures(1, lat, requests, (now_ns() - start) / 1e9);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: cb-ws-load ws|hook PORT [options] (see the source's header)\n");
        return 2;
    }
    L.port = atoi(argv[2]);
    const char *body = NULL;
    size_t requests = 1000;
    for (int i = 3; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--init")) { L.init = 1; continue; }
        if (!v) { fprintf(stderr, "cb-ws-load: %s needs a value\n", o); return 2; }
        i++;
        if (!strcmp(o, "--clients")) L.clients = strtoul(v, NULL, 10);
        else if (!strcmp(o, "--depth")) L.depth = atoi(v);
        else if (!strcmp(o, "--messages")) L.messages = strtoul(v, NULL, 10);
        else if (!strcmp(o, "--probe")) L.probe = strtoul(v, NULL, 10);
        else if (!strcmp(o, "--token")) L.token = v;
        else if (!strcmp(o, "--body")) body = v;
        else if (!strcmp(o, "--requests")) requests = strtoul(v, NULL, 10);
        else { fprintf(stderr, "cb-ws-load: unknown option %s\n", o); return 2; }
    }
    if (L.depth < 1 || !L.clients || !L.messages) { fprintf(stderr, "cb-ws-load: counts must be positive\n"); return 2; }
    if (!strcmp(argv[1], "hook")) return body && L.token ? run_hook(L.token, body, requests) : 2;
    return run_ws();
}
