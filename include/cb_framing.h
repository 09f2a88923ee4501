#ifndef CB_FRAMING_H
#define CB_FRAMING_H
/* Splits a byte stream into messages. The framing is detected from the first
 * significant bytes of the stream and then fixed for its lifetime:
 *   - a letter  -> LSP base protocol: "Content-Length: N\r\n" headers (names
 *                  case-insensitive, Content-Type accepted and ignored), a blank
 *                  line, then exactly N bytes of body;
 *   - otherwise -> newline-delimited JSON: one message per line (\n or \r\n),
 *                  blank lines ignored.
 * Limits are enforced while bytes arrive, so an oversized message is reported
 * and skipped without ever being buffered whole, and the next message is intact.
 * After a broken LSP header block the decoder resynchronises on the next
 * "Content-Length:" it sees. */
#include <stddef.h>

typedef enum {
    CB_FRAMING_UNKNOWN = 0,
    CB_FRAMING_NDJSON = 1,
    CB_FRAMING_LSP = 2,
    CB_FRAMING_WEBSOCKET = 3, /* one message per text frame (set by the transport) */
} cb_framing_kind;

typedef enum {
    CB_FRAME_MESSAGE = 0,   /* bytes/len: one complete message body */
    CB_FRAME_TOO_BIG = 1,   /* len: the size seen (>= limit); message skipped */
    CB_FRAME_BAD_HEADER = 2,/* detail says what; decoder resynchronises */
    CB_FRAME_TRUNCATED = 3, /* stream ended inside a message (detail says where) */
} cb_frame_event;

/* Called for each event. Return 0 to continue, non-zero to pause: the decoder
 * keeps the unprocessed bytes and cb_framer_commit(f, 0, ...) resumes. */
typedef int (*cb_frame_cb)(void *data, cb_frame_event ev, const char *bytes, size_t len,
                           const char *detail);

#define CB_FRAMER_HEADER_MAX 8192 /* longest LSP header line accepted */

typedef struct cb_framer_s {
    cb_framing_kind kind;
    size_t max_bytes; /* largest message body accepted */
    char *buf;        /* buffered, not yet consumed bytes are buf[start, len) */
    size_t start, len, cap;
    size_t scanned;   /* NDJSON: bytes after start already known to hold no '\n' */
    int state;
    size_t body_len;  /* LSP: Content-Length of the current message */
    size_t skip;      /* bytes still to discard (oversized LSP body) */
    int have_length, header_count;
} cb_framer_t;

void cb_framer_init(cb_framer_t *f, size_t max_bytes);
void cb_framer_free(cb_framer_t *f);
/* Space to read into (at least `want` bytes); CB_ENOMEM if none. */
int cb_framer_reserve(cb_framer_t *f, size_t want, char **out, size_t *avail);
/* n bytes were written at the reserved space: decode them. Returns 1 if a
 * callback paused the decoder, else 0. */
int cb_framer_commit(cb_framer_t *f, size_t n, cb_frame_cb cb, void *data);
/* Copies bytes in and decodes (for in-memory peers and the fuzzer). */
int cb_framer_feed(cb_framer_t *f, const char *bytes, size_t n, cb_frame_cb cb, void *data);
/* The stream ended: a final NDJSON line without '\n' is still a message;
 * anything else left over is reported as CB_FRAME_TRUNCATED. */
void cb_framer_finish(cb_framer_t *f, cb_frame_cb cb, void *data);
#endif
