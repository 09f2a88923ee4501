#ifndef CB_TOKEN_H
#define CB_TOKEN_H
/* Secrets for device pairing: random bytes, SHA-256 and a constant-time
 * compare (OpenSSL), and a pairing URL drawn as a terminal QR code
 * (libqrencode). Only this file's C source includes those libraries. */
#include <stddef.h>
#include <stdint.h>

/* Fills buf with n cryptographically strong random bytes; 0, or CB_EINVAL
 * when the generator cannot deliver (never returns weak bytes). */
int cb_random_bytes(uint8_t *buf, size_t n);
/* The lowercase hex SHA-256 of data, NUL-terminated in out. */
void cb_sha256_hex(const void *data, size_t len, char out[65]);
/* 1 when the n bytes of a and b are equal, in time independent of where
 * they differ (token hashes must not leak a matching prefix). */
int cb_ct_equal(const void *a, const void *b, size_t n);
/* `text` as a QR code (error correction M) drawn with Unicode half blocks,
 * two modules per character row, with a 2-module quiet zone; dark modules
 * are drawn as spaces on a light background so phone cameras read it on
 * dark terminals too. *out is malloc'd (caller frees). 0, CB_EINVAL (too
 * long for a QR code) or CB_ENOMEM. */
int cb_qr_text(const char *text, char **out);
#endif
