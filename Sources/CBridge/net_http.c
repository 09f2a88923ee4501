/* The listener's routes and request rules: /rpc upgrades to a WebSocket,
 * /hooks/claude hands a POST's body to the owner, the rest is the web app's
 * (net_web.c; a 404 for anything that is not one of its files).
 * Every request first passes the shape rules (request smuggling, oversized
 * heads) and, for /rpc, the Origin rule. */
#include "net_private.h"
#include "cb_error.h"
#include <arpa/inet.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* picohttpparser, inside libh2o without a public header. */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len);

typedef struct {
    h2o_handler_t super;
    cb_net_t *n;
} net_handler_t;

void net_http_send(h2o_req_t *req, int status, const char *reason, const char *json, size_t len, int close) {
    req->res.status = status;
    req->res.reason = reason;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
    if (close) req->http1_is_persistent = 0;
    req->res.content_length = len; /* an empty answer is "Content-Length: 0", not chunked */
    h2o_send_inline(req, json, len);
}

int net_http_refuse(cb_net_t *n, h2o_req_t *req, int status, const char *reason, const char *why) {
    char body[256];
    snprintf(body, sizeof body, "{\"error\":\"%s\"}", why);
    n->refused++;
    net_http_send(req, status, reason, body, strlen(body), 1);
    return 0;
}

static int is_named(const struct phr_header *h, const char *name) {
    return h->name_len == strlen(name) && strncasecmp(h->name, name, h->name_len) == 0;
}

/* H2O lets a Transfer-Encoding win over a Content-Length; a request carrying
 * both (or two of either) is refused instead, as is a head over the limit. The
 * head is still at the start of the socket's input while the request runs. */
int net_http_bad_shape(cb_net_t *n, h2o_req_t *req) {
    if (req->version >= 0x200) return 0; /* HTTP/2 frames carry no such ambiguity */
    h2o_socket_t *sock = req->conn->callbacks->get_socket ? req->conn->callbacks->get_socket(req->conn) : NULL;
    if (!sock || !sock->input) return 0;
    const char *method, *path;
    size_t method_len, path_len, nh = H2O_MAX_HEADERS;
    int minor;
    struct phr_header h[H2O_MAX_HEADERS];
    int len = phr_parse_request(sock->input->bytes, sock->input->size, &method, &method_len, &path, &path_len,
                                &minor, h, &nh, 0);
    if (len <= 0) return 0;
    if ((size_t)len > n->max_header_bytes)
        return net_http_refuse(n, req, 400, "Bad Request", "request headers are over the size limit") || 1;
    size_t lengths = 0, encodings = 0;
    for (size_t i = 0; i < nh; i++) {
        lengths += is_named(&h[i], "content-length");
        encodings += is_named(&h[i], "transfer-encoding");
    }
    if ((lengths && encodings) || lengths > 1 || encodings > 1)
        return net_http_refuse(n, req, 400, "Bad Request", "conflicting Content-Length and Transfer-Encoding") || 1;
    return 0;
}

h2o_iovec_t net_http_header(h2o_req_t *req, const char *name) {
    ssize_t i = h2o_find_header_by_str(&req->headers, name, strlen(name), -1);
    return i < 0 ? h2o_iovec_init(NULL, 0) : req->headers.entries[i].value;
}

/* "localhost", an address literal, or the address we are bound to: a name
 * that DNS could point at us (rebinding) is not our own origin. */
static int own_host(cb_net_t *n, const char *host, size_t len) {
    char buf[64];
    if (len == 0 || len >= sizeof buf) return 0;
    memcpy(buf, host, len);
    buf[len] = 0;
    if (buf[0] == '[' && buf[len - 1] == ']') { memmove(buf, buf + 1, len - 2); buf[len - 2] = 0; }
    unsigned char addr[16];
    return strcasecmp(buf, "localhost") == 0 || strcasecmp(buf, n->bind_host) == 0 ||
           inet_pton(AF_INET, buf, addr) == 1 || inet_pton(AF_INET6, buf, addr) == 1;
}

static int origin_allowed(cb_net_t *n, h2o_req_t *req) {
    h2o_iovec_t o = net_http_header(req, "origin");
    if (!o.base) return 1; /* not a browser */
    for (size_t i = 0; i < n->n_origins; i++)
        if (strlen(n->origins[i]) == o.len && strncasecmp(n->origins[i], o.base, o.len) == 0) return 1;
    /* our own: scheme://<Host header>, the host being ours */
    size_t slen = strlen(n->own_origin_scheme);
    h2o_iovec_t a = req->authority;
    if (o.len != slen + 3 + a.len || strncasecmp(o.base, n->own_origin_scheme, slen) != 0 ||
        memcmp(o.base + slen, "://", 3) != 0 || strncasecmp(o.base + slen + 3, a.base, a.len) != 0)
        return 0;
    const char *colon = a.len && a.base[0] == '[' ? memchr(a.base, ']', a.len) : memchr(a.base, ':', a.len);
    size_t host_len = colon ? (size_t)(colon - a.base) + (a.base[0] == '[') : a.len;
    return own_host(n, a.base, host_len);
}

void net_http_peer(h2o_req_t *req, char *out, size_t cap) {
    struct sockaddr_storage ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    snprintf(out, cap, "?");
    if (!req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss)) return;
    if (ss.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        snprintf(out, cap, "[%s]:%d", ip, port);
    } else {
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        snprintf(out, cap, "%s:%d", ip, port);
    }
}

