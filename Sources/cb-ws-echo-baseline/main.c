/* A bare WebSocket echo server on H2O's own WebSocket API (libuv build): the
 * baseline `cb-bench ws` measures the daemon's /rpc against. Text frames
 * come back unchanged; no JSON, no framing of ours. Prints the bound port on
 * stdout, then serves until killed.
 *
 * Usage: cb-ws-echo-baseline [PORT]   (0, the default: any free port) */
#define H2O_USE_LIBUV 1
#include <h2o.h>
#include <h2o/websocket.h>
#include <stdio.h>
#include <stdlib.h>

static h2o_globalconf_t config;
static h2o_context_t ctx;
static h2o_accept_ctx_t accept_ctx;

static void on_message(h2o_websocket_conn_t *conn, const struct wslay_event_on_msg_recv_arg *arg) {
    if (arg == NULL) {
        h2o_websocket_close(conn);
        return;
    }
    if (!wslay_is_ctrl_frame(arg->opcode)) {
        struct wslay_event_msg m = {arg->opcode, arg->msg, arg->msg_length};
        wslay_event_queue_msg(conn->ws_ctx, &m);
    }
}

static int on_req(h2o_handler_t *self, h2o_req_t *req) {
    (void)self;
    const char *key;
    if (h2o_is_websocket_handshake(req, &key) != 0 || key == NULL) return -1;
    h2o_upgrade_to_websocket(req, key, NULL, on_message);
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
    uv_tcp_nodelay(conn, 1);
    h2o_accept(&accept_ctx, h2o_uv_socket_create((uv_stream_t *)conn, (uv_close_cb)free));
}

int main(int argc, char **argv) {
    uv_loop_t *loop = uv_default_loop();
    uv_tcp_t listener;
    struct sockaddr_in addr;
    uv_tcp_init(loop, &listener);
    uv_ip4_addr("127.0.0.1", argc > 1 ? atoi(argv[1]) : 0, &addr);
    int r = uv_tcp_bind(&listener, (struct sockaddr *)&addr, 0);
    if (r == 0) r = uv_listen((uv_stream_t *)&listener, 1024, on_connect);
    if (r != 0) {
        fprintf(stderr, "cb-ws-echo-baseline: %s\n", uv_strerror(r));
        return 1;
    }
    int len = sizeof addr;
    uv_tcp_getsockname(&listener, (struct sockaddr *)&addr, &len);
    printf("%d\n", ntohs(addr.sin_port));
    fflush(stdout);
    h2o_config_init(&config);
    h2o_hostconf_t *host = h2o_config_register_host(&config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_create_handler(h2o_config_register_path(host, "/", 0), sizeof(h2o_handler_t))->on_req = on_req;
    h2o_context_init(&ctx, loop, &config);
    accept_ctx.ctx = &ctx;
    accept_ctx.hosts = config.hosts;
    return uv_run(loop, UV_RUN_DEFAULT);
}
