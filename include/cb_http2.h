#ifndef CB_HTTP2_H
#define CB_HTTP2_H
/* An HTTP client for pushes (APNs, Web Push) on the daemon's loop: libcurl's
 * multi interface driven by libuv (a uv_poll per socket curl asks about, one
 * uv timer for curl's timeouts), so no thread and no blocking call.
 *
 * https:// URLs speak HTTP/2 (ALPN; HTTP/1.1 only if the server refuses h2),
 * and every request to a host shares ONE connection: requests made while it
 * is being set up wait for it (PIPEWAIT) instead of opening more, and then
 * run as concurrent streams on it (up to the server's stream limit; beyond
 * that they queue). http:// URLs (loopback test servers) speak HTTP/1.1, one
 * request at a time on one kept-alive connection. An idle connection is kept
 * for 10 minutes with TCP keepalive; a dead one is replaced on the next request.
 *
 * Every request cb_http2_post accepts gets exactly one cb_http2_done_cb, on
 * the loop thread, never from inside cb_http2_post: with the HTTP status, or
 * with status 0 and an error text when there was no complete response
 * (refused, reset, timed out, TLS failure, a reply that is not HTTP, the
 * client closed). Redirects are not followed.
 * Single-threaded: the loop thread only. The process must not die of SIGPIPE
 * (the daemon ignores it; curl also sends with MSG_NOSIGNAL). */
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct cb_http2_s cb_http2_t;

typedef struct {
    const char *name;  /* lowercase */
    const char *value; /* without surrounding blanks */
} cb_http2_header_t;

/* Valid only during the callback: copy what you keep. */
typedef struct {
    int status;           /* the HTTP status; 0: no complete response */
    const char *error;    /* why, when status is 0 ("closed" after cb_http2_close); else NULL */
    const void *body;     /* never NULL (an empty body is ""); NUL-terminated past body_len */
    size_t body_len;
    const cb_http2_header_t *headers; /* the final response's, in order received */
    size_t n_headers;
    int http_version;     /* 20 (HTTP/2), 11 (HTTP/1.1), 10; 0 when nothing was answered */
    double total_ms;      /* from cb_http2_post to completion */
} cb_http2_response_t;

typedef void (*cb_http2_done_cb)(const cb_http2_response_t *r, void *req_data);

/* The client on `loop`. 0 or CB_ENOMEM. */
int cb_http2_new(uv_loop_t *loop, cb_http2_t **out);
/* A PEM file of CAs to trust instead of the system's (a test server's
 * certificate); NULL: the system's again. For requests posted afterwards.
 * 0, CB_ENOMEM or CB_ECLOSED. */
int cb_http2_set_ca_file(cb_http2_t *c, const char *path);
void *cb_http2_data(const cb_http2_t *c);
void cb_http2_set_data(cb_http2_t *c, void *data);

/* POSTs `len` bytes of `body` (copied) to `url` with `nheaders` request
 * headers "name: value" (copied; curl's default Accept, Content-Type and
 * Expect are left out unless given). timeout_ms bounds the whole request,
 * queueing and connecting included; <= 0 means 30 s. Returns 0 (`done` will
 * be called) or, with no call to come: CB_EINVAL (an empty URL, a header
 * without ':' or with CR/LF), CB_ECLOSED (after cb_http2_close), CB_ENOMEM. */
int cb_http2_post(cb_http2_t *c, const char *url, const char *const *headers, int nheaders, const void *body,
                  size_t len, int timeout_ms, cb_http2_done_cb done, void *req_data);

/* A header of the response by lowercase name (the first if repeated), or NULL. */
const char *cb_http2_response_header(const cb_http2_response_t *r, const char *lowercase_name);

/* Counters: requests accepted by cb_http2_post, connections opened for them
 * (curl's CURLINFO_NUM_CONNECTS summed over completed requests), requests
 * answered with status 0, and requests in flight (posted, not yet called back). */
uint64_t cb_http2_started(const cb_http2_t *c);
uint64_t cb_http2_connects(const cb_http2_t *c);
uint64_t cb_http2_failed(const cb_http2_t *c);
size_t cb_http2_in_flight(const cb_http2_t *c);

/* Cancels what is in flight and closes the connections and uv handles. Once
 * the handles are closed (a later loop turn) the cancelled requests' done
 * callbacks run (status 0, error "closed"), then closed(data) (may be NULL),
 * and the client is freed. Callable from a done callback; a second call does
 * nothing. Until `closed`, posting returns CB_ECLOSED. */
void cb_http2_close(cb_http2_t *c, void (*closed)(void *data), void *data);
#endif
