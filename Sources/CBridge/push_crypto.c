/* Push notification crypto on OpenSSL 3's EVP layer: P-256 keys, ES256
 * tokens, RFC 8291 Web Push encryption. Nothing here is a hand-made
 * primitive: ECDSA, ECDH, HKDF and AES-GCM are OpenSSL's; this file only
 * lays out bytes around them (JWS encoding, the aes128gcm header).
 *
 * Every public function sets an error-queue mark on entry and pops to it on
 * exit: OpenSSL's decoders leave entries behind even when they succeed, and
 * the TLS code (net_tls.c) on the same thread reads that queue. */
#include "cb_push_crypto.h"
#include "cb_error.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct cb_ec_key_s {
    EVP_PKEY *pkey;
    uint8_t pub[CB_P256_PUBLIC_LEN]; /* cached: every Web Push header and VAPID header carries it */
};

#define RECORD_SIZE 4096u
#define HEADER_LEN (CB_WEBPUSH_SALT_LEN + 4 + 1 + CB_P256_PUBLIC_LEN) /* 86 */
#define TAG_LEN 16

static int done(int rc) {
    ERR_pop_to_mark();
    return rc;
}

/* ---- keys ---------------------------------------------------------------- */

/* P-256 by name. A key with explicit curve parameters has a group name only
 * when OpenSSL found those parameters identical to a named curve's, so a
 * look-alike curve (the start of invalid-curve attacks) is refused. */
static int is_p256(const EVP_PKEY *pk) {
    char name[64];
    size_t n = 0;
    if (!EVP_PKEY_is_a(pk, "EC")) return 0;
    if (EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, name, sizeof name, &n) != 1) return 0;
    return strcmp(name, SN_X9_62_prime256v1) == 0;
}

/* The public point uncompressed, from its coordinates: independent of the
 * point format the key was stored in (SEC1 files may hold it compressed). */
static int public_point(const EVP_PKEY *pk, uint8_t out[CB_P256_PUBLIC_LEN]) {
    BIGNUM *x = NULL, *y = NULL;
    int ok = EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_X, &x) == 1
        && EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_Y, &y) == 1
        && BN_bn2binpad(x, out + 1, 32) == 32 && BN_bn2binpad(y, out + 33, 32) == 32;
    out[0] = 0x04;
    BN_free(x);
    BN_free(y);
    return ok ? 0 : CB_EINVAL;
}

/* Takes ownership of pk. A full key check too: a PKCS#8 file can carry a
 * public key that does not belong to its private key, and that public key is
 * the one we would publish. */
static int wrap_key(EVP_PKEY *pk, cb_ec_key_t **out) {
    EVP_PKEY_CTX *c = is_p256(pk) ? EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL) : NULL;
    int ok = c && EVP_PKEY_check(c) == 1;
    EVP_PKEY_CTX_free(c);
    cb_ec_key_t *k = ok ? calloc(1, sizeof *k) : NULL;
    if (!k) {
        EVP_PKEY_free(pk);
        return ok ? CB_ENOMEM : CB_EINVAL;
    }
    k->pkey = pk;
    if (public_point(pk, k->pub) != 0) {
        cb_ec_key_free(k);
        return CB_EINVAL;
    }
    *out = k;
    return 0;
}

/* A P-256 EVP_PKEY from its parts: priv may be NULL for a public key.
 * Import rejects a point that is not on the curve. */
static EVP_PKEY *p256_from_parts(const BIGNUM *priv, const uint8_t pub[CB_P256_PUBLIC_LEN]) {
    OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *c = NULL;
    EVP_PKEY *pk = NULL;
    if (b && OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, SN_X9_62_prime256v1, 0)
        && OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pub, CB_P256_PUBLIC_LEN)
        && (!priv || OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_PRIV_KEY, priv))
        && (params = OSSL_PARAM_BLD_to_param(b)) != NULL
        && (c = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL)) != NULL
        && EVP_PKEY_fromdata_init(c) == 1)
        EVP_PKEY_fromdata(c, &pk, priv ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params);
    EVP_PKEY_CTX_free(c);
    OSSL_PARAM_free(params); /* a secure BN's copy lives in secure memory, wiped here */
    OSSL_PARAM_BLD_free(b);
    return pk;
}

/* A peer's public key: exactly 65 bytes, 0x04, a valid point of P-256
 * (RFC 8291 section 6: a point off the curve can leak our private key). */
