/* Pairing secrets (random bytes, SHA-256, constant-time compare) and the
 * pairing URL as a terminal QR code. */
#include "cb_token.h"
#include "cb_error.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <qrencode.h>
#include <stdlib.h>
#include <string.h>

int cb_random_bytes(uint8_t *buf, size_t n) {
    /* RAND_bytes takes an int: draw in chunks so any size works. */
    while (n > 0) {
        int chunk = n > 1 << 20 ? 1 << 20 : (int)n;
        if (RAND_bytes(buf, chunk) != 1) return CB_EINVAL;
        buf += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

void cb_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = 0;
}

int cb_ct_equal(const void *a, const void *b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

/* Light module at (x, y) of a code with a `quiet`-module border around it. */
static int light(const QRcode *q, int x, int y, int quiet) {
    int w = q->width;
    x -= quiet;
    y -= quiet;
    if (x < 0 || y < 0 || x >= w || y >= w) return 1;
    return !(q->data[y * w + x] & 1);
}

int cb_qr_text(const char *text, char **out) {
    QRcode *q = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1);
    if (!q) return CB_EINVAL;
    const int quiet = 2, side = q->width + 2 * quiet;
    /* Each cell is at most 3 UTF-8 bytes; one newline per character row. */
    size_t cap = (size_t)side * (size_t)((side + 1) / 2) * 3 + (size_t)side + 1;
    char *buf = malloc(cap), *p = buf;
    if (!buf) { QRcode_free(q); return CB_ENOMEM; }
    for (int y = 0; y < side; y += 2) {
        for (int x = 0; x < side; x++) {
            int top = light(q, x, y, quiet), bottom = y + 1 < side ? light(q, x, y + 1, quiet) : 0;
            const char *cell = top && bottom ? "\xe2\x96\x88" : top ? "\xe2\x96\x80" : bottom ? "\xe2\x96\x84" : " ";
            size_t n = strlen(cell);
            memcpy(p, cell, n);
            p += n;
        }
        *p++ = '\n';
    }
    *p = 0;
    QRcode_free(q);
    *out = buf;
    return 0;
}
