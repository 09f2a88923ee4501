/* The network listener: a libuv TCP server whose clients H2O serves (HTTP/1.1,
 * and HTTP/2 when TLS negotiates it). Routes and request rules are in
 * net_http.c, the WebSocket transport in net_ws.c, certificates in net_tls.c. */
#include "net_private.h"
#include "cb_error.h"
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char last_error[256];

const char *cb_net_error(void) { return last_error; }

void net_set_error(const char *what, const char *path) {
    unsigned long e = ERR_get_error();
    char detail[160] = "";
    if (e) ERR_error_string_n(e, detail, sizeof detail);
    snprintf(last_error, sizeof last_error, "%s%s%s%s%s", what, path ? " " : "", path ? path : "",
             *detail ? ": " : "", detail);
    ERR_clear_error();
}

int cb_net_port(const cb_net_t *n) { return n->port; }
void *cb_net_data(const cb_net_t *n) { return n->data; }
void cb_net_set_data(cb_net_t *n, void *data) { n->data = data; }
uint64_t cb_net_accepted(const cb_net_t *n) { return n->accepted; }
uint64_t cb_net_refused(const cb_net_t *n) { return n->refused; }

/* ---- teardown: after the listening handle and the last client are closed ---- */

static void on_reaper_closed(uv_handle_t *h) { free(h); }

/* H2O closes its timers with uv_close: the memory they live in (n->ctx) may
 * go only once their close has run, which is done by the next idle phase. */
static void on_reap(uv_idle_t *h) {
    cb_net_t *n = h->data;
    uv_idle_stop(h);
    uv_close((uv_handle_t *)h, on_reaper_closed);
    free(n);
}

/* What cb_net_listen set up before any client: routes, TLS. */
static void free_config(cb_net_t *n) {
    h2o_config_dispose(&n->config);
    net_http_free(n);
    if (n->ssl_ctx) SSL_CTX_free(n->ssl_ctx);
}

static void maybe_dispose(cb_net_t *n) {
    if (!n->closing || n->open_peers || !n->listener_closed) return;
    /* H2O's libuv build runs the loop once inside (uv_run NOWAIT), which
     * clears a uv_stop() the owner made meanwhile: make it again. */
    unsigned stopping = n->loop->stop_flag;
    h2o_context_dispose(&n->ctx);
    if (stopping) uv_stop(n->loop);
    free_config(n);
    cb_rpc_release(n->rpc);
    uv_idle_t *reaper = malloc(sizeof *reaper);
    if (!reaper) return; /* the context's memory is left rather than freed too early */
    uv_idle_init(n->loop, reaper);
    reaper->data = n;
    uv_idle_start(reaper, on_reap);
}

static void on_listener_closed(uv_handle_t *h) {
    cb_net_t *n = h->data;
    if (!n->started) { free(n); return; }
    n->listener_closed = 1;
    maybe_dispose(n);
}

void cb_net_close(cb_net_t *n) {
    if (!n || n->closing) return;
    n->closing = 1;
    n->data = NULL;
    uv_close((uv_handle_t *)&n->tcp, on_listener_closed);
}

/* ---- clients ---- */

typedef struct {
    uv_tcp_t tcp; /* first: H2O's close callback gets this handle */
    cb_net_t *n;
} net_peer_t;

static void on_peer_closed(uv_handle_t *h) {
    net_peer_t *p = (net_peer_t *)h;
    cb_net_t *n = p->n;
    free(p);
    n->open_peers--;
    maybe_dispose(n);
}

static void on_connection(uv_stream_t *server, int status) {
    cb_net_t *n = server->data;
    if (status < 0 || n->closing) return;
    net_peer_t *p = malloc(sizeof *p);
    if (!p) return;
    p->n = n;
    uv_tcp_init(n->loop, &p->tcp);
    n->open_peers++;
    if (uv_accept(server, (uv_stream_t *)&p->tcp) != 0) {
        uv_close((uv_handle_t *)&p->tcp, on_peer_closed);
        return;
    }
    uv_tcp_nodelay(&p->tcp, 1);
    h2o_socket_t *sock = h2o_uv_socket_create((uv_stream_t *)&p->tcp, on_peer_closed);
    h2o_accept(&n->accept_ctx, sock);
}

