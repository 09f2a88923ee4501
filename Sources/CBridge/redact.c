/* The redaction engine (see include/cb_redact.h for the design). */
#include "cb_redact.h"
#include "cb_error.h"
#include "redact_internal.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

/* Limits on every match. Built-in patterns are linear and never come close;
 * these exist for custom rules (catastrophic backtracking) and as a backstop. */
#define CB_REDACT_MATCH_LIMIT 2000000u  /* backtracking steps per match attempt */
#define CB_REDACT_DEPTH_LIMIT 5000u     /* nested backtracking (interpreter) */
#define CB_REDACT_HEAP_LIMIT  (32u * 1024) /* KiB of heap frames (interpreter) */
#define CB_REDACT_MAX_PATTERN 4096      /* bytes in a custom pattern */
#define CB_REDACT_CUSTOM_WINDOW 64      /* start positions per custom-rule match call */
#define CB_REDACT_CUSTOM_BUDGET_NS 250000000ull /* matching time per custom rule per call */

struct rule {
    char *id;
    char *replacement; /* custom rules only; NULL: [REDACTED] / [REDACTED:id] */
    size_t id_len, replacement_len;
    pcre2_code *code;
    unsigned back, gate, flags;
    double min_entropy;
    int anchored; /* tried only at its triggers */
    int jit;
    int has_group;
};

struct trig {
    uint32_t pre, mask; /* the first (up to) 4 bytes, folded unless cs: one compare rejects most */
    unsigned char lit[32];
    uint8_t len, cs;
    uint16_t rule;
    int32_t next; /* next trigger with the same folded first byte */
};

struct cb_redact_rules {
    struct rule *rules;
    size_t nrules;
    struct trig *trigs;
    size_t ntrigs;
    int32_t first[1024];  /* 2-3 byte triggers: list heads by bucket() of the first two bytes */
    int32_t first4[4096]; /* longer triggers: list heads by bucket4() of the first four */
    uint64_t bloom[(1u << 18) / 64]; /* set of trigger prefixes as 6-bit-coded trigrams */
    /* A trigram hit is confirmed by the fourth byte: the trigrams of 2- and
     * 3-byte triggers (short3), and hashed 4-byte prefixes of longer ones
     * (bloom4). English words share trigrams with keywords (path/pat.,
     * main/mail, status/stab) far more often than 4-grams. */
    uint64_t short3[(1u << 18) / 64];
    uint64_t bloom4[(1u << 16) / 64];
    pcre2_match_context *mctx; /* read-only after creation: shareable */
    uint64_t budget_ns;        /* custom rules: matching time per call */
    size_t first_custom;       /* rules[first_custom...] are custom (unanchored) */
    uint32_t max_pairs;
    int all_jit;
};


/* The prefilter keys trigrams by 6-bit codes: letters (either case), digits
 * and the punctuation that appears in triggers get codes of their own; other
 * bytes share a few. A trigram is then 18 bits, computed as a rolling value
 * (shift in one code per byte), and indexes a 2^18-bit set (32 KiB). */
static unsigned char code6[256];
static void code6_init(void) {
    static const char punct[] = "_-.:/=\"'@$\\~{ ";
    for (int c = 0; c < 256; c++) code6[c] = (unsigned char)(51 + c % 13);
    for (int c = 'a'; c <= 'z'; c++) code6[c] = code6[c - 32] = (unsigned char)(c - 'a' + 1);
    for (int c = '0'; c <= '9'; c++) code6[c] = (unsigned char)(c - '0' + 27);
    for (int i = 0; punct[i]; i++) code6[(unsigned char)punct[i]] = (unsigned char)(37 + i);
}
static inline uint32_t tri(uint32_t a, uint32_t b, uint32_t c) {
    return (code6[a] << 12 | code6[b] << 6 | code6[c]) & 0x3FFFFu;
}

static unsigned char fold[256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static void tables_init(void) {
    for (int c = 0; c < 256; c++) fold[c] = (unsigned char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    code6_init();
}
static void fold_init(void) { pthread_once(&tables_once, tables_init); }
/* Trigger lists are keyed by the first two folded bytes (short triggers) or
 * the first four (the rest): a position walks only triggers that can match. */
static inline uint32_t bucket(uint32_t a, uint32_t b) { return (a * 31u + b) & 1023u; }
static inline uint32_t bucket4(uint32_t low4) { return (low4 * 2654435761u) >> 20; }

static inline void bit_set(uint64_t *set, uint32_t h) { set[h >> 6] |= 1ull << (h & 63); }
static inline int bit_has(const uint64_t *set, uint32_t h) { return (set[h >> 6] >> (h & 63)) & 1; }
static inline uint32_t quad(uint32_t tri3, uint32_t d) { return ((tri3 << 6 | code6[d]) * 2654435761u) >> 16; }

static void set_error(cb_redact_compile_error *err, int code, size_t off, size_t idx, const char *msg) {
    if (!err) return;
    err->code = code;
    err->offset = off;
    err->rule_index = idx;
    snprintf(err->message, sizeof err->message, "%s", msg);
}

static int compile_one(const char *pat, size_t len, uint32_t opts, pcre2_code **out, int *jit, size_t idx,
                       cb_redact_compile_error *err, int allow_jit) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat, len, opts, &ec, &eo, NULL);
    if (!code) {
        char msg[256];
        pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof msg);
        set_error(err, ec, eo, idx, msg);
        return CB_EINVAL;
    }
    /* JIT is an optimisation: where it is unavailable (platform, SELinux
     * execmem) the interpreter runs the same pattern under the same limits. */
    *jit = allow_jit && pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    *out = code;
    return 0;
}

