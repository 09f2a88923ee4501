/* libFuzzer target for the redaction engine. Any bytes, with the built-in
 * catalog (plain and labelled output), and a custom rule compiled from the
 * input's first bytes when it starts with '~'. Checks on every run:
 *  - cb_redact_run succeeds; findings are sorted, disjoint, in bounds, each
 *    inside its whole match;
 *  - the output is exactly the input with each finding replaced by its
 *    marker (bytes outside findings are kept, byte for byte);
 *  - cb_redact_output_offset maps the input end to the output end;
 *  - cb_redact_utf8_prefix stays in bounds and never ends inside a
 *    well-formed multi-byte sequence. */
#include "cb_error.h"
#include "cb_redact.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "CHECK failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static cb_redact_rules_t *builtin;

static void check(const cb_redact_rules_t *rs, const uint8_t *in, size_t n, unsigned opts) {
    cb_redact_result_t res;
    cb_redact_result_init(&res);
    int rc = cb_redact_run(rs, (const char *)in, n, opts, &res);
    CHECK(rc == 0);
    size_t pos = 0, out = 0;
    for (size_t i = 0; i < res.nfindings; i++) {
        const cb_redact_finding *f = &res.findings[i];
        CHECK(f->start < f->end && f->end <= n);
        CHECK(f->start >= pos); /* sorted, disjoint */
        CHECK(f->mstart <= f->start && f->end <= f->mend && f->mend <= n);
        CHECK(f->rule < cb_redact_rules_count(rs));
        CHECK(res.text != NULL);
        size_t keep = f->start - pos;
        CHECK(out + keep <= res.len);
        CHECK(memcmp(res.text + out, in + pos, keep) == 0);
        out += keep;
        char marker[128];
        const char *id = cb_redact_rule_id(rs, f->rule);
        int m = (opts & CB_REDACT_LABELS) ? snprintf(marker, sizeof marker, "[REDACTED:%s]", id)
                                          : snprintf(marker, sizeof marker, "[REDACTED]");
        CHECK(out + (size_t)m <= res.len);
        CHECK(memcmp(res.text + out, marker, (size_t)m) == 0);
        out += (size_t)m;
        pos = f->end;
    }
    if (res.nfindings == 0) {
        CHECK(res.text == NULL && res.len == 0);
    } else {
        CHECK(res.len - out == n - pos);
        CHECK(memcmp(res.text + out, in + pos, n - pos) == 0);
        CHECK(cb_redact_output_offset(rs, &res, opts, n) == res.len);
    }
    cb_redact_result_free(&res);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t n) {
    if (!builtin) {
        cb_redact_compile_error err;
        CHECK(cb_redact_rules_create(NULL, 0, 0, &builtin, &err) == 0);
    }
    check(builtin, in, n, 0);
    check(builtin, in, n, CB_REDACT_LABELS);

    size_t max = n ? in[0] : 0;
    size_t p = cb_redact_utf8_prefix((const char *)in, n, max);
    CHECK(p <= n);
    if (p < n && p > 0) {
        /* Never inside a well-formed sequence: the byte at the cut does not
         * continue a lead byte whose sequence is complete and started before. */
        size_t lead = p;
        while (lead > 0 && p - lead < 3 && (in[lead] & 0xC0) == 0x80) lead--;
        if (lead < p && (in[p] & 0xC0) == 0x80) {
            uint8_t b = in[lead];
            size_t k = b >= 0xF8 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
            int complete = lead + k <= n;
            for (size_t j = 1; complete && j < k; j++) complete = (in[lead + j] & 0xC0) == 0x80;
            CHECK(!(complete && lead + k > p && k > 1 && (b & 0xC0) == 0xC0));
        }
    }

    if (n >= 2 && in[0] == '~') {
        size_t plen = in[1] % 48;
        if (2 + plen <= n) {
            char pat[64];
            memcpy(pat, in + 2, plen);
            pat[plen] = 0;
            cb_redact_custom_rule rule = {"fuzz", pat, plen ? plen : 0, NULL};
            if (plen == 0) rule.pattern = "x";
            cb_redact_rules_t *rs;
            cb_redact_compile_error err;
            if (cb_redact_rules_create(&rule, 1, CB_REDACT_NO_BUILTINS, &rs, &err) == 0) {
                cb_redact_rules_set_time_budget(rs, 5); /* keep pathological patterns cheap to fuzz */
                check(rs, in + 2 + plen, n - 2 - plen, CB_REDACT_LABELS);
                cb_redact_rules_free(rs);
            } else {
                CHECK(err.message[0] != 0);
            }
        }
    }
    return 0;
}
