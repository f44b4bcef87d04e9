/* match.h -- LeakSanitizer's template match, for suppressions (leaks.c). */
#ifndef VT_MATCH_H
#define VT_MATCH_H

/* Whether `pattern` matches `text`: `*` matches any run of characters; a
 * leading `^` anchors the pattern at the text's start and a trailing `$`
 * at its end, else it may match anywhere inside. Time at most
 * proportional to the pattern's length times the text's, however many
 * `*` (a backtracking matcher took minutes on six). 0 for NULL. */
int vt_template_match(const char *pattern, const char *text);

#endif