/* Custom patterns: bytes, never UTF (so invalid UTF-8 input can't make a rule
 * error out), bounded length. */
#define CUSTOM_OPTS (PCRE2_NEVER_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_USE_OFFSET_LIMIT)

int cb_redact_validate_pattern(const char *pattern, size_t len, cb_redact_compile_error *err) {
    if (!pattern) return CB_EINVAL;
    if (len > CB_REDACT_MAX_PATTERN) {
        set_error(err, 0, CB_REDACT_MAX_PATTERN, 0, "pattern longer than 4096 bytes");
        return CB_EINVAL;
    }
    pcre2_code *code;
    int jit;
    int rc = compile_one(pattern, len, CUSTOM_OPTS, &code, &jit, 0, err, 0);
    if (rc) return rc;
    pcre2_code_free(code);
    return 0;
}

/* A rule id appears in labels ("[REDACTED:<id>]") and findings: 1-64 bytes,
 * no control characters and no brackets (they would make a label ambiguous).
 * Settings may use names like "Internal hosts". */
static int valid_id(const char *id) {
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c < 0x20 || c == 0x7f || c == '[' || c == ']') return 0;
    }
    return 1;
}

void cb_redact_rules_free(cb_redact_rules_t *rs) {
    if (!rs) return;
    for (size_t i = 0; i < rs->nrules; i++) {
        free(rs->rules[i].id);
        free(rs->rules[i].replacement);
        pcre2_code_free(rs->rules[i].code);
    }
    free(rs->rules);
    free(rs->trigs);
    pcre2_match_context_free(rs->mctx);
    free(rs);
}

static uint32_t fold4(const unsigned char *lit) {
    return (uint32_t)fold[lit[0]] | (uint32_t)fold[lit[1]] << 8 | (uint32_t)fold[lit[2]] << 16 | (uint32_t)fold[lit[3]] << 24;
}

static int add_trigger(struct cb_redact_rules *rs, const char *lit, size_t rule, int cs) {
    size_t len = strlen(lit);
    if (len < 2 || len > sizeof rs->trigs[0].lit) return CB_EINVAL;
    struct trig *t = &rs->trigs[rs->ntrigs];
    for (size_t i = 0; i < len; i++)
        t->lit[i] = cs ? (unsigned char)lit[i] : fold[(unsigned char)lit[i]];
    t->len = (uint8_t)len;
    t->cs = (uint8_t)cs;
    t->pre = t->mask = 0;
    for (size_t i = 0; i < len && i < 4; i++) {
        t->pre |= (uint32_t)t->lit[i] << (8 * i);
        t->mask |= 0xFFu << (8 * i);
    }
    t->rule = (uint16_t)rule;
    unsigned char f0 = fold[(unsigned char)lit[0]], f1 = fold[(unsigned char)lit[1]];
    /* Append at the list's tail so rules are tried in catalog order. */
    t->next = -1;
    int32_t *link = len < 4 ? &rs->first[bucket(f0, f1)] : &rs->first4[bucket4(t->cs ? fold4(t->lit) : t->pre)];
    while (*link >= 0) link = &rs->trigs[*link].next;
    *link = (int32_t)rs->ntrigs;
    if (len >= 3) {
        uint32_t h = tri(f0, f1, fold[(unsigned char)lit[2]]);
        bit_set(rs->bloom, h);
        if (len == 3) bit_set(rs->short3, h);
        else bit_set(rs->bloom4, quad(h, fold[(unsigned char)lit[3]]));
    } else {
        for (int x = 0; x < 256; x++) {
            bit_set(rs->bloom, tri(f0, f1, fold[x]));
            bit_set(rs->short3, tri(f0, f1, fold[x]));
        }
    }
    rs->ntrigs++;
    return 0;
}

/* An empty rule set with room for n rules and the catalog's triggers. */
static struct cb_redact_rules *rules_alloc(size_t nb, size_t n) {
    struct cb_redact_rules *rs = calloc(1, sizeof *rs);
    if (!rs) return NULL;
    memset(rs->first, 0xff, sizeof rs->first);
    memset(rs->first4, 0xff, sizeof rs->first4);
    rs->rules = calloc(n ? n : 1, sizeof *rs->rules);
    size_t ntr = 0;
    for (size_t i = 0; i < nb; i++)
        for (int k = 0; k < CB_REDACT_MAX_TRIGGERS && cb_redact_catalog[i].triggers[k]; k++) ntr++;
    rs->trigs = calloc(ntr ? ntr : 1, sizeof *rs->trigs);
    rs->mctx = pcre2_match_context_create(NULL);
    rs->all_jit = 1;
    rs->max_pairs = 1;
    rs->budget_ns = CB_REDACT_CUSTOM_BUDGET_NS;
    if (!rs->rules || !rs->trigs || !rs->mctx) { cb_redact_rules_free(rs); return NULL; }
    pcre2_set_match_limit(rs->mctx, CB_REDACT_MATCH_LIMIT);
    pcre2_set_depth_limit(rs->mctx, CB_REDACT_DEPTH_LIMIT);
    pcre2_set_heap_limit(rs->mctx, CB_REDACT_HEAP_LIMIT);
    return rs;
}

/* What compile_rule needs to know about one rule's source. */
struct rule_src {
    const char *id, *pat;
    size_t plen;
    uint32_t opts;
};

