#ifndef CB_PUSH_CRYPTO_H
#define CB_PUSH_CRYPTO_H
/* The crypto of push notifications, all of it OpenSSL 3's EVP layer:
 * P-256 keys (an APNs .p8 signing key, a VAPID key, an ephemeral Web Push
 * key), ES256 JSON Web Tokens (APNs provider tokens, VAPID), and Web Push
 * message encryption (RFC 8291 over the RFC 8188 aes128gcm coding).
 *
 * Errors: 0, CB_EINVAL (malformed or out-of-range input, a key that is not
 * P-256, a signature that does not verify) or CB_ENOMEM. A failure never
 * leaves entries in OpenSSL's per-thread error queue (the TLS code reads it).
 * Keys are immutable after creation: one key may be used from many threads. */
#include <stddef.h>
#include <stdint.h>

#define CB_P256_PUBLIC_LEN 65  /* uncompressed point: 0x04 || x || y */
#define CB_P256_PRIVATE_LEN 32
#define CB_WEBPUSH_AUTH_LEN 16
#define CB_WEBPUSH_SALT_LEN 16
/* One 4096-octet record minus the 86-octet header, the padding delimiter
 * and the 16-octet GCM tag (RFC 8291 section 4). */
#define CB_WEBPUSH_MAX_PLAINTEXT 3993

/* An owned P-256 private key (with its public key). */
typedef struct cb_ec_key_s cb_ec_key_t;

/* Loads a PEM private key: PKCS#8 "BEGIN PRIVATE KEY" (an Apple .p8 file) or
 * SEC1 "BEGIN EC PRIVATE KEY". Encrypted PEMs are refused, never prompted
 * for. CB_EINVAL when it is not a PEM key or not on P-256. */
int cb_ec_key_load_pem(const char *pem, size_t len, cb_ec_key_t **out);
/* A fresh random P-256 key. */
int cb_ec_key_generate(cb_ec_key_t **out);
/* The key whose private scalar is priv (big endian); the public key is
 * computed from it. For published test vectors and raw key stores.
 * CB_EINVAL when priv is 0 or not below the group order. */
int cb_ec_key_from_raw(const uint8_t priv[CB_P256_PRIVATE_LEN], cb_ec_key_t **out);
/* The private key as unencrypted PKCS#8 PEM, NUL-terminated; *pem_out is
 * malloc'd: release it with cb_ec_key_pem_free, which wipes it first. */
int cb_ec_key_private_pem(const cb_ec_key_t *k, char **pem_out);
void cb_ec_key_pem_free(char *pem);
/* The public key as an uncompressed point. */
void cb_ec_key_public_raw(const cb_ec_key_t *k, uint8_t out[CB_P256_PUBLIC_LEN]);
void cb_ec_key_free(cb_ec_key_t *k);

/* A JWS compact token signed with ES256 (RFC 7515/7518):
 * base64url(header).base64url(claims).base64url(r || s), no padding. The
 * JSON texts are signed as given (the caller encodes them). *jwt_out is
 * malloc'd, NUL-terminated. */
int cb_jwt_es256(const cb_ec_key_t *k, const char *header_json, size_t hlen,
                 const char *claims_json, size_t clen, char **jwt_out);
/* 0 when jwt is a three-part token whose ES256 signature verifies under the
 * P-256 public key pub; CB_EINVAL otherwise. What a push service checks. */
int cb_jwt_es256_verify(const uint8_t pub[CB_P256_PUBLIC_LEN], const char *jwt, size_t len);

/* Encrypts one push message for a Web Push subscription (RFC 8291): ECDH of
 * as_key with ua_public, HKDF with the subscription's auth secret, then a
 * single aes128gcm record (RFC 8188) of plaintext || 0x02 under the header
 * salt(16) | rs(4, big endian, 4096) | idlen(1) = 65 | as_public(65).
 * as_key NULL: a fresh ephemeral key (the normal case); salt NULL: 16 random
 * bytes. Both are parameters only so published test vectors can be replayed.
 * CB_EINVAL: ua_public not a 65-byte uncompressed point on P-256, auth not
 * 16 bytes, plaintext over CB_WEBPUSH_MAX_PLAINTEXT. *body_out is malloc'd. */
int cb_webpush_encrypt(const uint8_t *ua_public, size_t ua_public_len,
                       const uint8_t *auth_secret, size_t auth_len,
                       const uint8_t *plaintext, size_t plen,
                       const cb_ec_key_t *as_key, const uint8_t *salt,
                       uint8_t **body_out, size_t *body_len);
/* The user agent's side: decrypts a single-record aes128gcm body with the
 * subscription key ua_key and auth secret, checking the tag and the 0x02
 * delimiter. For tests and diagnostics. *plain_out is malloc'd (it may be
 * empty, but is never NULL on success). */
int cb_webpush_decrypt(const cb_ec_key_t *ua_key, const uint8_t *auth_secret, size_t auth_len,
                       const uint8_t *body, size_t body_len, uint8_t **plain_out, size_t *plain_len);

/* base64url (RFC 4648 section 5) without padding; *out is malloc'd and
 * NUL-terminated, *out_len (may be NULL) its length. */
int cb_base64url_encode(const uint8_t *data, size_t len, char **out, size_t *out_len);
/* Decodes base64url with or without '=' padding. CB_EINVAL on any other
 * character (also '+', '/' and whitespace), an impossible length, or unused
 * trailing bits that are not zero (so each byte string has one spelling).
 * *out is malloc'd (never NULL on success, even for empty input). */
int cb_base64url_decode(const char *text, size_t len, uint8_t **out, size_t *out_len);
#endif
