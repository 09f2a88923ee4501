/* Gates applied to a candidate value after a rule's regex matched: is it a
 * placeholder (a reference to a secret, not the secret), a word, a path, or
 * something machine-generated? Kept separate from the regexes because these
 * are judgements on the value as a whole, cheap to compute in C. */
#include "cb_redact.h"
#include "redact_internal.h"
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* Shannon entropy without clearing a 256-entry table per call: values are
 * short, so the counts of the bytes present are zeroed, counted and read
 * back in three passes over the value. H = log2(n) - sum(c log2 c) / n. */
/* c * log2(c) for the counts of short values, computed once. */
static double clog2c[257];
static pthread_once_t clog2c_once = PTHREAD_ONCE_INIT;
static void clog2c_init(void) {
    for (int c = 1; c <= 256; c++) clog2c[c] = c * log2((double)c);
}
static inline double c_log2_c(uint32_t c) { return c <= 256 ? clog2c[c] : c * log2((double)c); }

double cb_redact_entropy(const char *s, size_t len) {
    if (len == 0) return 0;
    pthread_once(&clog2c_once, clog2c_init);
    const unsigned char *u = (const unsigned char *)s;
    uint32_t counts[256];
    for (size_t i = 0; i < len; i++) counts[u[i]] = 0;
    for (size_t i = 0; i < len; i++) counts[u[i]]++;
    double sum = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t c = counts[u[i]];
        if (c) {
            sum += c_log2_c(c);
            counts[u[i]] = 0; /* each distinct byte once */
        }
    }
    return (len <= 256 ? clog2c[len] / (double)len : log2((double)len)) - sum / (double)len;
}

/* Placeholder needles: one list, scanned in one pass over the lowercased
 * value; a needle is compared only where the value has its first byte. */
static const char *const needles[] = {
    /* code that reads the secret from elsewhere */
    "os.environ", "os.getenv", "process.env", "getenv(", "env(", "env[", "secrets.", "vault:", "keychain",
    "ssm:", "arn:aws:secretsmanager", "[redacted", "redacted]",
    /* documentation filler */
    "your_", "your-", "yourapi", "your api", "changeme", "change_me", "change-me", "placeholder", "example", "dummy",
    "replace_me", "replace-me", "todo", "insert_", "put your",
    /* publishable keys: public by design */
    "pk_test_", "pk_live_", "pk.eyj",
};
#define NNEEDLES (sizeof needles / sizeof needles[0])

/* needles grouped by first byte: by_first[c] lists indexes, -1 terminated;
 * the static assertion below keeps every group within a row. */
static int8_t by_first[256][NNEEDLES + 1];
_Static_assert(NNEEDLES < 127, "needle indexes are int8_t");
static pthread_once_t by_first_once = PTHREAD_ONCE_INIT;
static void by_first_init(void) {
    memset(by_first, -1, sizeof by_first);
    for (size_t k = 0; k < NNEEDLES; k++) {
        unsigned char c = (unsigned char)needles[k][0];
        int j = 0;
        while (by_first[c][j] >= 0) j++;
        by_first[c][j] = (int8_t)k; /* a row holds every needle, so j stays in range */
    }
}

static int has_needle(const char *low, size_t len) {
    pthread_once(&by_first_once, by_first_init);
    for (size_t i = 0; i < len; i++) {
        const int8_t *list = by_first[(unsigned char)low[i]];
        for (int k = 0; list[k] >= 0; k++) {
            const char *nd = needles[list[k]];
            size_t j = 1;
            while (nd[j] && i + j < len && low[i + j] == nd[j]) j++;
            if (!nd[j]) return 1;
        }
    }
    return 0;
}

static int starts(const char *s, size_t len, const char *p) {
    size_t m = strlen(p);
    return len >= m && strncasecmp(s, p, m) == 0;
}

/* Character classes: 1 lower, 2 upper, 4 digit. */
enum { LOWER = 1, UPPER = 2, DIGIT = 4, ALNUM = 7 };
static const unsigned char cls[256] = {['a' ... 'z'] = LOWER, ['A' ... 'Z'] = UPPER, ['0' ... '9'] = DIGIT};

/* How many leading bytes of s are of the classes or among the extra bytes. */
static size_t span_of(const char *s, size_t len, unsigned classes, const char *extra) {
    size_t i = 0;
    while (i < len && ((cls[(unsigned char)s[i]] & classes) || (s[i] && strchr(extra, s[i])))) i++;
    return i;
}

/* Every byte of a non-empty s is of the classes or among the extra bytes. */
static int all_of(const char *s, size_t len, unsigned classes, const char *extra) {
    return len > 0 && span_of(s, len, classes, extra) == len;
}