/* ---- /rpc ---- */

typedef struct {
    cb_net_t *n;
    char peer[INET6_ADDRSTRLEN + 10];
    char *bearer;
} net_upgrade_t;

static char *bearer_token(h2o_req_t *req) {
    h2o_iovec_t v = net_http_header(req, "authorization");
    if (v.len <= 7 || strncasecmp(v.base, "bearer ", 7) != 0) return NULL;
    char *t = malloc(v.len - 6);
    if (t) { memcpy(t, v.base + 7, v.len - 7); t[v.len - 7] = 0; }
    return t;
}

static void on_upgraded(void *data, h2o_socket_t *sock, size_t reqsize) {
    net_upgrade_t *u = data;
    cb_net_t *n = u->n;
    if (sock) {
        h2o_buffer_consume(&sock->input, reqsize);
        cb_conn_t *c = n->closing || !n->cbs.on_accept ? NULL : net_ws_open(n->rpc, sock);
        if (!c) {
            h2o_socket_close(sock);
        } else {
            n->accepted++;
            cb_conn_retain(c); /* the owner may refuse (abort) it at once */
            n->cbs.on_accept(n, c, u->peer, u->bearer);
            net_ws_start(c);
            cb_conn_release(c);
        }
    }
    free(u->bearer);
    free(u);
}

static void accept_key(const h2o_iovec_t key, char out[29]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char src[24 + sizeof guid - 1], digest[SHA_DIGEST_LENGTH];
    memcpy(src, key.base, 24);
    memcpy(src + 24, guid, sizeof guid - 1);
    SHA1(src, sizeof src, digest);
    h2o_base64_encode(out, digest, sizeof digest, 0);
    out[28] = 0;
}

static int on_rpc(h2o_handler_t *self, h2o_req_t *req) {
    cb_net_t *n = ((net_handler_t *)self)->n;
    if (net_http_bad_shape(n, req)) return 0;
    if (n->closing) return net_http_refuse(n, req, 503, "Service Unavailable", "shutting down");
    const char *key = NULL;
    if (req->version >= 0x200 || h2o_is_websocket_handshake(req, &key) != 0 || !key)
        return net_http_refuse(n, req, 400, "Bad Request", "expected a WebSocket upgrade (GET /rpc, Upgrade: websocket)");
    if (!origin_allowed(n, req))
        return net_http_refuse(n, req, 403, "Forbidden", "this Origin may not connect (serve --allow-origin adds one)");
    net_upgrade_t *u = calloc(1, sizeof *u);
    if (!u) return net_http_refuse(n, req, 503, "Service Unavailable", "out of memory");
    u->n = n;
    net_http_peer(req, u->peer, sizeof u->peer);
    u->bearer = bearer_token(req);
    char accept[29];
    accept_key(h2o_iovec_init(key, 24), accept);
    req->res.status = 101;
    req->res.reason = "Switching Protocols";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_UPGRADE, NULL, H2O_STRLIT("websocket"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("sec-websocket-accept"), 0, NULL, accept, 28);
    h2o_http1_upgrade(req, NULL, 0, on_upgraded, u);
    return 0;
}

/* ---- configuration ---- */

void net_http_route(cb_net_t *n, h2o_hostconf_t *host, const char *path, int (*on_req)(h2o_handler_t *, h2o_req_t *)) {
    h2o_pathconf_t *pc = h2o_config_register_path(host, path, 0);
    net_handler_t *h = (net_handler_t *)h2o_create_handler(pc, sizeof *h);
    h->super.on_req = on_req;
    h->n = n;
}

static int copy_strings(cb_net_t *n, const cb_net_config_t *cfg) {
    n->bind_host = strdup(cfg->host);
    n->own_origin_scheme = strdup(cfg->tls_cert ? "https" : "http");
    if (!n->bind_host || !n->own_origin_scheme) return CB_ENOMEM;
    if (!cfg->n_origins) return 0;
    if (!(n->origins = calloc(cfg->n_origins, sizeof *n->origins))) return CB_ENOMEM;
    for (; n->n_origins < cfg->n_origins; n->n_origins++)
        if (!(n->origins[n->n_origins] = strdup(cfg->origins[n->n_origins]))) return CB_ENOMEM;
    return 0;
}

void net_http_free(cb_net_t *n) {
    for (size_t i = 0; i < n->n_origins; i++) free(n->origins[i]);
    free(n->origins);
    free(n->bind_host);
    free(n->own_origin_scheme);
}

int net_http_configure(cb_net_t *n, const cb_net_config_t *cfg) {
    h2o_config_init(&n->config);
    n->config.http1.upgrade_to_http2 = 0; /* h2c: not for a WebSocket server */
    n->config.max_request_entity_size = cfg->max_body_bytes ? cfg->max_body_bytes : 1u << 20;
    n->max_header_bytes = cfg->max_header_bytes ? cfg->max_header_bytes : 64u << 10;
    int rc = copy_strings(n, cfg);
    if (rc) return rc;
    h2o_hostconf_t *host = h2o_config_register_host(&n->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    net_http_route(n, host, "/rpc", on_rpc);
    if (cfg->serve_hooks) net_hook_route(n, host);
    net_web_route(n, host);
    return 0;
}

cb_net_t *net_handler_net(h2o_handler_t *self) { return ((net_handler_t *)self)->n; }
