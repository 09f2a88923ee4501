#ifndef CB_REDACT_H
#define CB_REDACT_H
/* The redaction engine: finds credentials in text and replaces their values
 * with "[REDACTED]" (or "[REDACTED:<rule-id>]"), keeping key names.
 *
 * Design (why it is fast and safe):
 *  - A rule set is compiled once (PCRE2, JIT where available) and is immutable
 *    afterwards, so one set is shared by every thread; per-call state lives in
 *    a cb_redact_result_t owned by the caller (one per thread).
 *  - Built-in rules are data (redact-rules/, one file per family, compiled
 *    into a C table by scripts/embed-redact-rules.py) and carry literal
 *    keywords ("ghp_", "AKIA", "password", "://") that also anchor them.
 *    One pass over the text looks for any trigger through a hashed trigram
 *    bitmap (a hit confirmed by the 4th byte); text without a trigger is
 *    scanned once and no regex runs. A rule's
 *    regex runs only anchored at its trigger, so its cost is bounded by the
 *    secret's length, not by the text's.
 *  - Matches are collected as findings (rule + byte offsets), overlaps merged,
 *    and the output is written in one pass: no rewrite per rule.
 *  - Every match runs under match/depth/heap limits. A rule that hits a limit
 *    fails safe: everything from where it started to the end of the text is
 *    redacted (CB_REDACT_LIMIT_HIT is set), never leaked. PCRE2's limits
 *    count per start position, so a custom rule (unanchored) is also run in
 *    windows of start positions under a time budget per call (250 ms): a
 *    pattern that is slow everywhere without ever hitting a limit fails safe
 *    the same way instead of stalling the caller.
 *  - Matching is byte-oriented (no PCRE2_UTF): invalid UTF-8 and NUL bytes are
 *    ordinary bytes; nothing is validated or rejected.
 */
#include <stddef.h>
#include <stdint.h>

typedef struct cb_redact_rules cb_redact_rules_t;

/* A user-defined rule (settings). The pattern is PCRE2 syntax, matched on
 * bytes, unanchored over the whole text. If it has a capture group, group 1 is
 * the secret (the rest of the match is kept), else the whole match is.
 * `replacement` NULL means "[REDACTED]" (or the labelled form). */
typedef struct cb_redact_custom_rule {
    const char *id;
    const char *pattern;
    size_t pattern_len;      /* 0: strlen(pattern) */
    const char *replacement; /* optional */
} cb_redact_custom_rule;

/* Why a pattern was refused: PCRE2's own message and the byte offset in the
 * pattern where it noticed the problem. */
typedef struct cb_redact_compile_error {
    int code;            /* PCRE2 error code (positive for compile errors) */
    size_t offset;       /* offset in the pattern */
    size_t rule_index;   /* which custom rule (index into the array given) */
    char message[256];
} cb_redact_compile_error;

#define CB_REDACT_NO_BUILTINS 0x1u /* cb_redact_rules_create: custom rules only */
#define CB_REDACT_NO_JIT      0x2u /* use PCRE2's interpreter (as where JIT is unavailable) */

/* Builds a rule set: the built-in catalog (unless CB_REDACT_NO_BUILTINS) plus
 * `ncustom` custom rules. On a pattern that does not compile returns CB_EINVAL
 * and fills *err. Custom ids: 1-64 bytes, no control characters or brackets,
 * unique (also against built-in ids). */
int cb_redact_rules_create(const cb_redact_custom_rule *custom, size_t ncustom, unsigned flags,
                           cb_redact_rules_t **out, cb_redact_compile_error *err);
void cb_redact_rules_free(cb_redact_rules_t *rules);

/* Compiles a pattern exactly as a custom rule would be compiled, then throws it
 * away: 0, or CB_EINVAL with *err filled (settings validate with this). */
int cb_redact_validate_pattern(const char *pattern, size_t len, cb_redact_compile_error *err);

size_t cb_redact_rules_count(const cb_redact_rules_t *rules);
const char *cb_redact_rule_id(const cb_redact_rules_t *rules, size_t i);
/* Matching time each custom rule may spend per cb_redact_run (default 250 ms);
 * past it the rule fails safe. Set it before sharing the set between threads. */