static EVP_PKEY *p256_public(const uint8_t *pub, size_t len) {
    if (!pub || len != CB_P256_PUBLIC_LEN || pub[0] != 0x04) return NULL;
    EVP_PKEY *pk = p256_from_parts(NULL, pub);
    EVP_PKEY_CTX *c = pk ? EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL) : NULL;
    int ok = c && EVP_PKEY_public_check(c) == 1;
    EVP_PKEY_CTX_free(c);
    if (!ok) {
        EVP_PKEY_free(pk);
        return NULL;
    }
    return pk;
}

/* A PEM passphrase callback that declines: an encrypted key fails to load
 * instead of OpenSSL prompting on the controlling terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *u) {
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

int cb_ec_key_load_pem(const char *pem, size_t len, cb_ec_key_t **out) {
    *out = NULL;
    if (!pem || len == 0 || len > INT_MAX) return CB_EINVAL;
    ERR_set_mark();
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    if (!b) return done(CB_ENOMEM);
    EVP_PKEY *pk = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL);
    BIO_free(b);
    return done(pk ? wrap_key(pk, out) : CB_EINVAL);
}

int cb_ec_key_generate(cb_ec_key_t **out) {
    *out = NULL;
    ERR_set_mark();
    EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    return done(pk ? wrap_key(pk, out) : CB_EINVAL);
}

int cb_ec_key_from_raw(const uint8_t priv[CB_P256_PRIVATE_LEN], cb_ec_key_t **out) {
    *out = NULL;
    ERR_set_mark();
    EC_GROUP *g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    EC_POINT *p = g ? EC_POINT_new(g) : NULL;
    BIGNUM *d = BN_secure_new();
    uint8_t pub[CB_P256_PUBLIC_LEN];
    int rc = CB_ENOMEM;
    if (g && p && d && BN_bin2bn(priv, CB_P256_PRIVATE_LEN, d)) {
        BN_set_flags(d, BN_FLG_CONSTTIME);
        rc = CB_EINVAL;
        /* The public key is d*G, by OpenSSL's constant-time P-256 code. */
        if (!BN_is_zero(d) && BN_cmp(d, EC_GROUP_get0_order(g)) < 0
            && EC_POINT_mul(g, p, d, NULL, NULL, NULL) == 1
            && EC_POINT_point2oct(g, p, POINT_CONVERSION_UNCOMPRESSED, pub, sizeof pub, NULL) == sizeof pub) {
            EVP_PKEY *pk = p256_from_parts(d, pub);
            rc = pk ? wrap_key(pk, out) : CB_EINVAL;
        }
    }
    BN_clear_free(d);
    EC_POINT_free(p);
    EC_GROUP_free(g);
    return done(rc);
}

int cb_ec_key_private_pem(const cb_ec_key_t *k, char **pem_out) {
    *pem_out = NULL;
    ERR_set_mark();
    /* A secure-memory BIO: its buffer is wiped when freed. */
    BIO *b = BIO_new(BIO_s_secmem());
    if (!b) return done(CB_ENOMEM);
    int rc = CB_EINVAL;
    if (PEM_write_bio_PKCS8PrivateKey(b, k->pkey, NULL, NULL, 0, NULL, NULL) == 1) {
        char *data = NULL;
        long n = BIO_get_mem_data(b, &data);
        char *s = n > 0 ? malloc((size_t)n + 1) : NULL;
        rc = CB_ENOMEM;
        if (s) {
            memcpy(s, data, (size_t)n);
            s[n] = 0;
            *pem_out = s;
            rc = 0;
        }
    }
    BIO_free(b);
    return done(rc);
}

void cb_ec_key_pem_free(char *pem) {
    if (!pem) return;
    OPENSSL_cleanse(pem, strlen(pem));
    free(pem);
}

void cb_ec_key_public_raw(const cb_ec_key_t *k, uint8_t out[CB_P256_PUBLIC_LEN]) {
    memcpy(out, k->pub, CB_P256_PUBLIC_LEN);
}

