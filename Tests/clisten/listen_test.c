/* C unit driver of the unix-socket listener (run.sh builds it with ASan+UBSan):
 * path ownership (permissions, stale socket replaced, live one refused,
 * non-socket refused, long path), many clients answered, and aborting a
 * client that never reads while writes are queued (no leak, no crash). */
#include "cb_conn.h"
#include "cb_error.h"
#include "cb_listen.h"
#include "cb_rpc.h"
#include <assert.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #x); exit(1); } } while (0)

static uv_loop_t loop;
static cb_conn_t *conns[4096];
static int nconns, closed_events;

static void on_call(cb_rpc_t *rpc, cb_conn_t *c, cb_req_t *req, const char *m, size_t n, json_t *p) {
    (void)rpc; (void)c; (void)m; (void)n; (void)p;
    if (req) cb_req_result(req, json_string("ok"));
}

static void on_conn(cb_rpc_t *rpc, cb_conn_t *c, cb_conn_event ev) {
    (void)rpc;
    if (ev == CB_CONN_EV_CLOSED) { closed_events++; cb_conn_set_data(c, NULL); cb_conn_release(c); }
    else cb_conn_close(c);
}

static void on_accept(cb_listener_t *l, cb_conn_t *c) {
    (void)l;
    cb_conn_set_data(c, c);
    conns[nconns++] = c;
}

static int client(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { close(fd); return -errno; }
    return fd;
}

static void spin(int turns) { for (int i = 0; i < turns; i++) uv_run(&loop, UV_RUN_NOWAIT); }