/* An HCL expression naming where the value lives: a reference root then
 * identifiers joined by dots (random values have no such prefix). */
static int is_hcl_reference(const char *s, size_t len) {
    static const char *roots[] = {"var.", "data.", "local.", "module.", NULL};
    int rooted = 0;
    for (int i = 0; roots[i] && !rooted; i++) rooted = len > strlen(roots[i]) && strncmp(s, roots[i], strlen(roots[i])) == 0;
    return rooted && all_of(s, len, ALNUM, "_.-");
}

/* A BuildKit secret spec: id=<name>, then nothing or ",src=…" / ",env=…". */
static int is_buildkit_spec(const char *s, size_t len) {
    if (!starts(s, len, "id=")) return 0;
    size_t i = 3 + span_of(s + 3, len - 3, ALNUM, "_-.");
    return i > 3 && (i == len || starts(s + i, len - i, ",src=") || starts(s + i, len - i, ",env="));
}

int cb_redact_is_placeholder(const char *s, size_t len) {
    /* Trim surrounding quotes/space the caller may have left on. */
    while (len && (*s == ' ' || *s == '"' || *s == '\'')) { s++; len--; }
    while (len && (s[len - 1] == ' ' || s[len - 1] == '"' || s[len - 1] == '\'')) len--;
    if (len == 0) return 1;
    char low[256];
    if (len > sizeof low) len = sizeof low; /* values are capped at 256 by the rules */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        low[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    /* Shell/Make/compose references: $VAR, ${VAR}, $(cmd), %VAR% (Windows). */
    if (s[0] == '$') return 1;
    if (s[0] == '%' && len > 2 && s[len - 1] == '%') return 1;
    /* Template syntaxes: <your-key>, {{ .Values.secret }}, {secret}, %(pw)s, #{x};
     * a tool's note in place of the value: (sensitive value), (hidden). */
    /* "(sensitive value)", "(hidden)": letters and spaces only. */
    if ((s[0] == '<' && s[len - 1] == '>') || (s[0] == '(' && s[len - 1] == ')' && all_of(s + 1, len - 2, LOWER | UPPER, " ")))
        return 1;
    if (s[0] == '{' || s[0] == '[') return 1;
    if (starts(s, len, "%(") || starts(s, len, "#{") || starts(s, len, "@{")) return 1;
    /* A printf/SQL parameter (password=%s, pwd=?) or a BuildKit secret spec (id=npm,src=...). */
    if ((s[0] == '%' && len <= 4) || (len == 1 && s[0] == '?') || is_buildkit_spec(s, len)) return 1;
    /* A secret manager's name:version reference (--set-secrets=DB_PASS=db-pass:latest). */
    if (len > 7 && strncasecmp(s + len - 7, ":latest", 7) == 0 && all_of(s, len - 7, ALNUM, "_-.")) return 1;
    /* Where openssl and friends read the password from: -pass file:key.txt, env:VAR, fd:3. */
    if (starts(s, len, "file:") || starts(s, len, "env:") || starts(s, len, "fd:")) return 1;
    /* A file the tool reads the value from (password=@password.txt). */
    if (s[0] == '@' && len > 2 && cb_redact_is_path_like(s + 1, len - 1)) return 1;
    /* The message of a shell ${VAR:?message} (an error text, not a default), or the
     * variable's own name there (DB_PASS, API_TOKEN_2). */
    if (s[0] == '?' && len > 1 && (cb_redact_is_plain_word(s + 1, len - 1) || all_of(s + 1, len - 1, UPPER | DIGIT, "_")))
        return 1;
    /* Terraform/HCL references: var.x, data.aws_ssm_parameter.x.value, local.x, module.x.y. */
    if (is_hcl_reference(s, len)) return 1;
    /* A YAML tag instead of the value (password: !vault |, !Ref DbPassword). */
    if (s[0] == '!' && len > 1 && cb_redact_is_plain_word(s + 1, len - 1)) return 1;
    /* Code that reads the secret from somewhere else; documentation filler. */
    if (has_needle(low, len)) return 1;
    /* Masked or dummy values: ****, xxxx, ...., same character repeated. */
    size_t same = 1;
    for (size_t i = 1; i < len; i++) same += s[i] == s[0];
    if (same == len && (len >= 3 || s[0] == '*')) return 1;
    size_t masked = 0;
    for (size_t i = 0; i < len; i++) masked += s[i] == '*' || s[i] == 'x' || s[i] == 'X' || s[i] == '.';
    if (len >= 4 && masked * 10 >= len * 8) return 1;
    return 0;
}

/* s (len bytes) is one of words, ignoring case. The first byte is compared
 * before any length: most values share it with no word. */
static int in_word_list(const char *const *words, const char *s, size_t len) {
    if (len == 0) return 0;
    unsigned char first = (unsigned char)s[0] | 0x20;
    for (int i = 0; words[i]; i++)
        if ((unsigned char)words[i][0] == first && strlen(words[i]) == len && strncasecmp(s, words[i], len) == 0)
            return 1;
    return 0;
}

int cb_redact_is_stopword(const char *s, size_t len) {
    static const char *words[] = {
        "true", "false", "null", "nil", "none", "yes", "no", "on", "off", "required", "optional",
        "string", "str", "bool", "boolean", "int", "integer", "number", "empty", "undefined",
        "hidden", "masked", "default", "unset", "not set", "n/a", "na", "missing",
        "invalid", "incorrect", "expired", "changed", "reset", "updated", "saved", "the", "a", "an",
        "is", "was", "your", "my", "please", "enter", "type", "prompt", "ask", "generated", "auto",
        "env", "file", "stdin", "or", "and", "to", "with", "for", "of", "in", "if", "then", "not", "as", "when",
        "from", "by", "instead", "wrong", "weak", "strong", "correct", "valid", "blank", "short", "long",
        "stored", "encrypted", "hashed", "protected", "same", "different", "sent", "set", "needed",
        "secret", "unknown", "ignored", "redacted", "removed", "rotated", "revoked", "unchanged",
        "password", "passwd", "passphrase", "pass", "pwd", "token", NULL};
    return in_word_list(words, s, len);
}

/* The words for a secret itself: as a value they are a label or a
 * placeholder unless the code quotes them. */
int cb_redact_is_credential_word(const char *s, size_t len) {
    static const char *words[] = {"secret", "password", "passwd", "passphrase", NULL};
    return in_word_list(words, s, len);
}

int cb_redact_is_path(const char *s, size_t len) {
    if (len < 2) return 0;
    int rooted = s[0] == '/' || (s[0] == '~' && s[1] == '/') || (s[0] == '.' && (s[1] == '/' || s[1] == '.'));
    if (!rooted) return 0;
    /* base64 starts with "/" one time in 64: "+", "=" or a 40-byte segment
     * say it is not a path. */
    size_t seg = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '+' || s[i] == '=') return 0;
        seg = s[i] == '/' ? 0 : seg + 1;
        if (seg >= 40) return 0;
    }
    /* A path has a second separator or ends in a file name with an extension. */
    for (size_t i = 1; i < len; i++) if (s[i] == '/' || s[i] == '.') return 1;
    return 0;
}