static void builtin_source(struct rule *r, size_t i, struct rule_src *src) {
    const cb_redact_rule_def *d = &cb_redact_catalog[i];
    src->id = d->id;
    src->pat = d->pattern;
    src->plen = PCRE2_ZERO_TERMINATED;
    src->opts = PCRE2_ANCHORED;
    r->back = d->back;
    r->gate = d->gate;
    r->flags = d->flags;
    r->min_entropy = d->min_entropy;
    r->anchored = 1;
}

/* Checks a caller's rule (its index among the custom ones is ci) against
 * the rules before it. */
static int custom_source(struct cb_redact_rules *rs, size_t i, const cb_redact_custom_rule *c, size_t ci,
                         struct rule_src *src, cb_redact_compile_error *err) {
    struct rule *r = &rs->rules[i];
    if (!valid_id(c->id)) {
        set_error(err, 0, 0, ci, "rule id must be 1-64 bytes without control characters or brackets");
        return CB_EINVAL;
    }
    for (size_t j = 0; j < i; j++)
        if (strcmp(rs->rules[j].id, c->id) == 0) { set_error(err, 0, 0, ci, "duplicate rule id"); return CB_EINVAL; }
    if (!c->pattern) { set_error(err, 0, 0, ci, "missing pattern"); return CB_EINVAL; }
    src->id = c->id;
    src->pat = c->pattern;
    src->plen = c->pattern_len ? c->pattern_len : strlen(c->pattern);
    if (src->plen > CB_REDACT_MAX_PATTERN) {
        set_error(err, 0, CB_REDACT_MAX_PATTERN, ci, "pattern longer than 4096 bytes");
        return CB_EINVAL;
    }
    src->opts = CUSTOM_OPTS;
    if (c->replacement) {
        r->replacement = strdup(c->replacement);
        if (!r->replacement) return CB_ENOMEM;
        r->replacement_len = strlen(r->replacement);
    }
    return 0;
}

static int compile_rule(struct cb_redact_rules *rs, size_t i, size_t nb, const struct rule_src *src,
                        unsigned flags, cb_redact_compile_error *err) {
    struct rule *r = &rs->rules[i];
    r->id = strdup(src->id);
    if (!r->id) return CB_ENOMEM;
    r->id_len = strlen(r->id);
    int rc = compile_one(src->pat, src->plen, src->opts, &r->code, &r->jit, i < nb ? i : i - nb, err,
                         !(flags & CB_REDACT_NO_JIT));
    if (rc) {
        if (i < nb && err) { /* a catalog bug: say which rule */
            char m[sizeof err->message];
            snprintf(m, sizeof m, "built-in %s: %.200s", src->id, err->message);
            memcpy(err->message, m, sizeof m);
        }
        return rc;
    }
    rs->all_jit &= r->jit;
    uint32_t cap = 0;
    pcre2_pattern_info(r->code, PCRE2_INFO_CAPTURECOUNT, &cap);
    r->has_group = cap > 0;
    if (cap + 1 > rs->max_pairs) rs->max_pairs = cap + 1;
    return 0;
}

static int add_builtin_triggers(struct cb_redact_rules *rs, size_t i) {
    const cb_redact_rule_def *d = &cb_redact_catalog[i];
    for (int k = 0; k < CB_REDACT_MAX_TRIGGERS && d->triggers[k]; k++) {
        int rc = add_trigger(rs, d->triggers[k], i, (d->flags & CB_TRIG_CASE) != 0);
        if (rc) return rc;
    }
    return 0;
}

int cb_redact_rules_create(const cb_redact_custom_rule *custom, size_t ncustom, unsigned flags,
                           cb_redact_rules_t **out, cb_redact_compile_error *err) {
    if (!out || (ncustom && !custom)) return CB_EINVAL;
    *out = NULL;
    if (err) memset(err, 0, sizeof *err);
    fold_init();
    size_t nb = (flags & CB_REDACT_NO_BUILTINS) ? 0 : cb_redact_catalog_count;
    if (nb + ncustom > 65535) return CB_ETOOBIG;
    struct cb_redact_rules *rs = rules_alloc(nb, nb + ncustom);
    if (!rs) return CB_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < nb + ncustom && !rc; i++) {
        struct rule_src src;
        rs->nrules = i + 1; /* from here on, a failure frees this entry too */
        if (i < nb) builtin_source(&rs->rules[i], i, &src);
        else rc = custom_source(rs, i, &custom[i - nb], i - nb, &src, err);
        if (!rc) rc = compile_rule(rs, i, nb, &src, flags, err);
        if (!rc && i < nb) rc = add_builtin_triggers(rs, i);
    }
    if (rc) {
        cb_redact_rules_free(rs);
        return rc;
    }
    rs->nrules = nb + ncustom;
    rs->first_custom = nb;
    *out = rs;
    return 0;
}

size_t cb_redact_rules_count(const cb_redact_rules_t *rs) { return rs ? rs->nrules : 0; }
const char *cb_redact_rule_id(const cb_redact_rules_t *rs, size_t i) {
    return rs && i < rs->nrules ? rs->rules[i].id : NULL;
}
int cb_redact_rules_jit(const cb_redact_rules_t *rs) { return rs ? rs->all_jit : 0; }

void cb_redact_rules_set_time_budget(cb_redact_rules_t *rs, uint32_t ms) {
    if (rs) rs->budget_ns = (uint64_t)(ms ? ms : 1) * 1000000ull;
}

