/* The baseline for `cb-bench rpc`: the least a JSON-RPC server over a pipe can
 * do with jansson. Reads newline-delimited JSON from stdin with blocking
 * read(), parses each line with json_loadb, builds {"jsonrpc","id","result":{}}
 * with jansson, serialises it with json_dumpb, and writes all replies of one
 * read() in a single write(). No event loop, no framing detection, no
 * validation, no dispatch: everything the real server adds is measured
 * against this. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_all(const char *p, size_t n) {
    while (n) {
        ssize_t w = write(1, p, n);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(void) {
    size_t cap = 1 << 20, len = 0;
    char *in = malloc(cap);
    size_t ocap = 1 << 20, olen = 0;
    char *out = malloc(ocap);
    char tmp[4096];
    if (!in || !out) return 1;
    for (;;) {
        if (cap - len < 65536) {
            cap *= 2;
            in = realloc(in, cap);
            if (!in) return 1;
        }
        ssize_t r = read(0, in + len, cap - len);
        if (r <= 0) break;
        len += (size_t)r;
        size_t start = 0;
        char *nl;
        while ((nl = memchr(in + start, '\n', len - start))) {
            size_t n = (size_t)(nl - (in + start));
            json_t *req = json_loadb(in + start, n, 0, NULL);
            start += n + 1;
            if (!req) continue;
            json_t *resp = json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id",
                                     json_object_get(req, "id") ? json_object_get(req, "id") : json_null(),
                                     "result");
            size_t m = json_dumpb(resp, tmp, sizeof tmp - 1, JSON_COMPACT);
            json_decref(resp);
            json_decref(req);
            if (m == 0 || m >= sizeof tmp - 1) continue;
            tmp[m++] = '\n';
            if (ocap - olen < m) {
                ocap *= 2;
                out = realloc(out, ocap);
                if (!out) return 1;
            }
            memcpy(out + olen, tmp, m);
            olen += m;
        }
        memmove(in, in + start, len - start);
        len -= start;
        if (olen) {
            if (write_all(out, olen)) return 0;
            olen = 0;
        }
    }
    return 0;
}
