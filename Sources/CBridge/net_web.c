/* The web app at / of the listener: GET and HEAD of the embedded files, every
 * answer with a strict Content-Security-Policy. A path that is not one of the
 * files stays a 404, as before the app existed. */
#include "net_private.h"
#include "net_web.h"
#include <string.h>

/* Scripts and styles only from here, no inline script, WebSockets back to any
 * host (the page talks to the /rpc of whichever address served it). */
static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws: wss:; manifest-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

static const net_web_asset_t *find_asset(h2o_iovec_t path) {
    if (path.len == 1 && path.base[0] == '/') path = h2o_iovec_init(H2O_STRLIT("/index.html"));
    for (size_t i = 0; i < net_web_assets_count; i++)
        if (h2o_memis(path.base, path.len, net_web_assets[i].path, strlen(net_web_assets[i].path)))
            return &net_web_assets[i];
    return NULL;
}

static void add(h2o_req_t *req, const h2o_token_t *token, const char *value) {
    h2o_add_header(&req->pool, &req->res.headers, token, NULL, value, strlen(value));
}

static void add_named(h2o_req_t *req, const char *name, const char *value) {
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, strlen(name), 0, NULL, value, strlen(value));
}

static int not_modified(h2o_req_t *req, const net_web_asset_t *a) {
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_IF_NONE_MATCH, -1);
    return i >= 0 && h2o_memis(req->headers.entries[i].value.base, req->headers.entries[i].value.len, a->etag,
                               strlen(a->etag));
}

/* The body is static: sent from where it lives, never copied into the pool. */
static void send_asset(h2o_req_t *req, const net_web_asset_t *a, int head) {
    static h2o_generator_t generator = {NULL, NULL};
    int fresh = not_modified(req, a);
    req->res.status = fresh ? 304 : 200;
    req->res.reason = fresh ? "Not Modified" : "OK";
    add(req, H2O_TOKEN_CONTENT_TYPE, a->type);
    add(req, H2O_TOKEN_ETAG, a->etag);
    /* revalidate every time: an upgraded binary serves a new app at the same URLs */
    add(req, H2O_TOKEN_CACHE_CONTROL, "no-cache");
    add_named(req, "content-security-policy", csp);
    add_named(req, "x-content-type-options", "nosniff");
    add_named(req, "referrer-policy", "no-referrer");
    h2o_iovec_t body = h2o_iovec_init(a->body, a->len);
    if (!fresh) req->res.content_length = a->len;
    h2o_start_response(req, &generator);
    h2o_send(req, &body, head || fresh ? 0 : 1, H2O_SEND_STATE_FINAL);
}

static int on_web(h2o_handler_t *self, h2o_req_t *req) {
    cb_net_t *n = net_handler_net(self);
    if (net_http_bad_shape(n, req)) return 0;
    const net_web_asset_t *a = find_asset(req->path_normalized);
    if (!a) {
        static const char body[] = "{\"error\":\"not found: the JSON-RPC WebSocket is at /rpc\"}";
        net_http_send(req, 404, "Not Found", body, sizeof body - 1, 0);
        return 0;
    }
    int head = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
    if (!head && !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET"))) {
        static const char body[] = "{\"error\":\"the web app is read with GET or HEAD\"}";
        add(req, H2O_TOKEN_ALLOW, "GET, HEAD");
        net_http_send(req, 405, "Method Not Allowed", body, sizeof body - 1, 0);
        return 0;
    }
    send_asset(req, a, head);
    return 0;
}

void net_web_route(cb_net_t *n, h2o_hostconf_t *host) { net_http_route(n, host, "/", on_web); }
