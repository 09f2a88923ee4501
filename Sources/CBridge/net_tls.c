/* TLS material for wss:// without a certificate of the user's: a self-signed
 * one, generated once and kept in the state directory, whose SHA-256 the
 * pairing screen shows so a client can pin it. */
#include "cb_net.h"
#include "cb_error.h"
#include "cb_token.h"
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <string.h>
#include <unistd.h>

void net_set_error(const char *what, const char *path);

static int add_ext(X509 *cert, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext) return 0;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

static X509 *make_cert(EVP_PKEY *key, const char *host) {
    X509 *cert = X509_new();
    if (!cert) return NULL;
    unsigned char serial[16];
    int have_serial = cb_random_bytes(serial, sizeof serial) == 0;
    serial[0] &= 0x7f; /* a positive serial */
    BIGNUM *bn = have_serial ? BN_bin2bn(serial, sizeof serial, NULL) : NULL;
    char san[320];
    snprintf(san, sizeof san, "DNS:localhost,IP:127.0.0.1,IP:::1%s%s", host && *host ? "," : "",
             host && *host ? host : "");
    X509_NAME *name = X509_get_subject_name(cert);
    int ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) && X509_set_version(cert, 2) &&
             X509_gmtime_adj(X509_getm_notBefore(cert), -3600) &&
             X509_gmtime_adj(X509_getm_notAfter(cert), 10L * 365 * 24 * 3600) && X509_set_pubkey(cert, key) &&
             X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"codingbridge", -1, -1, 0) &&
             X509_set_issuer_name(cert, name) && add_ext(cert, NID_subject_alt_name, san) &&
             add_ext(cert, NID_basic_constraints, "critical,CA:FALSE") && X509_sign(cert, key, EVP_sha256());
    BN_free(bn);
    if (!ok) { X509_free(cert); return NULL; }
    return cert;
}

/* The SAN entry for `host`: "IP:..." for an address, else "DNS:...". */
static void san_entry(const char *host, char *out, size_t cap) {
    unsigned char a[16];
    int ip = inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
    int wildcard = !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
    if (wildcard) *out = 0;
    else snprintf(out, cap, "%s:%s", ip ? "IP" : "DNS", host);
}

/* A new file with exactly `mode` (whatever was there before), complete on
 * disk before it takes the name: a crash leaves the old pair or the new one. */
static int write_pem(const char *path, int mode, int (*write)(FILE *, void *), void *obj) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return 0;
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) return 0;
    FILE *f = fchmod(fd, (mode_t)mode) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) { close(fd); unlink(tmp); return 0; }
    int ok = write(f, obj) && fflush(f) == 0 && fsync(fd) == 0;
    ok = (fclose(f) == 0) && ok && rename(tmp, path) == 0;
    if (!ok) unlink(tmp);
    return ok;
}

static int write_key(FILE *f, void *key) { return PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL); }
static int write_cert(FILE *f, void *cert) { return PEM_write_X509(f, cert); }

int cb_tls_ensure_self_signed(const char *cert_path, const char *key_path, const char *host) {
    if (access(cert_path, R_OK) == 0 && access(key_path, R_OK) == 0) return 0;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key) return net_set_error("cannot generate a key", NULL), CB_EINVAL;
    char san[300];
    san_entry(host ? host : "", san, sizeof san);
    X509 *cert = make_cert(key, san);
    int ok = cert && write_pem(key_path, 0600, write_key, key) && write_pem(cert_path, 0644, write_cert, cert);
    if (!ok) net_set_error(cert ? "cannot write the certificate or key" : "cannot make a certificate", cert_path);
    X509_free(cert);
    EVP_PKEY_free(key);
    return ok ? 0 : CB_EINVAL;
}

int cb_tls_cert_sha256(const char *cert_path, char out[65]) {
    FILE *f = fopen(cert_path, "r");
    if (!f) return net_set_error("cannot read", cert_path), CB_EINVAL;
    X509 *cert = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!cert) return net_set_error("not a PEM certificate:", cert_path), CB_EINVAL;
    unsigned char md[32];
    unsigned int len = 0;
    int ok = X509_digest(cert, EVP_sha256(), md, &len);
    X509_free(cert);
    if (!ok || len != 32) return CB_EINVAL;
    for (unsigned i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}