/* ---- setup ---- */

static int bind_listen(cb_net_t *n, const cb_net_config_t *cfg) {
    struct sockaddr_storage sa;
    if (uv_ip4_addr(cfg->host, cfg->port, (struct sockaddr_in *)&sa) != 0 &&
        uv_ip6_addr(cfg->host, cfg->port, (struct sockaddr_in6 *)&sa) != 0)
        return UV_EINVAL;
    int rc = uv_tcp_init(n->loop, &n->tcp);
    if (rc) return rc;
    n->tcp_open = 1;
    n->tcp.data = n;
    if ((rc = uv_tcp_bind(&n->tcp, (struct sockaddr *)&sa, 0)) == 0 &&
        (rc = uv_listen((uv_stream_t *)&n->tcp, 1024, on_connection)) == 0) {
        int len = sizeof sa;
        uv_tcp_getsockname(&n->tcp, (struct sockaddr *)&sa, &len);
        n->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                 : ((struct sockaddr_in *)&sa)->sin_port);
        return 0;
    }
    return rc;
}

static int setup_tls(cb_net_t *n, const cb_net_config_t *cfg) {
    if (!cfg->tls_cert && !cfg->tls_key) return 0;
    if (!cfg->tls_cert || !cfg->tls_key) return net_set_error("TLS needs both a certificate and a key", NULL), CB_EINVAL;
    if (!(n->ssl_ctx = SSL_CTX_new(TLS_server_method()))) return CB_ENOMEM;
    SSL_CTX_set_min_proto_version(n->ssl_ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(n->ssl_ctx, SSL_OP_NO_RENEGOTIATION); /* H2O 2.2 cannot serve one */
    if (SSL_CTX_use_certificate_chain_file(n->ssl_ctx, cfg->tls_cert) != 1)
        return net_set_error("cannot load the TLS certificate", cfg->tls_cert), CB_EINVAL;
    if (SSL_CTX_use_PrivateKey_file(n->ssl_ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1)
        return net_set_error("cannot load the TLS key", cfg->tls_key), CB_EINVAL;
    if (SSL_CTX_check_private_key(n->ssl_ctx) != 1)
        return net_set_error("the TLS key does not match the certificate", cfg->tls_key), CB_EINVAL;
    h2o_ssl_register_alpn_protocols(n->ssl_ctx, h2o_http2_alpn_protocols);
    n->accept_ctx.ssl_ctx = n->ssl_ctx;
    return 0;
}

static void free_unstarted(cb_net_t *n) {
    free_config(n);
    /* an initialised handle must close before its memory goes */
    if (n->tcp_open) uv_close((uv_handle_t *)&n->tcp, on_listener_closed);
    else free(n);
}

int cb_net_listen(cb_rpc_t *rpc, const cb_net_config_t *cfg, const cb_net_callbacks_t *cbs, void *data,
                  cb_net_t **out) {
    *out = NULL;
    last_error[0] = 0;
    cb_net_t *n = calloc(1, sizeof *n);
    if (!n) return CB_ENOMEM;
    n->loop = cb_rpc_loop(rpc);
    n->rpc = rpc;
    n->cbs = *cbs;
    n->data = data;
    int rc = net_http_configure(n, cfg);
    if (rc == 0) rc = setup_tls(n, cfg);
    if (rc == 0) rc = bind_listen(n, cfg);
    if (rc) { free_unstarted(n); return rc; }
    n->started = 1;
    h2o_context_init(&n->ctx, n->loop, &n->config);
    n->accept_ctx.ctx = &n->ctx;
    n->accept_ctx.hosts = n->config.hosts;
    cb_rpc_retain(rpc);
    *out = n;
    return 0;
}
