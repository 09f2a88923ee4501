#ifndef CB_NET_PRIVATE_H
#define CB_NET_PRIVATE_H
/* Shared by the network listener (net.c, net_http.c) and its WebSocket
 * transport (net_ws.c). H2O is used in its libuv build, on the daemon's loop. */
#define H2O_USE_LIBUV 1
#include <arpa/inet.h>
#include <h2o.h>
#include <h2o/http1.h>
#include <h2o/websocket.h>
#include <wslay/wslay.h>
#include "cb_net.h"
#include "cb_rpc.h"
#include "conn_private.h"

typedef struct {
    cb_conn_t *c;
    uv_loop_t *loop;
    h2o_socket_t *sock; /* NULL once closed */
    uv_timer_t *linger;     /* bounds a graceful close */
    wslay_event_context_ptr ws;
    cb_buf_t frames;        /* frames serialised by wslay, not yet written */
    char *writing;          /* the write in flight (H2O allows one) */
    size_t writing_payload; /* message bytes it carries (c->inflight) */
    size_t queued_payload;  /* message bytes queued in wslay since */
    unsigned closing : 1, peer_done : 1, eof_sent : 1, in_recv : 1, close_after_recv : 1,
        io_dead : 1; /* the socket failed: nothing more is written */
} net_ws_t;

struct cb_net_s {
    uv_tcp_t tcp; /* the listening handle */
    uv_loop_t *loop;
    cb_rpc_t *rpc;
    cb_net_callbacks_t cbs;
    void *data;
    int port;
    h2o_globalconf_t config;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    SSL_CTX *ssl_ctx;
    char *own_origin_scheme; /* "http" or "https" */
    char **origins;          /* allowed besides our own */
    size_t n_origins;
    char *bind_host;
    size_t max_header_bytes;
    size_t open_peers; /* TCP clients not yet closed */
    uint64_t accepted, refused;
    unsigned closing : 1, listener_closed : 1, tcp_open : 1, started : 1;
};

/* ---- net_http.c: routes and the rules every request passes ---- */
typedef int (*net_route_cb)(h2o_handler_t *self, h2o_req_t *req);
void net_http_route(cb_net_t *n, h2o_hostconf_t *host, const char *path, net_route_cb on_req);
cb_net_t *net_handler_net(h2o_handler_t *self);
/* Refuses a request with a request-smuggling shape or an oversized head
 * (400, connection closed): 1 when it did. */
int net_http_bad_shape(cb_net_t *n, h2o_req_t *req);
/* Answers {"error": why} and closes the connection (counted as refused); 0. */
int net_http_refuse(cb_net_t *n, h2o_req_t *req, int status, const char *reason, const char *why);
void net_http_send(h2o_req_t *req, int status, const char *reason, const char *json, size_t len, int close);
h2o_iovec_t net_http_header(h2o_req_t *req, const char *lowercase_name);
/* "ip:port" or "[ip6]:port" */
void net_http_peer(h2o_req_t *req, char *out, size_t cap);
void net_http_free(cb_net_t *n);
/* net_hook.c: POST /hooks/claude */
void net_hook_route(cb_net_t *n, h2o_hostconf_t *host);
/* net_web.c: the web app, GET/HEAD of everything else */
void net_web_route(cb_net_t *n, h2o_hostconf_t *host);

/* Routes and limits into n->config (h2o_config_init included); 0 or CB_ENOMEM. */
int net_http_configure(cb_net_t *n, const cb_net_config_t *cfg);
/* OpenSSL's reason, for cb_net_error. */
void net_set_error(const char *what, const char *path);

/* A connection of rpc's endpoint over an upgraded socket; NULL when out of
 * memory or the endpoint is closed (the caller closes the socket). */
cb_conn_t *net_ws_open(cb_rpc_t *rpc, h2o_socket_t *sock);
/* Reads, beginning with frames that came with the upgrade request. */
void net_ws_start(cb_conn_t *c);
#endif