void cb_ec_key_free(cb_ec_key_t *k) {
    if (!k) return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

/* ---- base64url ------------------------------------------------------------ */

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Writes the unpadded base64url of data to dst (room for the full length). */
static size_t b64url_put(const uint8_t *data, size_t len, char *dst) {
    size_t o = 0, i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
        for (int s = 18; s >= 0; s -= 6) dst[o++] = B64URL[(v >> s) & 63];
    }
    if (len - i > 0) {
        uint32_t v = (uint32_t)data[i] << 16 | (len - i == 2 ? (uint32_t)data[i + 1] << 8 : 0);
        for (int s = 18, n = (int)(len - i) + 1; n > 0; s -= 6, n--) dst[o++] = B64URL[(v >> s) & 63];
    }
    return o;
}

static size_t b64url_len(size_t len) { return len / 3 * 4 + (len % 3 ? len % 3 + 1 : 0); }

int cb_base64url_encode(const uint8_t *data, size_t len, char **out, size_t *out_len) {
    *out = NULL;
    if (len > (SIZE_MAX - 8) / 4 * 3) return CB_EINVAL;
    char *s = malloc(b64url_len(len) + 1);
    if (!s) return CB_ENOMEM;
    size_t n = b64url_put(data, len, s);
    s[n] = 0;
    *out = s;
    if (out_len) *out_len = n;
    return 0;
}

static int b64url_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

int cb_base64url_decode(const char *text, size_t len, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    /* Padding is optional, but when present it must complete a quantum. */
    if (len > 0 && text[len - 1] == '=') {
        if (len % 4 != 0) return CB_EINVAL;
        len -= len > 1 && text[len - 2] == '=' ? 2 : 1;
    }
    if (len % 4 == 1) return CB_EINVAL;
    uint8_t *b = malloc(len / 4 * 3 + 3);
    if (!b) return CB_ENOMEM;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value((unsigned char)text[i]);
        if (v < 0) { free(b); return CB_EINVAL; }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) { free(b); return CB_EINVAL; } /* non-zero unused bits */
    *out = b;
    *out_len = o;
    return 0;
}

/* ---- ES256 ------------------------------------------------------------------ */

/* ECDSA P-256 / SHA-256 over msg as JWS wants it: r || s, 32 bytes each,
 * not the DER SEQUENCE OpenSSL produces. */
static int es256_sign(EVP_PKEY *pk, const void *msg, size_t n, uint8_t sig[64]) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    uint8_t der[80]; /* a P-256 DER signature is at most 72 bytes */
    size_t dlen = sizeof der;
    int ok = c && EVP_DigestSignInit(c, NULL, EVP_sha256(), NULL, pk) == 1
        && EVP_DigestSign(c, der, &dlen, msg, n) == 1;
    EVP_MD_CTX_free(c);
    const unsigned char *p = der;
    ECDSA_SIG *s = ok ? d2i_ECDSA_SIG(NULL, &p, (long)dlen) : NULL;
    const BIGNUM *r = NULL, *sv = NULL;
    if (s) ECDSA_SIG_get0(s, &r, &sv);
    ok = s && BN_bn2binpad(r, sig, 32) == 32 && BN_bn2binpad(sv, sig + 32, 32) == 32;
    ECDSA_SIG_free(s);
    return ok ? 0 : CB_EINVAL;
}

static int es256_verify(EVP_PKEY *pk, const void *msg, size_t n, const uint8_t sig[64]) {
    ECDSA_SIG *s = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *sv = BN_bin2bn(sig + 32, 32, NULL);
    if (!s || !r || !sv || ECDSA_SIG_set0(s, r, sv) != 1) {
        ECDSA_SIG_free(s);
        BN_free(r);
        BN_free(sv);
        return CB_ENOMEM;
    }
    unsigned char *der = NULL;
    int dlen = i2d_ECDSA_SIG(s, &der);
    ECDSA_SIG_free(s);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = dlen > 0 && c && EVP_DigestVerifyInit(c, NULL, EVP_sha256(), NULL, pk) == 1
        && EVP_DigestVerify(c, der, (size_t)dlen, msg, n) == 1;
    EVP_MD_CTX_free(c);
    OPENSSL_free(der);
    return ok ? 0 : CB_EINVAL;
}

