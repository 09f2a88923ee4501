#ifndef CB_NET_H
#define CB_NET_H
/* The network listener: HTTP/1.1 (and HTTP/2 over TLS) from H2O's libuv
 * build, on the daemon's loop. It serves
 *   /rpc            JSON-RPC over WebSocket text frames: every upgraded client
 *                   becomes a cb_conn_t of the endpoint (CB_TRANSPORT_WEBSOCKET),
 *                   served like a unix-socket client;
 *   /hooks/claude   Claude Code http hooks (POST, when enabled), answered by
 *                   the owner through cb_hook_req_respond, now or later;
 *   /               the web app (GET/HEAD of files compiled in from web/);
 *                   any other path is a 404.
 * It decides nothing about who may do what: it checks the request's shape
 * (a WebSocket upgrade, the Origin rule, header size, a Content-Length
 * beside a Transfer-Encoding) and hands the peer's address and its
 * Authorization header to the owner. */
#include <stddef.h>
#include <stdint.h>
#include "cb_conn.h"
#include "cb_rpc.h"

typedef struct cb_net_s cb_net_t;
typedef struct cb_hook_req_s cb_hook_req_t;

typedef struct {
    const char *host;     /* an address to bind: "127.0.0.1", "::1", "0.0.0.0", "192.0.2.4" */
    int port;             /* 0: a free port (cb_net_port tells which) */
    const char *tls_cert; /* PEM files; both NULL: plain text */
    const char *tls_key;
    /* Origins a browser may connect from besides the listener's own
     * ("https://app.example"); a request without Origin is not a browser's. */
    const char *const *origins;
    size_t n_origins;
    int serve_hooks;         /* POST /hooks/claude */
    size_t max_header_bytes; /* request head; 0: 64 KiB */
    size_t max_body_bytes;   /* hook bodies; 0: 1 MiB */
} cb_net_config_t;

typedef struct {
    /* A WebSocket client on /rpc: conn belongs to the callee (cb_conn_release
     * when done with it); reading starts after the call. peer is "ip:port",
     * bearer the token of an Authorization: Bearer header or NULL (both
     * borrowed for the call). */
    void (*on_accept)(cb_net_t *n, cb_conn_t *conn, const char *peer, const char *bearer);
    /* A hook request: exactly one cb_hook_req_respond must follow, unless
     * on_hook_gone comes first. body, authorization (the whole header value
     * or NULL), timeout (an X-CodingBridge-Timeout header, else the URL's
     * ?timeout=, else NULL) and peer are borrowed for the call. */
    void (*on_hook)(cb_net_t *n, cb_hook_req_t *r, const char *body, size_t len, const char *authorization,
                    const char *timeout, const char *peer);
    /* The hook's client went away before its answer: r is invalid from now on. */
    void (*on_hook_gone)(cb_net_t *n, cb_hook_req_t *r);
} cb_net_callbacks_t;

/* Binds and listens. Errors: a libuv code from bind/listen (UV_EADDRINUSE,
 * UV_EADDRNOTAVAIL, UV_EACCES, UV_EINVAL for a host that is not an address),
 * CB_EINVAL when the TLS certificate or key cannot be loaded (cb_net_error
 * says why), CB_ENOMEM. The listener holds a reference to rpc until closed. */
int cb_net_listen(cb_rpc_t *rpc, const cb_net_config_t *cfg, const cb_net_callbacks_t *cbs, void *data,
                  cb_net_t **out);
/* Why the last cb_net_listen failed, for a person (TLS errors). */
const char *cb_net_error(void);
int cb_net_port(const cb_net_t *n);
void *cb_net_data(const cb_net_t *n);
void cb_net_set_data(cb_net_t *n, void *data);
/* Upgrades accepted; requests refused (bad shape, foreign Origin). */
uint64_t cb_net_accepted(const cb_net_t *n);
uint64_t cb_net_refused(const cb_net_t *n);
/* Stops accepting; HTTP connections still open finish on their own, and the
 * memory goes after the last of them. WebSocket connections are the
 * endpoint's and are not touched. */
void cb_net_close(cb_net_t *n);

/* Answers a hook request with a JSON body (status 200, 400, 401, ...) and
 * consumes r. */
void cb_hook_req_respond(cb_hook_req_t *r, int status, const char *json, size_t len);
void *cb_hook_req_data(const cb_hook_req_t *r);
void cb_hook_req_set_data(cb_hook_req_t *r, void *data);

/* TLS material. Creates a self-signed certificate (EC P-256, ten years,
 * subjectAltName for localhost and the loopback addresses plus `host`) and
 * its key (0600) unless both files exist. 0 or CB_EINVAL (cb_net_error). */
int cb_tls_ensure_self_signed(const char *cert_path, const char *key_path, const char *host);
/* The SHA-256 of the certificate's DER, as 64 hex digits plus NUL. */
int cb_tls_cert_sha256(const char *cert_path, char out[65]);
#endif
