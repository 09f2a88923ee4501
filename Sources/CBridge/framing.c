#include "cb_framing.h"
#include "cb_error.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    ST_DETECT = 0,
    ST_LINE,      /* NDJSON: collecting a line */
    ST_SKIP_LINE, /* NDJSON: discarding an oversized line up to its '\n' */
    ST_HEADERS,   /* LSP: reading header lines */
    ST_BODY,      /* LSP: waiting for body_len bytes */
    ST_SKIP_BODY, /* LSP: discarding an oversized body */
    ST_RESYNC,    /* LSP: discarding until "Content-Length:" */
};

static const char k_cl[] = "content-length";

void cb_framer_init(cb_framer_t *f, size_t max_bytes) {
    memset(f, 0, sizeof *f);
    f->max_bytes = max_bytes ? max_bytes : (16u << 20);
    f->state = ST_DETECT;
}

void cb_framer_free(cb_framer_t *f) {
    free(f->buf);
    f->buf = NULL;
    f->start = f->len = f->cap = 0;
}

static void compact(cb_framer_t *f) {
    if (f->start == 0) return;
    size_t rest = f->len - f->start;
    if (rest) memmove(f->buf, f->buf + f->start, rest);
    f->len = rest;
    f->start = 0;
}

int cb_framer_reserve(cb_framer_t *f, size_t want, char **out, size_t *avail) {
    compact(f);
    /* While a body is expected, make room for all of it at once so a large
     * message is not reallocated once per read. The limit bounds this. */
    if (f->state == ST_BODY && f->body_len > f->len && f->body_len - f->len > want)
        want = f->body_len - f->len;
    if (f->cap - f->len < want) {
        size_t cap = f->cap ? f->cap : 65536;
        while (cap - f->len < want) cap *= 2;
        char *p = realloc(f->buf, cap);
        if (!p) return CB_ENOMEM;
        f->buf = p;
        f->cap = cap;
    }
    *out = f->buf + f->len;
    *avail = f->cap - f->len;
    return 0;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

#define CB_FRAMING_MAX_HEADERS 64

static int is_token_char(unsigned char c) {
    /* RFC 7230 tchar */
    if (c >= '0' && c <= '9') return 1;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Case-insensitive search for "content-length" in [p, p+n); returns offset or -1. */
static long find_cl(const char *p, size_t n) {
    const size_t m = sizeof k_cl - 1;
    for (size_t i = 0; i + m <= n; i++) {
        if ((p[i] | 0x20) != 'c') continue;
        size_t j = 1;
        while (j < m && (p[i + j] | 0x20) == k_cl[j]) j++;
        if (j == m) return (long)i;
    }
    return -1;
}

/* One LSP header line (without its line end). Returns 0 ok, else sets *why. */
static int header_line(cb_framer_t *f, const char *l, size_t n, const char **why) {
    size_t i = 0;
    while (i < n && is_token_char((unsigned char)l[i])) i++;
    if (i == 0 || i >= n || l[i] != ':') {
        *why = "malformed header line (expected 'Name: value')";
        return -1;
    }
    size_t name_len = i++;
    while (i < n && (l[i] == ' ' || l[i] == '\t')) i++;
    size_t e = n;
    while (e > i && (l[e - 1] == ' ' || l[e - 1] == '\t')) e--;
    /* LSP sends one or two headers; a peer that never ends its header block
     * is an error long before the counter could overflow. */
    if (++f->header_count > CB_FRAMING_MAX_HEADERS) { *why = "too many header lines"; return -1; }
    if (name_len == sizeof k_cl - 1 && find_cl(l, name_len) == 0) {
        if (f->have_length) { *why = "duplicate Content-Length header"; return -1; }
        if (i == e) { *why = "empty Content-Length value"; return -1; }
        uint64_t v = 0;
        for (size_t k = i; k < e; k++) {
            if (l[k] < '0' || l[k] > '9') { *why = "Content-Length is not a decimal number"; return -1; }
            if (v > (UINT64_MAX - 9) / 10) { *why = "Content-Length overflows"; return -1; }
            v = v * 10 + (uint64_t)(l[k] - '0');
        }
        if (v > (uint64_t)SIZE_MAX / 2) { *why = "Content-Length overflows"; return -1; }
        f->body_len = (size_t)v;
        f->have_length = 1;
    }
    /* Content-Type and unknown headers are accepted and ignored (LSP allows them). */
    return 0;
}

static void lsp_reset_headers(cb_framer_t *f) {
    f->have_length = 0;
    f->header_count = 0;
    f->body_len = 0;
}

/* One decoding step in the current state. A step consumes what it can and
 * says whether to run the next one (STEP_AGAIN), to wait for more bytes
 * (STEP_MORE), or to stop because a callback paused the decoder. */
enum { STEP_AGAIN = 0, STEP_MORE = 1, STEP_PAUSED = 2 };
typedef int (*step_fn)(cb_framer_t *f, char *p, size_t avail, cb_frame_cb cb, void *data);

static int deliver(int paused) { return paused ? STEP_PAUSED : STEP_AGAIN; }

static int too_big(cb_frame_cb cb, void *data, size_t size) {
    return deliver(cb(data, CB_FRAME_TOO_BIG, NULL, size, "message exceeds the size limit"));
}

/* Whitespace and a UTF-8 byte-order mark may precede the first message; the
 * first other byte decides the framing for good. */
static int step_detect(cb_framer_t *f, char *p, size_t avail, cb_frame_cb cb, void *data) {
    (void)cb, (void)data;
    size_t i = 0;
    while (i < avail) {
        if (is_ws(p[i])) { i++; continue; }
        if (avail - i >= 3 && (unsigned char)p[i] == 0xEF && (unsigned char)p[i + 1] == 0xBB &&
            (unsigned char)p[i + 2] == 0xBF) { i += 3; continue; }
        break;
    }
    f->start += i;
    if (i == avail) return STEP_MORE;
    if ((unsigned char)p[i] == 0xEF && avail - i < 3) return STEP_MORE; /* a partial BOM */
    unsigned char c = (unsigned char)p[i];
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') {
        f->kind = CB_FRAMING_LSP;
        f->state = ST_HEADERS;
        lsp_reset_headers(f);
    } else {
        f->kind = CB_FRAMING_NDJSON;
        f->state = ST_LINE;
        f->scanned = 0;
    }
    return STEP_AGAIN;
}

/* No '\n' yet: wait, unless the line is already over the limit, in which
 * case it is reported now and skipped without being buffered. */
static int line_incomplete(cb_framer_t *f, size_t avail, cb_frame_cb cb, void *data) {
    f->scanned = avail;
    if (avail <= f->max_bytes) return STEP_MORE;
    f->state = ST_SKIP_LINE;
    f->start = f->len;
    f->scanned = 0;
    return too_big(cb, data, avail);
}

static int step_line(cb_framer_t *f, char *p, size_t avail, cb_frame_cb cb, void *data) {
    char *nl = memchr(p + f->scanned, '\n', avail - f->scanned);
    if (!nl) return line_incomplete(f, avail, cb, data);
    size_t line = (size_t)(nl - p);
    size_t body = line;
    if (body && p[body - 1] == '\r') body--;
    f->start += line + 1;
    f->scanned = 0;
    size_t k = 0;
    while (k < body && is_ws(p[k])) k++;
    if (k == body) return STEP_AGAIN; /* blank line */
    if (body > f->max_bytes) return too_big(cb, data, body);
    return deliver(cb(data, CB_FRAME_MESSAGE, p, body, NULL));
}

static int step_skip_line(cb_framer_t *f, char *p, size_t avail, cb_frame_cb cb, void *data) {
    (void)cb, (void)data;
    char *nl = memchr(p, '\n', avail);
    if (!nl) { f->start = f->len; return STEP_MORE; }
    f->start += (size_t)(nl - p) + 1;
    f->state = ST_LINE;
    return STEP_AGAIN;
}

/* A broken header block: report it and look for the next "Content-Length:". */
static int resync(cb_framer_t *f, cb_frame_cb cb, void *data, const char *why) {
    f->state = ST_RESYNC;
    lsp_reset_headers(f);
    return deliver(cb(data, CB_FRAME_BAD_HEADER, NULL, 0, why));
}

/* The blank line after the headers: a body follows, or is skipped. */
static int headers_end(cb_framer_t *f, cb_frame_cb cb, void *data) {
    if (f->header_count == 0) return STEP_AGAIN; /* blank lines between messages */
    if (!f->have_length) return resync(f, cb, data, "missing Content-Length header");
    if (f->body_len > f->max_bytes) {
        size_t size = f->body_len;
        f->state = ST_SKIP_BODY;
        f->skip = size;
        lsp_reset_headers(f);
        return too_big(cb, data, size);
    }
    f->state = ST_BODY;
    return STEP_AGAIN;
}

static int step_headers(cb_framer_t *f, char *p, size_t avail, cb_frame_cb cb, void *data) {
    char *nl = memchr(p, '\n', avail);
    if (!nl) {
        if (avail <= CB_FRAMER_HEADER_MAX) return STEP_MORE;
        f->start += avail - (sizeof k_cl - 2); /* keep what could start "content-length" */
        return resync(f, cb, data, "header line too long");
    }
    size_t line = (size_t)(nl - p);
    size_t l = line;
    if (l && p[l - 1] == '\r') l--;
    f->start += line + 1;
    if (l > CB_FRAMER_HEADER_MAX) return resync(f, cb, data, "header line too long");
    if (l == 0) return headers_end(f, cb, data);
    const char *why = NULL;
    if (header_line(f, p, l, &why)) return resync(f, cb, data, why);
    return STEP_AGAIN;
}

static int step_body(cb_framer_t *f, char *p, size_t avail, cb_frame_cb cb, void *data) {
    if (avail < f->body_len) return STEP_MORE;
    size_t len = f->body_len;
    f->start += len;
    f->state = ST_HEADERS;
    lsp_reset_headers(f);
    return deliver(cb(data, CB_FRAME_MESSAGE, p, len, NULL));
}

static int step_skip_body(cb_framer_t *f, char *p, size_t avail, cb_frame_cb cb, void *data) {
    (void)p, (void)cb, (void)data;
    size_t k = avail < f->skip ? avail : f->skip;
    f->start += k;
    f->skip -= k;
    if (f->skip) return STEP_MORE;
    f->state = ST_HEADERS;
    return STEP_AGAIN;
}

static int step_resync(cb_framer_t *f, char *p, size_t avail, cb_frame_cb cb, void *data) {
    (void)cb, (void)data;
    long at = find_cl(p, avail);
    if (at < 0) {
        /* keep a tail that could be the start of "content-length" */
        size_t keep = sizeof k_cl - 2;
        if (avail > keep) f->start += avail - keep;
        return STEP_MORE;
    }
    f->start += (size_t)at;
    f->state = ST_HEADERS;
    lsp_reset_headers(f);
    return STEP_AGAIN;
}

static const step_fn steps[] = {
    [ST_DETECT] = step_detect,       [ST_LINE] = step_line,   [ST_SKIP_LINE] = step_skip_line,
    [ST_HEADERS] = step_headers,     [ST_BODY] = step_body,   [ST_SKIP_BODY] = step_skip_body,
    [ST_RESYNC] = step_resync,
};

int cb_framer_commit(cb_framer_t *f, size_t n, cb_frame_cb cb, void *data) {
    f->len += n;
    for (;;) {
        int r = steps[f->state](f, f->buf + f->start, f->len - f->start, cb, data);
        if (r != STEP_AGAIN) return r == STEP_PAUSED;
    }
}

int cb_framer_feed(cb_framer_t *f, const char *bytes, size_t n, cb_frame_cb cb, void *data) {
    int paused = 0;
    while (n) {
        char *dst;
        size_t room;
        size_t chunk = n < 65536 ? n : 65536;
        if (cb_framer_reserve(f, chunk, &dst, &room)) return CB_ENOMEM;
        memcpy(dst, bytes, chunk);
        bytes += chunk;
        n -= chunk;
        paused = cb_framer_commit(f, chunk, cb, data);
        if (paused && n) {
            /* keep the rest buffered: the caller resumes with commit(f, 0) */
            if (cb_framer_reserve(f, n, &dst, &room)) return CB_ENOMEM;
            memcpy(dst, bytes, n);
            f->len += n;
            return 1;
        }
    }
    return paused;
}

void cb_framer_finish(cb_framer_t *f, cb_frame_cb cb, void *data) {
    char *p = f->buf + f->start;
    size_t avail = f->len - f->start;
    switch (f->state) {
    case ST_LINE: {
        size_t k = 0;
        while (k < avail && is_ws(p[k])) k++;
        if (k < avail) {
            if (avail > f->max_bytes)
                cb(data, CB_FRAME_TOO_BIG, NULL, avail, "message exceeds the size limit");
            else
                cb(data, CB_FRAME_MESSAGE, p, avail, NULL);
        }
        break;
    }
    case ST_HEADERS:
        if (avail || f->header_count)
            cb(data, CB_FRAME_TRUNCATED, NULL, avail, "stream ended inside a header block");
        break;
    case ST_BODY:
        cb(data, CB_FRAME_TRUNCATED, NULL, avail, "stream ended inside a message body");
        break;
    case ST_SKIP_BODY:
    case ST_SKIP_LINE:
    case ST_RESYNC:
    case ST_DETECT:
    default:
        break;
    }
    f->start = f->len = 0;
    f->state = f->kind == CB_FRAMING_LSP ? ST_HEADERS : f->kind == CB_FRAMING_NDJSON ? ST_LINE : ST_DETECT;
    lsp_reset_headers(f);
}