int cb_jwt_es256(const cb_ec_key_t *k, const char *header_json, size_t hlen,
                 const char *claims_json, size_t clen, char **jwt_out) {
    *jwt_out = NULL;
    if (hlen > INT_MAX || clen > INT_MAX) return CB_EINVAL;
    size_t hl = b64url_len(hlen), cl = b64url_len(clen), sl = b64url_len(64);
    char *t = malloc(hl + 1 + cl + 1 + sl + 1);
    if (!t) return CB_ENOMEM;
    b64url_put((const uint8_t *)header_json, hlen, t);
    t[hl] = '.';
    b64url_put((const uint8_t *)claims_json, clen, t + hl + 1);
    uint8_t sig[64];
    ERR_set_mark();
    int rc = es256_sign(k->pkey, t, hl + 1 + cl, sig);
    if (rc != 0) {
        free(t);
        return done(rc);
    }
    t[hl + 1 + cl] = '.';
    b64url_put(sig, sizeof sig, t + hl + 1 + cl + 1);
    t[hl + 1 + cl + 1 + sl] = 0;
    *jwt_out = t;
    return done(0);
}

/* Checks that part is base64url; when want > 0, that it decodes to exactly
 * want bytes, copied to dst. */
static int jws_part(const char *part, size_t len, size_t want, uint8_t *dst) {
    uint8_t *b = NULL;
    size_t n = 0;
    if (len == 0 || memchr(part, '=', len) || cb_base64url_decode(part, len, &b, &n) != 0) return CB_EINVAL;
    int ok = want == 0 || n == want;
    if (ok && want) memcpy(dst, b, n);
    free(b);
    return ok ? 0 : CB_EINVAL;
}

int cb_jwt_es256_verify(const uint8_t pub[CB_P256_PUBLIC_LEN], const char *jwt, size_t len) {
    const char *d1 = jwt ? memchr(jwt, '.', len) : NULL;
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - jwt)) : NULL;
    uint8_t sig[64];
    if (!d2 || jws_part(jwt, (size_t)(d1 - jwt), 0, NULL) != 0
        || jws_part(d1 + 1, (size_t)(d2 - d1 - 1), 0, NULL) != 0
        || jws_part(d2 + 1, len - (size_t)(d2 + 1 - jwt), sizeof sig, sig) != 0)
        return CB_EINVAL;
    ERR_set_mark();
    EVP_PKEY *pk = p256_public(pub, CB_P256_PUBLIC_LEN);
    int rc = pk ? es256_verify(pk, jwt, (size_t)(d2 - jwt), sig) : CB_EINVAL;
    EVP_PKEY_free(pk);
    return done(rc);
}

/* ---- Web Push (RFC 8291 over RFC 8188 aes128gcm) ---------------------------- */

static int hkdf_sha256(const uint8_t *salt, size_t saltlen, const uint8_t *ikm, size_t ikmlen,
                       const uint8_t *info, size_t infolen, uint8_t *out, size_t outlen) {
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *c = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    OSSL_PARAM p[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikmlen),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, saltlen),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, infolen),
        OSSL_PARAM_construct_end(),
    };
    int ok = c && EVP_KDF_derive(c, out, outlen, p) == 1;
    EVP_KDF_CTX_free(c);
    EVP_KDF_free(kdf);
    return ok ? 0 : CB_EINVAL;
}

static int ecdh_p256(EVP_PKEY *mine, EVP_PKEY *peer, uint8_t secret[32]) {
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, mine, NULL);
    size_t n = 32;
    int ok = c && EVP_PKEY_derive_init(c) == 1 && EVP_PKEY_derive_set_peer(c, peer) == 1
        && EVP_PKEY_derive(c, secret, &n) == 1 && n == 32;
    EVP_PKEY_CTX_free(c);
    return ok ? 0 : CB_EINVAL;
}

/* RFC 8291 section 3.4 then RFC 8188 section 2.2/2.3: the content key and
 * nonce of the one record, from the ECDH secret, auth secret and salt. The
 * info strings include their terminating NUL, as the RFCs require. */
