/* check.h -- the unit tests' whole framework: checks that count, fail loudly
 * and make the program exit non-zero. */
#ifndef VT_CHECK_H
#define VT_CHECK_H

#include <inttypes.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond) do { if (cond) check_passed++; else { check_failed++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

#define CHECK_EQ(got, want) do { uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want); \
    if (g_ == w_) check_passed++; else { check_failed++; \
    fprintf(stderr, "%s:%d: %s is %" PRIu64 ", want %" PRIu64 "\n", __FILE__, __LINE__, \
            #got, g_, w_); } } while (0)

#define CHECK_STR(got, want) do { const char *g_ = (got), *w_ = (want); \
    if (g_ && strcmp(g_, w_) == 0) check_passed++; else { check_failed++; \
    fprintf(stderr, "%s:%d: %s is \"%s\", want \"%s\"\n", __FILE__, __LINE__, #got, \
            g_ ? g_ : "(null)", w_); } } while (0)

/* Print the closing line and return the exit status for main. */
static inline int check_report(const char *suite) {
    printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
