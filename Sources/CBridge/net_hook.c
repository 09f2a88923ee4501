/* POST /hooks/claude: a Claude Code http hook. The body goes to the owner,
 * whose answer may come much later (a PermissionRequest waits for a person).
 * H2O stops reading a connection while its request is being answered, so a
 * client that gives up would only be noticed at the answer: a timer peeks at
 * the socket meanwhile, and a closed one is reported as gone at once. */
#include "net_private.h"
#include "cb_error.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define NET_HOOK_PEEK_MS 200

struct cb_hook_req_s {
    cb_net_t *n;
    h2o_req_t *req;
    void *data;
    uv_timer_t *peek; /* NULL once stopped */
    unsigned answered : 1, gone : 1;
};

void *cb_hook_req_data(const cb_hook_req_t *r) { return r->data; }
void cb_hook_req_set_data(cb_hook_req_t *r, void *data) { r->data = data; }

static void on_timer_closed(uv_handle_t *h) { free(h); }

static void stop_peek(cb_hook_req_t *r) {
    if (!r->peek) return;
    uv_timer_stop(r->peek);
    uv_close((uv_handle_t *)r->peek, on_timer_closed);
    r->peek = NULL;
}

static void report_gone(cb_hook_req_t *r) {
    if (r->answered || r->gone) return;
    r->gone = 1;
    stop_peek(r);
    /* also while closing: the owner still holds r */
    if (r->n->cbs.on_hook_gone) r->n->cbs.on_hook_gone(r->n, r);
}

/* The request's memory pool is going: the answer was sent, or the
 * connection closed under it. */
static void on_dispose(void *p) { report_gone(p); }

static void on_peek(uv_timer_t *t) {
    cb_hook_req_t *r = t->data;
    h2o_socket_t *sock = r->req->conn->callbacks->get_socket(r->req->conn);
    int fd = sock ? h2o_socket_get_fd(sock) : -1;
    char byte;
    ssize_t got = fd < 0 ? 0 : recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return;
    h2o_req_t *req = r->req;
    report_gone(r);
    /* finish the request so H2O closes the dead connection */
    net_http_send(req, 503, "Service Unavailable", "{}", 2, 1);
}

void cb_hook_req_respond(cb_hook_req_t *r, int status, const char *json, size_t len) {
    if (r->answered || r->gone) return;
    r->answered = 1;
    stop_peek(r);
    const char *reason = status == 200 ? "OK" : status == 400 ? "Bad Request" : status == 401 ? "Unauthorized" : "Error";
    net_http_send(r->req, status, reason, json, len, 0);
}

/* A copy in the request's pool, NUL-terminated; NULL for NULL. */
static char *pool_strdup(h2o_req_t *req, const char *s, size_t len) {
    if (!s) return NULL;
    char *p = h2o_mem_alloc_pool(&req->pool, len + 1);
    memcpy(p, s, len);
    p[len] = 0;
    return p;
}

/* X-CodingBridge-Timeout, else ?timeout= (Claude Code's settings can set a
 * header or the URL). */
static char *hook_timeout(h2o_req_t *req) {
    h2o_iovec_t h = net_http_header(req, "x-codingbridge-timeout");
    if (h.base) return pool_strdup(req, h.base, h.len);
    if (req->query_at == SIZE_MAX) return NULL;
    const char *q = req->path.base + req->query_at + 1, *end = req->path.base + req->path.len;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        if (stop - q >= 8 && memcmp(q, "timeout=", 8) == 0) return pool_strdup(req, q + 8, (size_t)(stop - q - 8));
        q = stop + 1;
    }
    return NULL;
}

static int on_hook(h2o_handler_t *self, h2o_req_t *req) {
    cb_net_t *n = net_handler_net(self);
    if (net_http_bad_shape(n, req)) return 0;
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")))
        return net_http_refuse(n, req, 405, "Method Not Allowed", "POST the hook input JSON");
    if (n->closing || !n->cbs.on_hook) return net_http_refuse(n, req, 503, "Service Unavailable", "shutting down");
    cb_hook_req_t *r = h2o_mem_alloc_shared(&req->pool, sizeof *r, on_dispose);
    memset(r, 0, sizeof *r);
    r->n = n;
    r->req = req;
    if ((r->peek = malloc(sizeof *r->peek))) {
        uv_timer_init(n->loop, r->peek);
        r->peek->data = r;
        uv_timer_start(r->peek, on_peek, NET_HOOK_PEEK_MS, NET_HOOK_PEEK_MS);
    }
    char peer[INET6_ADDRSTRLEN + 10];
    net_http_peer(req, peer, sizeof peer);
    h2o_iovec_t auth = net_http_header(req, "authorization");
    /* the body NUL-terminated for the owner's JSON parser */
    char *body = pool_strdup(req, req->entity.base ? req->entity.base : "", req->entity.len);
    n->cbs.on_hook(n, r, body, req->entity.len, pool_strdup(req, auth.base, auth.len), hook_timeout(req), peer);
    return 0;
}

void net_hook_route(cb_net_t *n, h2o_hostconf_t *host) { net_http_route(n, host, "/hooks/claude", on_hook); }
