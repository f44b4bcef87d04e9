/* test_dlagain.c -- common/dlagain.c alone: a lazy library's load asked
 * again while the loader fails for a descriptor closed under it, and only
 * then. dlopen and dlerror are this program's own, which say what each
 * attempt gets; the loader's real failure (a program's close_range in
 * another thread, between the loader's open and its reads) cannot be made
 * to happen on cue. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../common/dlagain.h"
#include "check.h"

/* What each attempt gets: a letter per attempt, 'B' a failure for a bad
 * descriptor (the loader's text), 'N' a library not found, 'Q' a failure
 * with no text from dlerror, 'K' the load. */
static const char *script;
static int calls;
static char text[256];
static const char *pending;
static int handle;

void *dlopen(const char *name, int flags) {
    (void)flags;
    char what = script[calls] ? script[calls] : 'N';
    calls++;
    pending = NULL;
    if (what == 'K') return &handle;
    if (what == 'B') {
        snprintf(text, sizeof text, "%s: cannot stat shared object: %s", name, strerror(EBADF));
        pending = text;
    } else if (what == 'N') {
        snprintf(text, sizeof text, "%s: cannot open shared object file: %s", name, strerror(ENOENT));
        pending = text;
    }
    return NULL;
}

char *dlerror(void) {
    const char *p = pending;
    pending = NULL;
    return (char *)p;
}

/* The attempts a load made, and what it gave, under `s`. */
static void *load(const char *s, char *why, size_t size) {
    script = s;
    calls = 0;
    return vt_dlopen_again("libdw.so.1", 1, why, size);
}

int main(void) {
    char why[200];

    /* The load at once: asked once, why untouched. */
    strcpy(why, "untouched");
    CHECK(load("K", why, sizeof why) == &handle);
    CHECK_EQ(calls, 1);
    CHECK_STR(why, "untouched");

    /* A bad descriptor twice, then the load: asked three times. */
    CHECK(load("BBK", why, sizeof why) == &handle);
    CHECK_EQ(calls, 3);

    /* A bad descriptor once, then the load: asked twice. */
    CHECK(load("BK", why, sizeof why) == &handle);
    CHECK_EQ(calls, 2);

    /* A bad descriptor three times: three attempts, no fourth, and the
     * last attempt's text. */
    CHECK(load("BBBK", why, sizeof why) == NULL);
    CHECK_EQ(calls, 3);
    CHECK_STR(why, "libdw.so.1: cannot stat shared object: Bad file descriptor");

    /* A library not there: asked once, its text kept. */
    CHECK(load("NK", why, sizeof why) == NULL);
    CHECK_EQ(calls, 1);
    CHECK_STR(why, "libdw.so.1: cannot open shared object file: No such file or directory");

    /* A bad descriptor, then a library not there: the second text, no
     * third attempt. */
    CHECK(load("BNK", why, sizeof why) == NULL);
    CHECK_EQ(calls, 2);
    CHECK_STR(why, "libdw.so.1: cannot open shared object file: No such file or directory");

    /* A failure dlerror says nothing of: asked once, why says which. */
    CHECK(load("QK", why, sizeof why) == NULL);
    CHECK_EQ(calls, 1);
    CHECK_STR(why, "libdw.so.1: not loaded");

    /* No room for why: the attempts all the same, nothing written. */
    CHECK(load("BBK", NULL, 0) == &handle);
    CHECK_EQ(calls, 3);
    strcpy(why, "untouched");
    CHECK(load("BBB", why, 0) == NULL);
    CHECK_EQ(calls, 3);
    CHECK_STR(why, "untouched");

    /* A short why: cut, ended. */
    char small[8];
    CHECK(load("N", small, sizeof small) == NULL);
    CHECK_STR(small, "libdw.s");
    return check_report("unit_dlagain");
}
