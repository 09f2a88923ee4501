#ifndef CB_ELAPSED_H
#define CB_ELAPSED_H
/* Elapsed-time formatting: the "2:45" on a lock screen, "2m 45s" in a compact
 * label, "2 minutes, 45 seconds" for VoiceOver.
 *
 * Defined for every double:
 *   - fractional      -> floor (59.999 s is "0:59"; a clock never shows time
 *                        that has not fully passed)
 *   - negative, -inf  -> 0 (an elapsed time cannot be negative; a start time
 *                        slightly in the future is clock skew, shown as 0:00)
 *   - NaN             -> "--:--" (positional), "--" (short), words->unknown
 *                        (spoken, English "unknown duration")
 *   - > CB_ELAPSED_MAX_SECONDS, +inf -> clamped to CB_ELAPSED_MAX_SECONDS, so
 *                        every integer involved is exact and nothing overflows.
 *
 * Styles:
 *   POSITIONAL  [h:]m:ss; hours appear from 1:00:00 on and are not rolled into
 *               days (25:03:07). Minutes are unpadded below one hour (0:05).
 *   SHORT       the largest non-zero unit and the next one, the second left out
 *               when zero: 45s, 2m 45s, 2m, 1h 3m, 1h, 1d 2h; zero is "0s".
 *   SPOKEN      every non-zero unit: 2 minutes, 45 seconds; 1 hour, 3 minutes,
 *               7 seconds; zero is "0 seconds". Days appear from 24 h on.
 */
#include <stddef.h>

#define CB_ELAPSED_MAX_SECONDS 999999999999999.0 /* < 2^53: exact as a double */

typedef enum cb_elapsed_style {
    CB_ELAPSED_POSITIONAL = 0,
    CB_ELAPSED_SHORT = 1,
    CB_ELAPSED_SPOKEN = 2,
} cb_elapsed_style;

enum { CB_ELAPSED_DAY, CB_ELAPSED_HOUR, CB_ELAPSED_MINUTE, CB_ELAPSED_SECOND, CB_ELAPSED_UNITS };

/* Unit words for SHORT and SPOKEN, UTF-8, indexed by CB_ELAPSED_DAY..SECOND.
 * A word containing '#' is a template: the number replaces the first '#'
 * ("#分", "# Minuten"); otherwise SPOKEN writes "<n> <word>" and SHORT
 * writes "<n><abbrev>". singular is used for exactly 1, plural otherwise. */
typedef struct cb_elapsed_words {
    const char *singular[CB_ELAPSED_UNITS];
    const char *plural[CB_ELAPSED_UNITS];
    const char *abbrev[CB_ELAPSED_UNITS];
    const char *separator;       /* between SPOKEN parts, ", " */
    const char *short_separator; /* between SHORT parts, " " */
    const char *unknown;         /* SPOKEN text for NaN */
} cb_elapsed_words;

/* English: day/days, hour/hours, ..., d h m s. */
extern const cb_elapsed_words cb_elapsed_words_en;

/* Formats `seconds` into buf (always NUL-terminated when cap > 0) and returns
 * the length of the full text, like snprintf: a result >= cap means buf was
 * too small and holds a truncated prefix (possibly cut inside a UTF-8
 * sequence), so call again with result + 1 bytes. words NULL means English.
 * Errors: CB_EINVAL for an unknown style, buf NULL with cap > 0, or a NULL
 * word the style needs. 64 bytes always suffice for positional and English. */
int cb_elapsed_format(double seconds, cb_elapsed_style style, const cb_elapsed_words *words,
                      char *buf, size_t cap);
#endif
