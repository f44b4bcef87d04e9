/* test_match.c -- the suppressions' template match (report/match.c)
 * against a plain backtracking reference on every short pattern and text,
 * and on the patterns that made the backtracking one run for minutes. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../report/match.h"
#include "check.h"

/* The reference: each `*` tries every length, recursively. */
static int ref_here(const char *p, size_t plen, const char *t, int end) {
    if (plen == 0) return !end || *t == '\0';
    if (*p == '*') {
        for (const char *s = t;; s++) {
            if (ref_here(p + 1, plen - 1, s, end)) return 1;
            if (*s == '\0') return 0;
        }
    }
    if (*t == '\0' || *p != *t) return 0;
    return ref_here(p + 1, plen - 1, t + 1, end);
}

static int ref(const char *pattern, const char *text) {
    size_t plen = strlen(pattern);
    int start = plen > 0 && pattern[0] == '^';
    if (start) { pattern++; plen--; }
    int end = plen > 0 && pattern[plen - 1] == '$';
    if (end) plen--;
    if (start) return ref_here(pattern, plen, text, end);
    for (const char *t = text;; t++) {
        if (ref_here(pattern, plen, t, end)) return 1;
        if (*t == '\0') return 0;
    }
}

/* Every string of length 0..max over `alphabet`, as the k-th of them. */
static void nth(char *out, const char *alphabet, unsigned long k, size_t len) {
    size_t a = strlen(alphabet);
    for (size_t i = 0; i < len; i++, k /= a) out[i] = alphabet[k % a];
    out[len] = '\0';
}

static void test_every_short_pattern_and_text(void) {
    char p[32], core[16], t[16];
    int mismatches = 0;
    unsigned long compared = 0;
    for (size_t pl = 0; pl <= 6; pl++) {
        unsigned long np = 1;
        for (size_t i = 0; i < pl; i++) np *= 3;
        for (unsigned long pk = 0; pk < np; pk++) {
            nth(core, "ab*", pk, pl);
            for (int anchors = 0; anchors < 4; anchors++) {
                snprintf(p, sizeof p, "%s%s%s", anchors & 1 ? "^" : "", core, anchors & 2 ? "$" : "");
                for (size_t tl = 0; tl <= 7; tl++) {
                    for (unsigned long tk = 0; tk < (1ul << tl); tk++) {
                        nth(t, "ab", tk, tl);
                        compared++;
                        if (vt_template_match(p, t) != ref(p, t) && mismatches++ < 10)
                            fprintf(stderr, "pattern \"%s\" text \"%s\": got %d, want %d\n", p, t,
                                    vt_template_match(p, t), ref(p, t));
                    }
                }
            }
        }
    }
    CHECK_EQ(mismatches, 0);
    CHECK(compared > 1000000);
}

static void test_named_cases(void) {
    CHECK_EQ(vt_template_match("leaky_step", "my_leaky_step_fn"), 1);
    CHECK_EQ(vt_template_match("^leaky", "my_leaky"), 0);
    CHECK_EQ(vt_template_match("^my_", "my_leaky"), 1);
    CHECK_EQ(vt_template_match("step$", "leaky_step"), 1);
    CHECK_EQ(vt_template_match("step$", "leaky_step_fn"), 0);
    CHECK_EQ(vt_template_match("^a*c$", "abbbc"), 1);
    CHECK_EQ(vt_template_match("^a*c$", "abbbcd"), 0);
    CHECK_EQ(vt_template_match("libfoo*.so", "/usr/lib/libfoo-1.2.so.3"), 1);
    CHECK_EQ(vt_template_match("", "x"), 1);
    CHECK_EQ(vt_template_match("^$", ""), 1);
    CHECK_EQ(vt_template_match("^$", "x"), 0);
    CHECK_EQ(vt_template_match(NULL, "x"), 0);
    CHECK_EQ(vt_template_match("x", NULL), 0);
}

/* Many `*` against a long text that never matches: exponential for the
 * reference (minutes at 6 stars and 60 characters); here it must end,
 * and the alarm fails the test rather than letting it hang. */
static void test_many_stars_end(void) {
    char text[4097], pattern[200];
    memset(text, 'a', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    size_t n = 0;
    for (int i = 0; i < 40; i++) { pattern[n++] = '*'; pattern[n++] = 'a'; }
    pattern[n++] = 'Z';
    pattern[n] = '\0';
    alarm(20);
    CHECK_EQ(vt_template_match(pattern, text), 0);
    pattern[n - 1] = 'a';
    CHECK_EQ(vt_template_match(pattern, text), 1);
    pattern[0] = '^';
    CHECK_EQ(vt_template_match(pattern, text), 1);
    alarm(0);
}

int main(void) {
    test_named_cases();
    test_every_short_pattern_and_text();
    test_many_stars_end();
    return check_report("unit_match");
}