size_t cb_redact_builtin_count(void) { return cb_redact_catalog_count; }
const char *cb_redact_builtin_id(size_t i) { return i < cb_redact_catalog_count ? cb_redact_catalog[i].id : NULL; }
const char *cb_redact_builtin_family(size_t i) {
    return i < cb_redact_catalog_count ? cb_redact_catalog[i].family : NULL;
}
const char *cb_redact_builtin_description(size_t i) {
    return i < cb_redact_catalog_count ? cb_redact_catalog[i].description : NULL;
}
const char *cb_redact_builtin_pattern(size_t i) {
    return i < cb_redact_catalog_count ? cb_redact_catalog[i].pattern : NULL;
}

void cb_redact_result_init(cb_redact_result_t *res) { memset(res, 0, sizeof *res); }

void cb_redact_result_free(cb_redact_result_t *res) {
    if (!res) return;
    free(res->findings);
    free(res->buf);
    free(res->skip);
    pcre2_match_data_free(res->md);
    pcre2_match_context_free(res->cmctx);
    memset(res, 0, sizeof *res);
}

/* ---- one call --------------------------------------------------------- */

struct call {
    const struct cb_redact_rules *rs;
    const unsigned char *u;
    size_t n;
    cb_redact_result_t *res;
    pcre2_match_data *md;
};

static int push(struct call *c, uint32_t rule, uint32_t flags, size_t s, size_t e, size_t ms, size_t me) {
    cb_redact_result_t *res = c->res;
    if (res->nfindings == res->fcap) {
        size_t cap = res->fcap ? res->fcap * 2 : 16;
        cb_redact_finding *f = realloc(res->findings, cap * sizeof *f);
        if (!f) return CB_ENOMEM;
        res->findings = f;
        res->fcap = cap;
    }
    res->findings[res->nfindings++] = (cb_redact_finding){rule, flags, s, e, ms, me};
    return 0;
}

static int prepare(struct call *c) {
    cb_redact_result_t *res = c->res;
    if (!res->md) {
        res->md = pcre2_match_data_create(c->rs->max_pairs < 4 ? 4 : c->rs->max_pairs, NULL);
        if (!res->md) return CB_ENOMEM;
    }
    c->md = res->md;
    return 0;
}

/* Where rule ri's last match in this call ended (0: none). A call matches
 * few distinct rules, so a short list (skip[0] pairs after it) beats a
 * per-rule array that would be cleared on every call. */
static size_t skip_get(const cb_redact_result_t *res, size_t ri) {
    size_t n = res->skip ? res->skip[0] : 0;
    for (size_t k = 0; k < n; k++)
        if (res->skip[1 + 2 * k] == ri) return res->skip[2 + 2 * k];
    return 0;
}

static int skip_set(cb_redact_result_t *res, size_t ri, size_t next) {
    size_t n = res->skip ? res->skip[0] : 0;
    for (size_t k = 0; k < n; k++)
        if (res->skip[1 + 2 * k] == ri) { res->skip[2 + 2 * k] = next; return 0; }
    if (n == res->skipcap) {
        size_t cap = res->skipcap ? res->skipcap * 2 : 8;
        size_t *s = realloc(res->skip, (1 + 2 * cap) * sizeof *s);
        if (!s) return CB_ENOMEM;
        res->skip = s;
        res->skipcap = cap;
    }
    res->skip[1 + 2 * n] = ri;
    res->skip[2 + 2 * n] = next;
    res->skip[0] = n + 1;
    return 0;
}

/* A plain word ("attribute", "New", "Ditto.") followed by more words, or
 * ending a sentence, is prose ("PASSWORD: attribute for passing the key",
 * ChangeLog lines "* passphrase.c: New file."), not a password. */
static int prose_follows(const unsigned char *v, size_t len, const unsigned char *end_of_text) {
    if (len == 0) return 0;
    int punct = v[len - 1] != 0 && strchr(".,;:!?", v[len - 1]) != NULL;
    size_t wl = punct ? len - 1 : len;
    if (wl == 0 || !((v[0] >= 'a' && v[0] <= 'z') || (v[0] >= 'A' && v[0] <= 'Z'))) return 0;
    for (size_t i = 1; i < wl; i++)
        if (v[i] < 'a' || v[i] > 'z') return 0;
    if (punct) return 1;
    const unsigned char *p = v + len;
    return p + 1 < end_of_text && p[0] == ' ' && ((p[1] >= 'a' && p[1] <= 'z') || (p[1] >= 'A' && p[1] <= 'Z'));
}