int main(void) {
    char dir[] = "/tmp/cb-listen-XXXXXX";
    CHECK(mkdtemp(dir));
    char path[256], lockp[300];
    snprintf(path, sizeof path, "%s/s.sock", dir);
    snprintf(lockp, sizeof lockp, "%s.lock", path);
    signal(SIGPIPE, SIG_IGN); /* as the server does (cb_signals_watch) */
    uv_loop_init(&loop);
    cb_rpc_t *rpc = cb_rpc_new(&loop, NULL, on_call, on_conn, NULL);
    cb_rpc_set_static(rpc, "ping", "{}", 2);

    /* bind: 0600 socket */
    cb_listener_t *l;
    CHECK(cb_listen_unix(rpc, path, 4096, on_accept, NULL, &l) == 0);
    struct stat st;
    CHECK(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600);

    /* a second listener on the same path is refused (lock held) */
    cb_listener_t *l2;
    CHECK(cb_listen_unix(rpc, path, 16, on_accept, NULL, &l2) == CB_EBUSY);
    CHECK(lstat(path, &st) == 0); /* and did not delete ours */

    /* many clients, each answered */
    enum { N = 500 };
    static int fds[N];
    for (int i = 0; i < N; i++) { fds[i] = client(path); CHECK(fds[i] >= 0); }
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\"}\n";
    for (int i = 0; i < N; i++) CHECK(write(fds[i], req, strlen(req)) == (ssize_t)strlen(req));
    spin(50);
    CHECK(nconns == N);
    for (int i = 0; i < N; i++) {
        char buf[256];
        ssize_t n = read(fds[i], buf, sizeof buf - 1);
        CHECK(n > 0);
        buf[n] = 0;
        CHECK(strstr(buf, "\"id\":7,\"result\":\"ok\""));
        close(fds[i]);
    }
    spin(50);
    CHECK(closed_events == N);

    /* fairness: a client with a backlog of pipelined requests gets one
     * 4 KiB read per loop turn, so another client's request in the same
     * turn is not queued behind all of it */
    nconns = 0;
    int fl = client(path), ot = client(path);
    spin(5);
    CHECK(nconns == 2);
    static char flood[1 << 20];
    size_t rl = strlen(req), off = 0;
    while (off + rl <= sizeof flood) { memcpy(flood + off, req, rl); off += rl; }
    ssize_t queued_in = send(fl, flood, off, MSG_DONTWAIT);
    CHECK(queued_in > 64 * 1024);
    CHECK(write(ot, req, rl) == (ssize_t)rl);
    uint64_t before_fl = cb_conn_stats(conns[0]).bytes_in;
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(cb_conn_stats(conns[1]).bytes_in == rl);
    CHECK(cb_conn_stats(conns[0]).bytes_in - before_fl <= 4096);
    spin(20);
    CHECK(cb_conn_stats(conns[0]).bytes_in > before_fl + 4096); /* and it is served on later turns */
    close(fl);
    close(ot);
    spin(20);

    /* a client that never reads: queue far more than the socket buffer, abort */
    nconns = 0;
    int slow = client(path);
    CHECK(slow >= 0);
    spin(5);
    CHECK(nconns == 1);
    cb_conn_t *c = conns[0];
    cb_conn_retain(c);
    cb_rpc_set_notify_limit(rpc, 64u << 20); /* keep queueing: writes stay in flight */
    json_t *big = json_pack("{s:s}", "x", "0123456789012345678901234567890123456789012345678901234567890123456789");
    for (int i = 0; i < 100000 && cb_conn_queued(c) < (8u << 20); i++) cb_conn_notify(c, "n", big);
    json_decref(big);
    spin(5);
    CHECK(cb_conn_queued(c) > (1u << 20)); /* the kernel buffer is full, libuv holds the rest */
    CHECK(cb_conn_transport(c) == CB_TRANSPORT_SOCKET);
    int before = closed_events;
    cb_conn_abort(c);
    spin(5);
    CHECK(closed_events == before + 1);
    CHECK(cb_conn_is_closed(c) && !cb_conn_has_transport(c) && cb_conn_queued(c) == 0);
    CHECK(cb_conn_notify(c, "n", NULL) == CB_ECLOSED);
    cb_conn_release(c);
    close(slow);

    /* close: the socket file goes, the lock file stays (and is free) */
    cb_listener_close(l);
    spin(5);
    CHECK(lstat(path, &st) < 0 && errno == ENOENT);
    CHECK(access(lockp, F_OK) == 0);

    /* a stale socket (bound, nobody listening) is replaced */
    int dead = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, path);
    CHECK(bind(dead, (struct sockaddr *)&a, sizeof a) == 0);
    close(dead);
    CHECK(client(path) == -ECONNREFUSED);
    CHECK(cb_listen_unix(rpc, path, 16, on_accept, NULL, &l) == 0);
    int ok = client(path);
    CHECK(ok >= 0);
    close(ok);
    spin(5);
    cb_listener_close(l);
    spin(5);

    /* something else listening there (no lock): refused, left alone */
    int other = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(other, (struct sockaddr *)&a, sizeof a) == 0 && listen(other, 4) == 0);
    CHECK(cb_listen_unix(rpc, path, 16, on_accept, NULL, &l) == CB_EBUSY);
    CHECK(lstat(path, &st) == 0);
    close(other);
    unlink(path);

    /* a regular file at the path is never deleted */
    int f = open(path, O_CREAT | O_WRONLY, 0600);
    close(f);
    CHECK(cb_listen_unix(rpc, path, 16, on_accept, NULL, &l) == UV_EEXIST);
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
    unlink(path);

    /* too long, missing directory */
    char longp[300];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = 0;
    CHECK(cb_listen_unix(rpc, longp, 16, on_accept, NULL, &l) == CB_ETOOBIG);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope/s.sock", dir);
    CHECK(cb_listen_unix(rpc, missing, 16, on_accept, NULL, &l) == UV_ENOENT);

    /* notifications over the limit are dropped and counted; replies are not */
    cb_rpc_set_notify_limit(rpc, 100);
    cb_conn_t *m = cb_rpc_open_memory(rpc);
    const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"pad\":\"0123456789012345678901234567890123456789\"}}";
    CHECK(cb_conn_send_notification(m, note, strlen(note)) == 0);
    CHECK(cb_conn_send_notification(m, note, strlen(note)) == 0); /* 81 queued: not over 100 yet */
    CHECK(cb_conn_send_notification(m, note, strlen(note)) == CB_ETOOBIG);
    CHECK(cb_conn_notify(m, "n", NULL) == CB_ETOOBIG);
    CHECK(cb_conn_stats(m).dropped_notifications == 2);
    CHECK(cb_conn_send(m, note, strlen(note)) == 0);
    cb_conn_output_clear(m);
    CHECK(cb_conn_send_notification(m, note, strlen(note)) == 0);
    cb_conn_retain(m); /* on_conn drops the owner's reference on CLOSED */
    cb_conn_close(m);
    CHECK(cb_conn_send_notification(m, note, strlen(note)) == CB_ECLOSED);
    CHECK(cb_conn_stats(m).dropped_notifications == 2);
    cb_conn_release(m);

    /* closing the endpoint with a client still connected: no callback
     * reaches the owner, the client is closed, and the connection and the
     * endpoint are freed once its handles are (LeakSanitizer checks) */
    CHECK(cb_listen_unix(rpc, path, 16, on_accept, NULL, &l) == 0);
    nconns = 0;
    int late = client(path);
    CHECK(late >= 0);
    spin(5);
    CHECK(nconns == 1);
    cb_listener_close(l);
    before = closed_events;
    cb_rpc_close(rpc);
    cb_conn_release(conns[0]); /* the owner lets go before the handles are closed */
    spin(10);
    CHECK(closed_events == before);
    char eof;
    CHECK(read(late, &eof, 1) == 0);
    close(late);
    CHECK(uv_loop_close(&loop) == 0);
    unlink(lockp);
    rmdir(dir);
    printf("listen: all checks passed (%d clients)\n", N);
    return 0;
}