static int webpush_keys(const uint8_t secret[32], const uint8_t auth[CB_WEBPUSH_AUTH_LEN],
                        const uint8_t ua_pub[CB_P256_PUBLIC_LEN], const uint8_t as_pub[CB_P256_PUBLIC_LEN],
                        const uint8_t salt[CB_WEBPUSH_SALT_LEN], uint8_t cek[16], uint8_t nonce[12]) {
    static const char key_label[] = "WebPush: info", cek_info[] = "Content-Encoding: aes128gcm",
                      nonce_info[] = "Content-Encoding: nonce";
    uint8_t info[sizeof key_label + 2 * CB_P256_PUBLIC_LEN], ikm[32];
    memcpy(info, key_label, sizeof key_label);
    memcpy(info + sizeof key_label, ua_pub, CB_P256_PUBLIC_LEN);
    memcpy(info + sizeof key_label + CB_P256_PUBLIC_LEN, as_pub, CB_P256_PUBLIC_LEN);
    int rc = hkdf_sha256(auth, CB_WEBPUSH_AUTH_LEN, secret, 32, info, sizeof info, ikm, sizeof ikm);
    if (rc == 0)
        rc = hkdf_sha256(salt, CB_WEBPUSH_SALT_LEN, ikm, sizeof ikm, (const uint8_t *)cek_info,
                         sizeof cek_info, cek, 16);
    if (rc == 0)
        rc = hkdf_sha256(salt, CB_WEBPUSH_SALT_LEN, ikm, sizeof ikm, (const uint8_t *)nonce_info,
                         sizeof nonce_info, nonce, 12);
    OPENSSL_cleanse(ikm, sizeof ikm);
    return rc;
}

/* The record key and nonce shared between `mine` and the peer's point. */
static int record_keys(const cb_ec_key_t *mine, const uint8_t peer_pub[CB_P256_PUBLIC_LEN], int mine_is_ua,
                       const uint8_t *auth, const uint8_t *salt, uint8_t cek[16], uint8_t nonce[12]) {
    EVP_PKEY *peer = p256_public(peer_pub, CB_P256_PUBLIC_LEN);
    uint8_t secret[32];
    int rc = peer ? ecdh_p256(mine->pkey, peer, secret) : CB_EINVAL;
    EVP_PKEY_free(peer);
    if (rc == 0)
        rc = webpush_keys(secret, auth, mine_is_ua ? mine->pub : peer_pub, mine_is_ua ? peer_pub : mine->pub,
                          salt, cek, nonce);
    OPENSSL_cleanse(secret, sizeof secret);
    return rc;
}

/* AES-128-GCM of plaintext || 0x02 (the last-record delimiter, no further
 * padding) into out: plen + 1 bytes of ciphertext, then the 16-byte tag. */
static int gcm_seal(const uint8_t cek[16], const uint8_t nonce[12], const uint8_t *pt, size_t plen, uint8_t *out) {
    static const uint8_t delimiter = 0x02;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int l1 = 0, l2 = 0, l3 = 0;
    int ok = c && EVP_EncryptInit_ex2(c, EVP_aes_128_gcm(), cek, nonce, NULL) == 1
        && (plen == 0 || EVP_EncryptUpdate(c, out, &l1, pt, (int)plen) == 1)
        && EVP_EncryptUpdate(c, out + l1, &l2, &delimiter, 1) == 1
        && EVP_EncryptFinal_ex(c, out + l1 + l2, &l3) == 1
        && (size_t)(l1 + l2 + l3) == plen + 1
        && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, TAG_LEN, out + plen + 1) == 1;
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : CB_EINVAL;
}

/* Opens ct (ciphertext then tag, ctlen > TAG_LEN) into out; CB_EINVAL when
 * the tag does not verify. */
static int gcm_open(const uint8_t cek[16], const uint8_t nonce[12], const uint8_t *ct, size_t ctlen, uint8_t *out) {
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int l1 = 0, l2 = 0, n = (int)(ctlen - TAG_LEN);
    int ok = c && EVP_DecryptInit_ex2(c, EVP_aes_128_gcm(), cek, nonce, NULL) == 1
        && EVP_DecryptUpdate(c, out, &l1, ct, n) == 1
        && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, TAG_LEN, (void *)(ct + n)) == 1
        && EVP_DecryptFinal_ex(c, out + l1, &l2) == 1 && l1 + l2 == n;
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : CB_EINVAL;
}

