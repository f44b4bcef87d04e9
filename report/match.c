/* match.c -- LeakSanitizer's template match (match.h).
 *
 * A pattern unanchored at a side is one with a `*` there, so every match
 * is of the whole text. Matched left to right, with one point to return
 * to: the last `*` met and the text position it has taken up to. On a
 * mismatch that `*` takes one more character and the rest is tried again;
 * an earlier `*` never needs to take more, since whatever the later one
 * can reach from a longer run of the earlier it can reach from its own. */
#include <string.h>

#include "match.h"

int vt_template_match(const char *pattern, const char *text) {
    if (!pattern || !text) return 0;
    size_t plen = strlen(pattern);
    int any_start = !(plen > 0 && pattern[0] == '^');
    if (!any_start) { pattern++; plen--; }
    int any_end = !(plen > 0 && pattern[plen - 1] == '$');
    if (!any_end) plen--;
    const char *p = pattern, *t = text;
    size_t i = 0;
    int star = any_start;    /* a point to return to */
    size_t star_i = 0;       /* the pattern just after that `*` */
    const char *star_t = t;  /* the text that `*` has reached */
    while (*t) {
        if (i < plen && p[i] == '*') {
            star = 1;
            star_i = ++i;
            star_t = t;
        } else if (i < plen && p[i] == *t) {
            i++;
            t++;
        } else if (i == plen && any_end) {
            return 1;            /* the rest of the text is the trailing `*`'s */
        } else if (star) {
            i = star_i;
            t = ++star_t;
        } else {
            return 0;
        }
    }
    while (i < plen && p[i] == '*') i++;
    return i == plen;
}