static inline int is_alpha_(unsigned char x) { return (x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Z') || x == '_'; }

static int html_entity_at(const char *s, size_t len) {
    size_t i = 1;
    while (i < len && i < 8 && ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z')) i++;
    return i > 1 && i < len && s[i] == ';';
}

static int quoted_at(const unsigned char *name, const unsigned char *v) {
    return v > name && (v[-1] == '"' || v[-1] == '\'' || v[-1] == '`');
}

/* A quoted literal is what the code uses, even a weak word: $mail->Password =
 * 'secret', password 'password' in a Gradle block. Unquoted, "password: secret"
 * may be a sentence, so the stopwords apply. */
static int password_ok(const unsigned char *name, const unsigned char *v, size_t len, const unsigned char *end_of_text) {
    const char *s = (const char *)v;
    int stop = cb_redact_is_stopword(s, len) && !(quoted_at(name, v) && cb_redact_is_credential_word(s, len));
    /* &str, &mut (a reference type, unquoted) or &lt;...&gt; (an escaped <placeholder>). */
    int ampersand_word = s[0] == '&' && len > 1 && ((v[1] | 0x20) >= 'a' && (v[1] | 0x20) <= 'z') &&
                         (!quoted_at(name, v) || html_entity_at(s, len));
    return !cb_redact_is_placeholder(s, len) && !stop && !cb_redact_is_path(s, len) && s[0] != '-' &&
           !ampersand_word && !prose_follows(v, len, end_of_text);
}

/* An unquoted identifier given as a keyword argument, as in
 * login(user=u, password=pw): a variable, not the password. (With ":" it is
 * a mapping, "user: admin, pass: hunter2", and the value is literal.) */
static int argument_variable(const unsigned char *text, const unsigned char *name, const unsigned char *v, size_t len) {
    if (v > name && (v[-1] == '"' || v[-1] == '\'')) return 0;
    if (memchr(name, ':', (size_t)(v - name))) return 0;
    if (!(is_alpha_(v[0]))) return 0;
    for (size_t i = 1; i < len; i++)
        if (!is_alpha_(v[i]) && !(v[i] >= '0' && v[i] <= '9') && v[i] != '.') return 0;
    const unsigned char *p = name;
    while (p > text && (p[-1] == ' ' || p[-1] == '\t')) p--;
    return p > text && (p[-1] == '(' || p[-1] == ',');
}

/* An unquoted member access or subscript (cfg.Password, self.db.password,
 * params[:password]): code that reads the password, not the password. */
static int code_reference(const unsigned char *name, const unsigned char *v, size_t len, const unsigned char *end) {
    if (len == 0 || quoted_at(name, v)) return 0;
    size_t dots = 0, seg = 0;
    int seg_start = 1;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || v[i] == '.') {
            /* A long random part makes it a dotted token (Discord's), not a member chain. */
            if (seg >= 16 && cb_redact_looks_random((const char *)v + i - seg, seg)) return 0;
            if (i == len) break;
            if (seg_start) return 0;
            dots++;
            seg_start = 1;
            seg = 0;
        } else if (is_alpha_(v[i]) || (!seg_start && v[i] >= '0' && v[i] <= '9')) {
            seg_start = 0;
            seg++;
        } else {
            return 0;
        }
    }
    if (seg_start) return 0; /* "hunter2." ends a sentence */
    return dots > 0 || (v + len < end && v[len] == '[');
}

/* The value v (len bytes) a rule matched, after the name part of the match
 * (name, from the match start up to v): is it a secret? */
static int gate_ok(unsigned gate, const unsigned char *text, const unsigned char *name, const unsigned char *v,
                   size_t len, const unsigned char *end_of_text) {
    const char *s = (const char *)v;
    switch (gate) {
    case CB_GATE_NONE: return 1;
    case CB_GATE_PLACEHOLDER: return !cb_redact_is_placeholder(s, len);
    case CB_GATE_PASSWORD:
        return password_ok(name, v, len, end_of_text) && !cb_redact_benign_name((const char *)name, (size_t)(v - name)) &&
               !argument_variable(text, name, v, len) && !code_reference(name, v, len, end_of_text) &&
               !(v > name && v[-1] != '"' && v[-1] != '\'' && cb_redact_is_cmdlet(s, len));
    case CB_GATE_RANDOM: return cb_redact_looks_random(s, len);
    case CB_GATE_PROSE:
        return password_ok(name, v, len, end_of_text) && (quoted_at(name, v) || !cb_redact_is_plain_word(s, len)) &&
               !code_reference(name, v, len, end_of_text);
    case CB_GATE_LITERAL: return !cb_redact_is_placeholder(s, len) && !cb_redact_is_path(s, len);
    }
    return 1;
}

#define STOP 1 /* a fail-safe finding covers the rest of the text */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Runs rule `ri` once from `start`. Returns 0, STOP, or an error. */
static int match_at(struct call *c, size_t ri, size_t start, size_t *next, pcre2_match_context *mctx) {
    const struct rule *r = &c->rs->rules[ri];
    int rc = r->jit ? pcre2_jit_match(r->code, c->u, c->n, start, 0, c->md, mctx)
                    : pcre2_match(r->code, c->u, c->n, start, 0, c->md, mctx);
    if (rc == PCRE2_ERROR_NOMATCH) { *next = SIZE_MAX; return 0; }
    if (rc < 0) {
        /* Match/depth/heap/JIT-stack limit (or any other failure): we cannot
         * know what the rule would have matched, so nothing after this point
         * is shown. */
        c->res->flags |= CB_REDACT_LIMIT_HIT;
        if (start < c->n) { /* at the very end there is nothing left to hide */
            int e = push(c, (uint32_t)ri, CB_REDACT_LIMIT_HIT, start, c->n, start, c->n);
            if (e) return e;
        }
        return STOP;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
    size_t ms = ov[0], me = ov[1], s = ms, e = me;
    /* The secret is group 1 when it is set inside the match. PCRE2 can
     * report a group outside it (\K, lookarounds, and a possessive group's
     * capture left over from an abandoned start: "(a)*+$"), and then the
     * whole match stands. */
    if (r->has_group && rc > 1 && ov[2] != PCRE2_UNSET && ms <= ov[2] && ov[2] <= ov[3] && ov[3] <= me) {
        s = ov[2];
        e = ov[3];
    }
    *next = me > ms ? me : me + 1;
    if (e == s || !gate_ok(r->gate, c->u, c->u + ms, c->u + s, e - s, c->u + c->n)) return 0;
    if (r->min_entropy > 0 && cb_redact_entropy((const char *)c->u + s, e - s) < r->min_entropy) return 0;
    return push(c, (uint32_t)ri, 0, s, e, ms, me);
}

static inline int is_alnum(unsigned char x) {
    return (x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Z') || (x >= '0' && x <= '9');
}
static inline int is_upper(unsigned char x) { return x >= 'A' && x <= 'Z'; }
static inline int is_lower(unsigned char x) { return x >= 'a' && x <= 'z'; }

/* The prefix every "name = value" rule needs: name bytes, an optional
 * (escaped) quote, blanks, then ':' or '=' (a VB "As <type>" may sit
 * before the '='). */
static int assign_follows(const unsigned char *u, size_t n, size_t j) {
    size_t lim = j + 64 < n ? j + 64 : n;
    while (j < lim && (is_alnum(u[j]) || u[j] == '_' || u[j] == '.' || u[j] == '-')) j++;
    if (j < n && u[j] == '\\') j++;
    if (j < n && (u[j] == '"' || u[j] == '\'')) j++;
    /* headers["X-Api-Key"] = v (a subscript), kToken[] = "v" (a C array) */
    if (j + 1 < n && u[j] == '[' && u[j + 1] == ']') j += 2;
    else if (j < n && u[j] == ']') j++;
    while (j < n && (u[j] == ' ' || u[j] == '\t' || u[j] == '\r' || u[j] == '\n')) j++;
    if (j + 3 < n && (u[j] | 0x20) == 'a' && (u[j + 1] | 0x20) == 's' && u[j + 2] == ' ') {
        for (j += 3; j < lim && (is_alnum(u[j]) || u[j] == '.'); j++) {}
        while (j < n && u[j] == ' ') j++;
    }
    /* Make's API_KEY ?= v, JavaScript's token ??= "v" */
    while (j + 1 < n && u[j] == '?' && (u[j + 1] == '=' || u[j + 1] == '?')) j++;
    /* R's api_key <- "v" (and <<-) */
    if (j + 1 < n && u[j] == '<' && (u[j + 1] == '-' || (u[j + 1] == '<' && j + 2 < n && u[j + 2] == '-'))) return 1;
    return j < n && (u[j] == ':' || u[j] == '=');
}

/* After the trigger, up to 64 name bytes, blanks, an optional "=", then "(". */
static int call_follows(const unsigned char *u, size_t n, size_t j) {
    size_t lim = j + 64 < n ? j + 64 : n;
    while (j < lim && (is_alnum(u[j]) || u[j] == '_' || u[j] == '.')) j++;
    while (j < n && (u[j] == ' ' || u[j] == '\t')) j++;
    if (j < n && u[j] == '=') j++;
    while (j < n && (u[j] == ' ' || u[j] == '\t')) j++;
    return j < n && u[j] == '(';
}

/* After the trigger, up to 30 name bytes, then a quote. */
static int quote_follows(const unsigned char *u, size_t n, size_t j) {
    size_t lim = j + 30 < n ? j + 30 : n;
    while (j < lim && (is_alnum(u[j]) || u[j] == '_' || u[j] == '.' || u[j] == '-' || u[j] == ':')) j++;
    return j < n && (u[j] == '"' || u[j] == '\'');
}

/* After the trigger, name bytes, an optional closing quote or "]", blanks,
 * then a comparison: ==, !=, ===, .equals( */
static int compare_follows(const unsigned char *u, size_t n, size_t j) {
    size_t lim = j + 64 < n ? j + 64 : n;
    while (j < lim && (is_alnum(u[j]) || u[j] == '_')) j++;
    if (j + 7 < n && memcmp(u + j, ".equals", 7) == 0) return 1;
    if (j < n && (u[j] == '"' || u[j] == '\'')) j++;
    if (j < n && u[j] == ']') j++;
    while (j < n && (u[j] == ' ' || u[j] == '\t')) j++;
    return j + 1 < n && (u[j] == '=' || u[j] == '!') && u[j + 1] == '=';
}

/* " (" within the next 72 bytes of the trigger's line. */
static int paren_follows(const unsigned char *u, size_t n, size_t j) {
    size_t lim = j + 72 < n ? j + 72 : n;
    for (; j + 1 < lim && u[j] != '\n'; j++)
        if ((u[j] == ' ' || u[j] == '\t') && u[j + 1] == '(') return 1;
    return 0;
}

/* After the trigger, blanks, then "is" or "was" and a blank or ':'. */
static int verb_follows(const unsigned char *u, size_t n, size_t j) {
    size_t k = j;
    while (k < n && (u[k] == ' ' || u[k] == '\t')) k++;
    if (k == j || k + 3 > n) return 0;
    size_t w = (u[k] | 0x20) == 'i' && (u[k + 1] | 0x20) == 's' ? 2
             : k + 4 <= n && (u[k] | 0x20) == 'w' && (u[k + 1] | 0x20) == 'a' && (u[k + 2] | 0x20) == 's' ? 3 : 0;
    return w && k + w < n && (u[k + w] == ' ' || u[k + w] == '\t' || u[k + w] == ':');
}

/* The cheap C checks some rules ask for before their regex runs. */
static int context_ok(unsigned flags, const unsigned char *u, size_t n, size_t j) {
    if ((flags & CB_TRIG_ASSIGN) && !assign_follows(u, n, j)) return 0;
    if ((flags & CB_TRIG_CALL) && !call_follows(u, n, j)) return 0;
    if ((flags & CB_TRIG_QUOTED) && !quote_follows(u, n, j)) return 0;
    if ((flags & CB_TRIG_VERB) && !verb_follows(u, n, j)) return 0;
    if ((flags & CB_TRIG_PAREN) && !paren_follows(u, n, j)) return 0;
    if ((flags & CB_TRIG_COMPARE) && !compare_follows(u, n, j)) return 0;
    return 1;
}

/* Trigger t at byte i (raw/low: the 4 bytes there as is and folded): if
 * it is there and its rule's checks pass, run the rule. */
static int try_trigger(struct call *c, const struct trig *t, size_t i, uint32_t raw, uint32_t low) {
    const unsigned char *u = c->u;
    if (((t->cs ? raw : low) & t->mask) != t->pre || i + t->len > c->n) return 0;
    if (t->cs) {
        if (t->len > 4 && memcmp(u + i + 4, t->lit + 4, t->len - 4u) != 0) return 0;
    } else {
        size_t j = 4;
        while (j < t->len && fold[u[i + j]] == t->lit[j]) j++;
        if (j < t->len) return 0;
    }
    const struct rule *r = &c->rs->rules[t->rule];
    if (i < r->back) return 0;
    size_t start = i - r->back;
    if ((r->flags & CB_TRIG_BOUNDARY) && start > 0 && is_alnum(u[start - 1])) {
        unsigned char p = u[start - 1], q = u[start];
        int hump = is_lower(p) && is_upper(q);        /* apiKey */
        int caps = !(r->flags & CB_TRIG_CASE) && is_upper(p) && is_upper(q); /* APIKEY */
        if (!hump && !caps) return 0;
    }
    if ((r->flags & CB_TRIG_GLUED) && !(start > 0 && (is_alnum(u[start - 1]) || u[start - 1] == '_' || u[start - 1] == '-')))
        return 0;
    if (!context_ok(r->flags, u, c->n, i + t->len)) return 0;
    int rc = prepare(c);
    if (rc) return rc;
    if (skip_get(c->res, t->rule) > start) return 0; /* inside this rule's last match */
    size_t next;
    rc = match_at(c, t->rule, start, &next, c->rs->mctx);
    if (rc) return rc;
    return next != SIZE_MAX ? skip_set(c->res, t->rule, next) : 0;
}

/* All triggers starting at byte i. */
static int at_position(struct call *c, size_t i) {
    const struct cb_redact_rules *rs = c->rs;
    const unsigned char *u = c->u;
    uint32_t raw = 0, low = 0; /* the next 4 bytes as is and folded (0 past the end) */
    for (size_t j = 0; j < 4 && i + j < c->n; j++) {
        raw |= (uint32_t)u[i + j] << (8 * j);
        low |= (uint32_t)fold[u[i + j]] << (8 * j);
    }
    int rc;
    for (int32_t k = rs->first[bucket(fold[u[i]], fold[u[i + 1]])]; k >= 0; k = rs->trigs[k].next)
        if ((rc = try_trigger(c, &rs->trigs[k], i, raw, low))) return rc;
    if (i + 4 > c->n) return 0;
    for (int32_t k = rs->first4[bucket4(low)]; k >= 0; k = rs->trigs[k].next)
        if ((rc = try_trigger(c, &rs->trigs[k], i, raw, low))) return rc;
    return 0;
}

static int cmp_finding(const void *a, const void *b) {
    const cb_redact_finding *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1;
    return x->rule < y->rule ? -1 : x->rule > y->rule; /* deterministic order */
}

static int build_output(struct call *c, unsigned opts) {
    cb_redact_result_t *res = c->res;
    const struct cb_redact_rules *rs = c->rs;
    static const char plain[] = "[REDACTED]";
    size_t need = c->n;
    for (size_t i = 0; i < res->nfindings; i++) {
        const cb_redact_finding *f = &res->findings[i];
        const struct rule *r = &rs->rules[f->rule];
        size_t rl = r->replacement ? r->replacement_len
                                   : (opts & CB_REDACT_LABELS) ? sizeof plain + r->id_len : sizeof plain - 1;
        need = need - (f->end - f->start) + rl;
    }
    if (need + 1 > res->tcap) {
        char *t = realloc(res->buf, need + 1);
        if (!t) return CB_ENOMEM;
        res->buf = t;
        res->tcap = need + 1;
    }
    res->text = res->buf;
    char *o = res->text;
    size_t pos = 0;
    for (size_t i = 0; i < res->nfindings; i++) {
        const cb_redact_finding *f = &res->findings[i];
        const struct rule *r = &rs->rules[f->rule];
        memcpy(o, c->u + pos, f->start - pos);
        o += f->start - pos;
        if (r->replacement) {
            memcpy(o, r->replacement, r->replacement_len);
            o += r->replacement_len;
        } else if (opts & CB_REDACT_LABELS) {
            memcpy(o, "[REDACTED:", 10);
            memcpy(o + 10, r->id, r->id_len);
            o[10 + r->id_len] = ']';
            o += 11 + r->id_len;
        } else {
            memcpy(o, plain, sizeof plain - 1);
            o += sizeof plain - 1;
        }
        pos = f->end;
    }
    memcpy(o, c->u + pos, c->n - pos);
    o += c->n - pos;
    *o = 0; /* convenience for C callers; len excludes it */
    res->len = (size_t)(o - res->text);
    return 0;
}

/* The built-in rules, at the positions the prefilter lets through: one
 * pass, a rolling 18-bit trigram code and one bitmap probe per byte; a hit
 * is confirmed by the short-trigger set or the 4-gram set. */
static int run_builtins(struct call *c) {
    const struct cb_redact_rules *rs = c->rs;
    const unsigned char *u = c->u;
    size_t n = c->n;
    if (!rs->ntrigs || n < 2) return 0;
    const uint64_t *bloom = rs->bloom;
    uint32_t h = (uint32_t)code6[u[0]] << 6 | code6[u[1]];
    size_t i = 0;
    int rc;
    for (; i + 2 < n; i++) {
        h = (h << 6 | code6[u[i + 2]]) & 0x3FFFFu;
        if (__builtin_expect(!bit_has(bloom, h), 1)) continue;
        if (!bit_has(rs->short3, h) && (i + 3 >= n || !bit_has(rs->bloom4, quad(h, u[i + 3])))) continue;
        if ((rc = at_position(c, i))) return rc;
    }
    h = (h << 6 | code6[0]) & 0x3FFFFu; /* the last two bytes: 2-byte triggers */
    if (bit_has(bloom, h)) return at_position(c, i);
    return 0;
}

/* One custom rule: unanchored, over the whole text, a window of start
 * positions per call (the offset limit) so the time budget is checked
 * between calls. */
static int run_custom(struct call *c, size_t ri) {
    cb_redact_result_t *res = c->res;
    size_t n = c->n;
    int rc = prepare(c);
    if (rc) return rc;
    if (!res->cmctx && !(res->cmctx = pcre2_match_context_copy(c->rs->mctx))) return CB_ENOMEM;
    pcre2_match_context *cm = res->cmctx;
    uint64_t t0 = now_ns();
    size_t off = 0, next;
    while (off <= n) {
        size_t lim = n - off > CB_REDACT_CUSTOM_WINDOW ? off + CB_REDACT_CUSTOM_WINDOW : n;
        pcre2_set_offset_limit(cm, lim);
        if ((rc = match_at(c, ri, off, &next, cm))) return rc;
        off = next == SIZE_MAX ? lim + 1 : next;
        if (off < n && now_ns() - t0 > c->rs->budget_ns) {
            /* Slow everywhere without hitting a limit: fail safe from here. */
            if ((rc = push(c, (uint32_t)ri, CB_REDACT_LIMIT_HIT, off, n, off, n))) return rc;
            res->flags |= CB_REDACT_LIMIT_HIT;
            return STOP;
        }
    }
    return 0;
}

/* Orders and merges overlapping findings (a key matched by two rules, a
 * fail-safe tail) so the output is written in one pass. */
static void merge_findings(cb_redact_result_t *res) {
    if (res->nfindings < 2) return;
    qsort(res->findings, res->nfindings, sizeof *res->findings, cmp_finding);
    size_t w = 0;
    for (size_t i = 1; i < res->nfindings; i++) {
        cb_redact_finding *last = &res->findings[w], *f = &res->findings[i];
        if (f->start < last->end) {
            if (f->end > last->end) last->end = f->end;
            if (f->mend > last->mend) last->mend = f->mend;
            if (f->mstart < last->mstart) last->mstart = f->mstart;
            last->flags |= f->flags;
            /* The catalog runs from specific formats to generic
             * assignments: name the merged finding after the most
             * specific rule that saw it. */
            if (f->rule < last->rule) last->rule = f->rule;
        } else {
            res->findings[++w] = *f;
        }
    }
    res->nfindings = w + 1;
}

int cb_redact_run(const cb_redact_rules_t *rs, const char *text, size_t n, unsigned opts, cb_redact_result_t *res) {
    if (!rs || !res || (!text && n)) return CB_EINVAL;
    res->nfindings = 0;
    res->text = NULL;
    res->len = 0;
    res->flags = 0;
    if (res->skip) res->skip[0] = 0;
    struct call c = {rs, (const unsigned char *)text, n, res, NULL};
    int rc = run_builtins(&c);
    for (size_t ri = rs->first_custom; !rc && ri < rs->nrules; ri++) rc = run_custom(&c, ri);
    if (rc < 0) return rc;
    if (res->nfindings == 0) return 0;
    merge_findings(res);
    if (opts & CB_REDACT_FIND_ONLY) return 0;
    return build_output(&c, opts);
}

static size_t replacement_len(const struct cb_redact_rules *rs, const cb_redact_finding *f, unsigned opts) {
    const struct rule *r = &rs->rules[f->rule];
    if (r->replacement) return r->replacement_len;
    return (opts & CB_REDACT_LABELS) ? sizeof "[REDACTED:]" - 1 + r->id_len : sizeof "[REDACTED]" - 1;
}

size_t cb_redact_output_offset(const cb_redact_rules_t *rs, const cb_redact_result_t *res, unsigned opts,
                               size_t offset) {
    size_t out = offset;
    for (size_t i = 0; i < res->nfindings; i++) {
        const cb_redact_finding *f = &res->findings[i];
        if (f->start >= offset) break;
        size_t end = f->end < offset ? f->end : offset; /* inside a finding: its whole replacement */
        out = out - (end - f->start) + replacement_len(rs, f, opts);
    }
    return out;
}

size_t cb_redact_utf8_prefix(const char *s, size_t len, size_t maxchars) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, chars = 0;
    while (i < len && chars < maxchars) {
        unsigned char b = u[i];
        size_t k = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
        /* A well-formed sequence moves as one character; anything else (a
         * stray continuation byte, a truncated sequence) is one byte. */
        size_t j = 1;
        if (k > 1 && i + k <= len) {
            while (j < k && (u[i + j] & 0xC0) == 0x80) j++;
            if (j < k) j = 1;
        } else {
            j = 1;
        }
        i += j;
        chars++;
    }
    return i;
}
