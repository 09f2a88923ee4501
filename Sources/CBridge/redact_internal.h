#ifndef CB_REDACT_INTERNAL_H
#define CB_REDACT_INTERNAL_H
/* Shared between redact.c (engine), redact_catalog.c (the rules, generated from
 * redact-rules/ by scripts/embed-redact-rules.py) and redact_score.c. */
#include <stddef.h>

/* How a candidate value is judged after the regex matched. */
enum cb_redact_gate {
    CB_GATE_NONE = 0,     /* the format itself is proof (ghp_..., AKIA...) */
    CB_GATE_PLACEHOLDER,  /* redact unless it is a placeholder/reference */
    CB_GATE_PASSWORD,     /* + not a stopword ("required", "true", ...) or a path */
    CB_GATE_RANDOM,       /* + must look machine-generated (randomness score) */
    CB_GATE_PROSE,        /* password gate; unquoted, it must not be a plain word
                             ("the password is wrong" vs "... is hunter2") */
    CB_GATE_LITERAL,      /* placeholder gate + not a path: the syntax alone says
                             "this is the password" (psexec -p x, ;Password=x;),
                             so any literal word counts, "secret" included */
};

/* Trigger flags (rule level). */
#define CB_TRIG_CASE     0x1u /* triggers compare case-sensitively */
#define CB_TRIG_BOUNDARY 0x2u /* the match must not start inside a word
                                 (a camelCase hump like apiKey is a boundary) */

#define CB_TRIG_ASSIGN   0x4u /* "name = value" rules: the regex runs only if, after
                                 the trigger, up to 64 name bytes, an optional
                                 quote and spaces, a ':' or '=' follows (a cheap C
                                 check that skips prose like "token refreshed") */

#define CB_TRIG_CALL     0x8u /* the regex runs only if a "(" follows the trigger
                                 (name bytes, blanks, an optional "=" between):
                                 login("u", "p"), auth=("u", "p") */
#define CB_TRIG_QUOTED   0x10u /* the regex runs only if a quote follows the
                                 trigger after name bytes: key="DbPassword" */

#define CB_TRIG_VERB     0x20u /* the regex runs only if " is " or " was " follows the
                                 trigger: "the key is ..." */
#define CB_TRIG_GLUED    0x40u /* the regex runs only if the trigger is glued to a
                                  name before it (a letter, digit, "_" or "-"):
                                  acmeSECRET, acme-private-key */
#define CB_TRIG_PAREN    0x80u /* the regex runs only if " (" follows on the trigger's
                                  line within 72 bytes: the token in .env (x) */
#define CB_TRIG_COMPARE  0x100u /* the regex runs only if a comparison (==, !=,
                                   .equals) follows the trigger's name */

#define CB_REDACT_MAX_TRIGGERS 8

typedef struct cb_redact_rule_def {
    const char *id;
    const char *family;    /* the redact-rules/ file it comes from */
    const char *description;
    const char *pattern;   /* compiled PCRE2_ANCHORED at trigger - back */
    const char *triggers[CB_REDACT_MAX_TRIGGERS]; /* NULL-terminated, >= 2 bytes */
    unsigned back;         /* the match starts this many bytes before the trigger */
    unsigned gate;
    unsigned flags;
    double min_entropy;    /* bits/byte the secret needs (0: no floor) */
} cb_redact_rule_def;

extern const cb_redact_rule_def cb_redact_catalog[];
extern const size_t cb_redact_catalog_count;

/* Gate helpers (redact_score.c). */
int cb_redact_is_stopword(const char *s, size_t len);
int cb_redact_is_credential_word(const char *s, size_t len);
int cb_redact_is_path(const char *s, size_t len);
int cb_redact_is_plain_word(const char *s, size_t len);
int cb_redact_is_path_like(const char *s, size_t len);
int cb_redact_is_cmdlet(const char *s, size_t len);
int cb_redact_benign_name(const char *s, size_t len);
#endif
