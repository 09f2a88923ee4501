/* Elapsed-time formatting; see include/cb_elapsed.h for the contract. */
#include "cb_elapsed.h"
#include "cb_error.h"
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const cb_elapsed_words cb_elapsed_words_en = {
    .singular = {"day", "hour", "minute", "second"},
    .plural = {"days", "hours", "minutes", "seconds"},
    .abbrev = {"d", "h", "m", "s"},
    .separator = ", ",
    .short_separator = " ",
    .unknown = "unknown duration",
};

/* An append-only writer with snprintf semantics: counts everything, stores
 * what fits, keeps buf NUL-terminated. */
typedef struct {
    char *buf;
    size_t cap, len;
} writer;

static void put(writer *w, const char *s, size_t n) {
    if (w->len < w->cap) {
        size_t room = w->cap - 1 - w->len;
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->len, s, k);
        w->buf[w->len + k] = '\0';
    }
    w->len += n;
}

static void puts_(writer *w, const char *s) { put(w, s, strlen(s)); }

static void putu(writer *w, uint64_t v, int min_digits) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%0*" PRIu64, min_digits, v);
    put(w, tmp, (size_t)n);
}

/* "<n> word" / "<n>abbrev" or a '#' template. */
static void put_unit(writer *w, uint64_t n, const char *word, int space) {
    const char *hash = strchr(word, '#');
    if (hash) {
        put(w, word, (size_t)(hash - word));
        putu(w, n, 1);
        puts_(w, hash + 1);
        return;
    }
    putu(w, n, 1);
    if (space) put(w, " ", 1);
    puts_(w, word);
}

/* The words a style needs are all there. */
static int words_ok(cb_elapsed_style style, const cb_elapsed_words *words) {
    if (style == CB_ELAPSED_SPOKEN) {
        if (!words->separator || !words->unknown) return 0;
        for (int u = 0; u < CB_ELAPSED_UNITS; u++)
            if (!words->singular[u] || !words->plural[u]) return 0;
    } else if (style == CB_ELAPSED_SHORT) {
        if (!words->short_separator) return 0;
        for (int u = 0; u < CB_ELAPSED_UNITS; u++)
            if (!words->abbrev[u]) return 0;
    }
    return 1;
}

static void format_positional(writer *w, uint64_t total, const uint64_t *v) {
    uint64_t hours = total / 3600;
    if (hours > 0) {
        putu(w, hours, 1);
        put(w, ":", 1);
        putu(w, v[CB_ELAPSED_MINUTE], 2);
    } else {
        putu(w, v[CB_ELAPSED_MINUTE], 1);
    }
    put(w, ":", 1);
    putu(w, v[CB_ELAPSED_SECOND], 2);
}

static void format_short(writer *w, const uint64_t *v, const cb_elapsed_words *words) {
    int first = CB_ELAPSED_SECOND;
    for (int u = 0; u < CB_ELAPSED_UNITS; u++)
        if (v[u]) { first = u; break; }
    put_unit(w, v[first], words->abbrev[first], 0);
    if (first < CB_ELAPSED_SECOND && v[first + 1]) {
        puts_(w, words->short_separator);
        put_unit(w, v[first + 1], words->abbrev[first + 1], 0);
    }
}

static void format_spoken(writer *w, const uint64_t *v, const cb_elapsed_words *words) {
    int any = 0;
    for (int u = 0; u < CB_ELAPSED_UNITS; u++) {
        if (!v[u]) continue;
        if (any) puts_(w, words->separator);
        put_unit(w, v[u], v[u] == 1 ? words->singular[u] : words->plural[u], 1);
        any = 1;
    }
    if (!any) put_unit(w, 0, words->plural[CB_ELAPSED_SECOND], 1);
}

int cb_elapsed_format(double seconds, cb_elapsed_style style, const cb_elapsed_words *words,
                      char *buf, size_t cap) {
    if (buf == NULL && cap > 0) return CB_EINVAL;
    if (style != CB_ELAPSED_POSITIONAL && style != CB_ELAPSED_SHORT && style != CB_ELAPSED_SPOKEN)
        return CB_EINVAL;
    if (words == NULL) words = &cb_elapsed_words_en;
    if (!words_ok(style, words)) return CB_EINVAL;
    writer w = {buf, cap, 0};
    if (cap > 0) buf[0] = '\0';

    if (isnan(seconds)) {
        puts_(&w, style == CB_ELAPSED_POSITIONAL ? "--:--"
                  : style == CB_ELAPSED_SHORT    ? "--"
                                                 : words->unknown);
        return w.len > INT32_MAX ? CB_ETOOBIG : (int)w.len;
    }
    /* Clamp before converting: casting an out-of-range double is UB in C. */
    double f = floor(seconds);
    if (!(f > 0)) f = 0; /* negative, -0, -inf */
    if (f > CB_ELAPSED_MAX_SECONDS) f = CB_ELAPSED_MAX_SECONDS;
    uint64_t total = (uint64_t)f;

    uint64_t v[CB_ELAPSED_UNITS] = {total / 86400, total / 3600 % 24, total / 60 % 60, total % 60};
    if (style == CB_ELAPSED_POSITIONAL) format_positional(&w, total, v);
    else if (style == CB_ELAPSED_SHORT) format_short(&w, v, words);
    else format_spoken(&w, v, words);
    return w.len > INT32_MAX ? CB_ETOOBIG : (int)w.len;
}