/* Fills body: the 86-byte header, then the sealed record. */
static int webpush_seal(const cb_ec_key_t *as, const uint8_t *ua_public, const uint8_t *auth,
                        const uint8_t *salt, const uint8_t *pt, size_t plen, uint8_t *body) {
    if (salt) memcpy(body, salt, CB_WEBPUSH_SALT_LEN);
    else if (RAND_bytes(body, CB_WEBPUSH_SALT_LEN) != 1) return CB_EINVAL;
    body[16] = (uint8_t)(RECORD_SIZE >> 24);
    body[17] = (uint8_t)(RECORD_SIZE >> 16);
    body[18] = (uint8_t)(RECORD_SIZE >> 8);
    body[19] = (uint8_t)RECORD_SIZE;
    body[20] = CB_P256_PUBLIC_LEN;
    memcpy(body + 21, as->pub, CB_P256_PUBLIC_LEN);
    uint8_t cek[16], nonce[12];
    int rc = record_keys(as, ua_public, 0, auth, body, cek, nonce);
    if (rc == 0) rc = gcm_seal(cek, nonce, pt, plen, body + HEADER_LEN);
    OPENSSL_cleanse(cek, sizeof cek);
    OPENSSL_cleanse(nonce, sizeof nonce);
    return rc;
}

int cb_webpush_encrypt(const uint8_t *ua_public, size_t ua_public_len,
                       const uint8_t *auth_secret, size_t auth_len,
                       const uint8_t *plaintext, size_t plen,
                       const cb_ec_key_t *as_key, const uint8_t *salt,
                       uint8_t **body_out, size_t *body_len) {
    *body_out = NULL;
    *body_len = 0;
    if (!ua_public || ua_public_len != CB_P256_PUBLIC_LEN || ua_public[0] != 0x04 || !auth_secret
        || auth_len != CB_WEBPUSH_AUTH_LEN || (!plaintext && plen) || plen > CB_WEBPUSH_MAX_PLAINTEXT)
        return CB_EINVAL;
    ERR_set_mark();
    cb_ec_key_t *ephemeral = NULL;
    int rc = as_key ? 0 : cb_ec_key_generate(&ephemeral);
    size_t n = HEADER_LEN + plen + 1 + TAG_LEN;
    uint8_t *body = rc == 0 ? malloc(n) : NULL;
    if (rc == 0 && !body) rc = CB_ENOMEM;
    if (rc == 0) rc = webpush_seal(as_key ? as_key : ephemeral, ua_public, auth_secret, salt, plaintext, plen, body);
    cb_ec_key_free(ephemeral);
    if (rc != 0) {
        free(body);
        return done(rc);
    }
    *body_out = body;
    *body_len = n;
    return done(0);
}

/* The plaintext length of an opened final record: strips the zero padding
 * and the 0x02 delimiter; -1 when there is no delimiter. */
static long unpad(const uint8_t *rec, size_t n) {
    while (n > 0 && rec[n - 1] == 0) n--;
    return n > 0 && rec[n - 1] == 0x02 ? (long)n - 1 : -1;
}

int cb_webpush_decrypt(const cb_ec_key_t *ua_key, const uint8_t *auth_secret, size_t auth_len,
                       const uint8_t *body, size_t body_len, uint8_t **plain_out, size_t *plain_len) {
    *plain_out = NULL;
    *plain_len = 0;
    if (!auth_secret || auth_len != CB_WEBPUSH_AUTH_LEN || !body || body_len < HEADER_LEN + 1 + TAG_LEN)
        return CB_EINVAL;
    uint32_t rs = (uint32_t)body[16] << 24 | (uint32_t)body[17] << 16 | (uint32_t)body[18] << 8 | body[19];
    size_t ctlen = body_len - HEADER_LEN;
    /* One record only (RFC 8291 section 4): it must fit in rs. */
    if (body[20] != CB_P256_PUBLIC_LEN || rs < 18 || ctlen > rs || ctlen > INT_MAX) return CB_EINVAL;
    uint8_t *out = malloc(ctlen - TAG_LEN);
    if (!out) return CB_ENOMEM;
    ERR_set_mark();
    uint8_t cek[16], nonce[12];
    int rc = record_keys(ua_key, body + 21, 1, auth_secret, body, cek, nonce);
    if (rc == 0) rc = gcm_open(cek, nonce, body + HEADER_LEN, ctlen, out);
    long m = rc == 0 ? unpad(out, ctlen - TAG_LEN) : -1;
    OPENSSL_cleanse(cek, sizeof cek);
    OPENSSL_cleanse(nonce, sizeof nonce);
    if (m < 0) {
        OPENSSL_cleanse(out, ctlen - TAG_LEN);
        free(out);
        return done(rc ? rc : CB_EINVAL);
    }
    *plain_out = out;
    *plain_len = (size_t)m;
    return done(0);
}