static int is_hex(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return 0;
    }
    return 1;
}

/* An object key or relative file path: segments joined by '/' ending in a short
 * extension (uploads/2026/11/<uuid>.png); base64 does not end in ".png". */
static int is_file_key(const char *s, size_t len) {
    if (!memchr(s, '/', len)) return 0;
    size_t i = len;
    while (i > 0 && cls[(unsigned char)s[i - 1]] & 1) i--;
    size_t ext = len - i;
    return ext >= 2 && ext <= 4 && i > 1 && s[i - 1] == '.' && cb_redact_is_path_like(s, len);
}

int cb_redact_looks_random(const char *s, size_t len) {
    if (len < 12) return 0;
    const unsigned char *u = (const unsigned char *)s;
    /* One pass: the classes present overall, how much is punctuation, and
     * whether some run of letters/digits mixes them.
     * - Generated secrets mix letters and digits; words, identifiers
     *   (get_user_token), numbers and prose do not.
     * - Mostly punctuation or spaces: prose, a date, a version list.
     * - Identifiers are words and numbers joined by separators (prod-db-2024,
     *   us-east-1, sqlite3_version, NL80211_KEY_MAX); generated secrets have
     *   a run of 8+ letters and digits that mixes them: two or more digits,
     *   or a digit with both cases (a8Qm3kP1, 550e8400). */
    unsigned all = 0, rmask = 0;
    size_t other = 0, run = 0, rd = 0;
    int mixed = 0;
    for (size_t i = 0; i <= len; i++) {
        unsigned k = i < len ? cls[u[i]] : 0;
        if (k) {
            run++;
            rmask |= k;
            rd += k >> 2;
            continue;
        }
        other += i < len;
        all |= rmask;
        mixed |= run >= 8 && rd >= 1 && rd < run && (rd >= 2 || (rmask & 3) == 3);
        run = rd = rmask = 0;
    }
    if (!(all & 4) || !(all & 3)) return 0;
    if (other * 4 > len) return 0;
    if (!mixed) return 0;
    double h = cb_redact_entropy(s, len);
    /* A random string over [A-Za-z0-9] of length n has an entropy close to
     * log2(min(n, 62)); require most of it (12 chars: ~3.3, 20+: ~3.6). */
    double need = len >= 20 ? 3.4 : 3.0;
    /* Hex has 16 symbols, so a random hex value's entropy grows slowly with
     * its length: the floors sit near the 1st percentile of random draws
     * (20 chars: 2.90, 24: 3.04, 32: 3.27); one flat 3.1 dropped one random
     * 20-char hex secret (a Pusher secret) in ten. */
    if (is_hex(s, len)) need = len >= 32 ? 3.1 : len >= 24 ? 2.95 : len >= 20 ? 2.8 : len >= 16 ? 2.6 : 2.8;
    if (h < need) return 0;
    /* Last, the costlier judgements on what passed the cheap ones. */
    if (cb_redact_is_placeholder(s, len) || cb_redact_is_path(s, len) || is_file_key(s, len)) return 0;
    for (size_t i = 0; i + 3 <= len; i++) /* a URL: url-credentials judges those */
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') return 0;
    return 1;
}