void cb_redact_rules_set_time_budget(cb_redact_rules_t *rules, uint32_t ms);

/* 1 when PCRE2 JIT compiled every rule of the set, else 0 (interpreter used). */
int cb_redact_rules_jit(const cb_redact_rules_t *rules);

/* The built-in catalog, for docs, tests and the per-rule baseline benchmark. */
size_t cb_redact_builtin_count(void);
const char *cb_redact_builtin_id(size_t i);
const char *cb_redact_builtin_family(size_t i); /* "cloud", "vcs", ... (redact-rules/NN-<family>.rules) */
const char *cb_redact_builtin_description(size_t i);
const char *cb_redact_builtin_pattern(size_t i);

typedef struct cb_redact_finding {
    uint32_t rule;       /* index in the rule set (cb_redact_rule_id) */
    uint32_t flags;      /* CB_REDACT_LIMIT_HIT when this finding is a fail-safe */
    size_t start, end;   /* the redacted bytes [start, end) of the input */
    size_t mstart, mend; /* the whole match incl. key name (streaming needs it) */
} cb_redact_finding;

/* Per-call state and output, reusable across calls (allocations are kept).
 * Zero-initialise (or cb_redact_result_init) before the first use. */
typedef struct cb_redact_result {
    cb_redact_finding *findings;
    size_t nfindings;
    /* The redacted text. NULL (len 0) when nothing was found: the output is
     * the input unchanged, and no copy was made. Not NUL-terminated. */
    char *text;
    size_t len;
    unsigned flags;      /* CB_REDACT_LIMIT_HIT */
    /* private */
    char *buf;
    size_t fcap, tcap;
    void *md;            /* pcre2_match_data, created on first regex run */
    void *cmctx;         /* match context for custom rules (offset limit) */
    size_t *skip;        /* [count, (rule, end of its last match) pairs] of this call */
    size_t skipcap;
} cb_redact_result_t;

#define CB_REDACT_LABELS    0x1u /* "[REDACTED:<rule-id>]" instead of "[REDACTED]" */
#define CB_REDACT_FIND_ONLY 0x2u /* findings only, build no output text */
#define CB_REDACT_LIMIT_HIT 0x1u /* result/finding flag */

void cb_redact_result_init(cb_redact_result_t *res);
void cb_redact_result_free(cb_redact_result_t *res);

/* Redacts text[0, len). Returns 0, CB_ENOMEM, or CB_EINVAL. A limit hit is
 * not an error: it is a fail-safe finding plus CB_REDACT_LIMIT_HIT. */
int cb_redact_run(const cb_redact_rules_t *rules, const char *text, size_t len, unsigned opts,
                  cb_redact_result_t *res);

/* Where input byte `offset` lands in the output of the last cb_redact_run on
 * `res` (same opts). An offset inside a finding maps past its replacement.
 * The streaming filter emits output up to a cut with this. */
size_t cb_redact_output_offset(const cb_redact_rules_t *rules, const cb_redact_result_t *res, unsigned opts,
                               size_t offset);

/* The byte length of the longest prefix of s[0, len) holding at most
 * `maxchars` UTF-8 characters, never ending inside a well-formed multi-byte
 * sequence (an invalid byte counts as one character). */
size_t cb_redact_utf8_prefix(const char *s, size_t len, size_t maxchars);

/* Randomness of a candidate value: Shannon entropy in bits per byte. */
double cb_redact_entropy(const char *s, size_t len);
/* 1 when a value looks machine-generated (long enough, letters and digits,
 * high entropy, not a word or identifier): the gate of the generic rules. */
int cb_redact_looks_random(const char *s, size_t len);
/* 1 for references that are not secrets: $VAR, ${VAR}, <your-key>,
 * {{ .Values.x }}, %(x)s, os.environ[...], process.env.X, ****, xxxx... */
int cb_redact_is_placeholder(const char *s, size_t len);
#endif