/* Letters only ("weak", "Secret"): in prose, a word, not a password. */
int cb_redact_is_plain_word(const char *s, size_t len) {
    if (len == 0) return 0;
    for (size_t i = 0; i < len; i++)
        if (!(cls[(unsigned char)s[i]] & 3)) return 0;
    return 1;
}

/* Words of a key name that make it about a password rather than the password
 * itself: PASSWORD_MIN_LENGTH=12, passwordField: "pw", --password-file. */
static const char *const benign_words[] = {
    "length", "len", "min", "max", "size", "count", "policy", "file", "path", "dir", "prompt", "field",
    "label", "hint", "regex", "pattern", "rule", "rules", "reset", "expiry", "expires", "expiration",
    "age", "strength", "enabled", "required", "type", "mode", "url", "uri", "changed", "updated",
    "timeout", "ttl", "attempts", "retries", "complexity", "history", "command", "cmd", "placeholder",
    "input", "less", "chars", "digits", "validation", "validator", "error", "message", "msg", "title",
    "text", "help", "format", "algorithm", "algo", "store", "manager", "provider", "source", "method",
    "stdin", "env", "var", "lifetime", "days", "interval", "param", "parameter", "encryption", "scheme", "maps", NULL};

static int benign_segment(const char *w, size_t n) {
    char low[16];
    if (n == 0 || n > sizeof low) return 0;
    for (size_t i = 0; i < n; i++) low[i] = (char)((cls[(unsigned char)w[i]] & 2) ? w[i] + 32 : w[i]);
    for (int i = 0; benign_words[i]; i++)
        if (strlen(benign_words[i]) == n && memcmp(low, benign_words[i], n) == 0) return 1;
    return 0;
}

/* The identifier the match starts with (after leading -, $, quotes), cut
 * into words at _ - . and camelCase humps: is one of them benign? */
int cb_redact_benign_name(const char *s, size_t len) {
    size_t i = 0;
    while (i < len && !cls[(unsigned char)s[i]]) i++;
    size_t w = i;
    for (; i <= len; i++) {
        unsigned k = i < len ? cls[(unsigned char)s[i]] : 0;
        int hump = k == 2 && i > w && cls[(unsigned char)s[i - 1]] == 1;
        if (k && !hump) continue;
        if (benign_segment(s + w, i - w)) return 1;
        if (hump) { w = i; continue; }
        if (i >= len || !(s[i] == '_' || s[i] == '-' || s[i] == '.')) return 0;
        w = i + 1;
    }
    return 0;
}

/* A file name or relative path: word bytes with a "." or "/" (secrets.txt, conf/pw). */
int cb_redact_is_path_like(const char *s, size_t len) {
    int sep = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.' || c == '/') sep = 1;
        else if (!cls[c] && c != '_' && c != '-') return 0;
    }
    return sep;
}

/* A PowerShell cmdlet (Verb-Noun: Read-Host, Get-Content, ConvertTo-SecureString)
 * given unquoted as a value: $pw = Read-Host -AsSecureString runs a command. */
int cb_redact_is_cmdlet(const char *s, size_t len) {
    size_t i = 0;
    if (len < 5 || !(cls[(unsigned char)s[0]] & 2)) return 0;
    for (i = 1; i < len && (cls[(unsigned char)s[i]] & 3); i++) {}
    if (i < 3 || i + 2 >= len || s[i] != '-' || !(cls[(unsigned char)s[i + 1]] & 2)) return 0;
    for (i += 2; i < len && (cls[(unsigned char)s[i]] & 3); i++) {}
    return i == len;
}
