/* test_scan.c -- the dump reader's JSON scanner (cli/model_scan.c) on the
 * values it reads fastest: integers near their bounds, read without a check
 * for their first 18 (signed) or 19 (count) digits, and values skipped
 * sixteen bytes at a time. Every input lies in a buffer of exactly its own
 * size, so that ASan catches a read past the scanner's end. */
#include <stdlib.h>
#include <string.h>

#include "../../cli/model_scan.h"
#include "check.h"

/* A copy of text of n bytes in a buffer of exactly n bytes (freed by the caller). */
static char *exact(const char *text, size_t n) {
    char *b = malloc(n ? n : 1);
    memcpy(b, text, n);
    return b;
}

/* What vm_scan_int must make of the digits in s..s+n (an optional '-'
 * first, then digits, then anything that is not a digit): 1 and *v, or 0. */
static int want_int(const char *s, size_t n, int64_t *v, size_t *used, int count) {
    size_t i = 0;
    int neg = i < n && s[i] == '-';
    if (neg) i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    if (s[i] == '0' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9') return 0;
    unsigned __int128 u = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        u = u * 10 + (unsigned)(s[i] - '0');
        if (u > ((unsigned __int128)1 << 64)) u = ((unsigned __int128)1 << 64) + 1; /* stays too big */
    }
    if (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E')) return 0;
    /* A count may be "-0" (jansson's 0), no other negative. */
    if (count ? u > UINT64_MAX || (neg && u != 0) : neg ? u > (unsigned __int128)1 << 63 : u > INT64_MAX) return 0;
    *v = neg ? (int64_t)(0 - (uint64_t)u) : (int64_t)(uint64_t)u;
    *used = i;
    return 1;
}

static int mismatches;

static void one_int(const char *text, int count) {
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct vm_scan p = {b, b + n, NULL, NULL, NULL};
    int64_t got = 0, want = 0;
    uint64_t gotu = 0;
    size_t used = 0;
    int ok = count ? vm_scan_u64(&p, &gotu) : vm_scan_int(&p, &got);
    if (count) got = (int64_t)gotu;
    int wok = want_int(b, n, &want, &used, count);
    if (ok != wok || (ok && (got != want || p.s != b + used)) || (!ok && !p.err)) {
        if (mismatches++ < 10)
            fprintf(stderr, "%s \"%s\": got %d %" PRId64 " at %td, want %d %" PRId64 " at %zu\n",
                    count ? "vm_scan_u64" : "vm_scan_int", text, ok, got, p.s - b, wok, want, used);
    }
    free(b);
}

static void test_integers_at_their_bounds(void) {
    static const char *const edges[] = {
        "0", "-0", "1", "-1", "9", "10", "01", "-01", "00", "-", "", "x", "1.5", "1e3", "2E1", "7,", "8]",
        "999999999999999999", "1000000000000000000", "-999999999999999999",
        "9223372036854775806", "9223372036854775807", "9223372036854775808", "9223372036854775809",
        "-9223372036854775807", "-9223372036854775808", "-9223372036854775809", "-9223372036854775810",
        "18446744073709551614", "18446744073709551615", "18446744073709551616", "18446744073709551625",
        "99999999999999999999", "100000000000000000000", "92233720368547758070", "184467440737095516150",
        "123456789012345678901234567890", "0000000000000000000000", "922337203685477580.7",
        "1844674407370955161e", "12345678901234567,", "123456789012345678]", "1234567890123456789 "};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        one_int(edges[i], 0);
        one_int(edges[i], 1);
    }
    /* Random digit strings of 1 to 24 digits, a sign or not, and what follows. */
    srand(7);
    char t[40];
    for (int k = 0; k < 200000; k++) {
        size_t n = 0;
        if (rand() % 3 == 0) t[n++] = '-';
        size_t digits = 1 + (size_t)rand() % 24;
        t[n++] = (char)('1' + rand() % 9);
        if (rand() % 50 == 0) t[n - 1] = '0';
        for (size_t d = 1; d < digits; d++) t[n++] = (char)('0' + rand() % 10);
        static const char tails[] = ",] .e\0";
        char tail = tails[rand() % 6];
        if (tail) t[n++] = tail;
        t[n] = 0;
        one_int(t, 0);
        one_int(t, 1);
    }
    CHECK_EQ(mismatches, 0);
    /* Exact values read, not only agreement with the reference. */
    struct vm_scan p;
    int64_t v;
    uint64_t u;
    char *b = exact("-9223372036854775808", 20);
    p = (struct vm_scan){b, b + 20, NULL, NULL, NULL};
    CHECK(vm_scan_int(&p, &v) && v == INT64_MIN && p.s == b + 20);
    free(b);
    b = exact("18446744073709551615", 20);
    p = (struct vm_scan){b, b + 20, NULL, NULL, NULL};
    CHECK(vm_scan_u64(&p, &u) && u == UINT64_MAX && p.s == b + 20);
    p = (struct vm_scan){b, b + 20, NULL, NULL, NULL};
    CHECK(!vm_scan_int(&p, &v) && p.err && strcmp(p.err, "an integer too big") == 0 && p.s == b);
    free(b);
    /* "-0" is a count of 0 as jansson reads it; "-1" is none. */
    b = exact("-0,", 3);
    p = (struct vm_scan){b, b + 3, NULL, NULL, NULL};
    CHECK(vm_scan_u64(&p, &u) && u == 0 && p.s == b + 2);
    free(b);
    b = exact("-1", 2);
    p = (struct vm_scan){b, b + 2, NULL, NULL, NULL};
    CHECK(!vm_scan_u64(&p, &u) && p.err && p.s == b);
    free(b);
}

/* A random JSON value of about `budget` bytes appended to out at *n. */
static void gen_value(char *out, size_t *n, int depth, size_t budget) {
    int kind = depth > 6 || budget < 4 ? rand() % 3 : rand() % 5;
    if (kind == 0) { /* an integer */
        *n += (size_t)sprintf(out + *n, "%d", rand() - RAND_MAX / 2);
    } else if (kind == 1) { /* a string with escapes, brackets and commas inside */
        static const char *const parts[] = {"a", "\\\"", "\\\\", "[", "]", "{", "}", ",", " ", "x1", "\\u0041"};
        out[(*n)++] = '"';
        for (size_t k = 0, len = (size_t)rand() % 40; k < len; k++) {
            const char *s = parts[rand() % 11];
            memcpy(out + *n, s, strlen(s));
            *n += strlen(s);
        }
        out[(*n)++] = '"';
    } else if (kind == 2) {
        static const char *const lits[] = {"true", "false", "null", "-1.5e3"};
        const char *s = lits[rand() % 4];
        memcpy(out + *n, s, strlen(s));
        *n += strlen(s);
    } else { /* an array or an object */
        int obj = kind == 4;
        out[(*n)++] = obj ? '{' : '[';
        size_t start = *n;
        for (int k = 0; *n - start < budget && k < 200; k++) {
            if (k) out[(*n)++] = rand() % 4 ? ',' : ' ';
            if (obj) { memcpy(out + *n, "\"k\": ", 5); *n += 5; }
            gen_value(out, n, depth + 1, budget / 2);
        }
        out[(*n)++] = obj ? '}' : ']';
    }
}

static void test_values_skipped_to_their_end(void) {
    static char text[1 << 20];
    int wrong = 0, checked = 0;
    srand(11);
    for (int k = 0; k < 20000; k++) {
        size_t n = 0;
        size_t lead = (size_t)rand() % 20; /* the value at every alignment */
        for (size_t i = 0; i < lead; i++) text[n++] = ' ';
        gen_value(text, &n, 0, (size_t)rand() % 3000);
        size_t end = n;
        int trail = rand() % 3; /* nothing after it, a comma, or a bracket */
        if (trail == 1) text[n++] = ',';
        if (trail == 2) text[n++] = ']';
        char *b = exact(text, n);
        struct vm_scan p = {b, b + n, NULL, NULL, NULL};
        int ok = vm_scan_skip(&p);
        checked++;
        if (!ok || p.s != b + end) {
            if (wrong++ < 5) fprintf(stderr, "skip: ok %d ended at %td, want %zu: %.*s\n", ok, p.s - b, end, (int)n, b);
        }
        /* The same text cut short inside its value is refused, never read past. */
        if (end > lead + 1 && (b[lead] == '[' || b[lead] == '{' || b[lead] == '"')) {
            size_t cut = lead + 1 + (size_t)rand() % (end - lead - 1);
            char *c = exact(b, cut);
            struct vm_scan q = {c, c + cut, NULL, NULL, NULL};
            if (vm_scan_skip(&q) || !q.err) wrong++;
            free(c);
        }
        free(b);
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(checked, 20000);
    /* Brackets, one at each of the 16 places of a block and past it. */
    for (size_t at = 0; at < 40; at++) {
        char buf[64];
        memset(buf, '7', sizeof buf);
        buf[0] = '[';
        buf[at + 1] = ']';
        char *b = exact(buf, at + 2);
        struct vm_scan p = {b, b + at + 2, NULL, NULL, NULL};
        CHECK(vm_scan_skip(&p) && p.s == b + at + 2);
        free(b);
    }
    /* An unbalanced bracket is refused. */
    char *b = exact("[1,2]]", 6);
    struct vm_scan p = {b + 5, b + 6, NULL, NULL, NULL};
    CHECK(!vm_scan_skip(&p) && p.err && strcmp(p.err, "a value is missing") == 0);
    free(b);
}

/* The hook's calls: every VM_SCAN_STEP bytes of a long value, in order. */
static const char *hook_last;
static int hook_calls, hook_backwards;
static void hook(void *arg, const char *upto) {
    (void)arg;
    if (hook_last && upto < hook_last) hook_backwards++;
    hook_last = upto;
    hook_calls++;
}

static void test_long_value_handed_over_as_read(void) {
    size_t n = 10 * (size_t)VM_SCAN_STEP + 2;
    char *b = malloc(n);
    b[0] = '[';
    for (size_t i = 1; i + 1 < n; i++) b[i] = i % 2 ? '5' : ',';
    b[n - 1] = ']';
    struct vm_scan p = {b, b + n, NULL, hook, NULL};
    CHECK(vm_scan_skip(&p) && p.s == b + n);
    CHECK_EQ(hook_calls, 10); /* at each VM_SCAN_STEP bytes before the end */
    CHECK_EQ(hook_backwards, 0);
    CHECK(hook_last == b + 10 * (size_t)VM_SCAN_STEP);
    free(b);
}

/* null as a value of its own, and nothing else: not a prefix of a longer
 * literal, not cut short at the buffer's end; nothing consumed and no
 * refusal when it is not there. */
static void test_null(void) {
    static const struct { const char *text; int is; size_t used; } cases[] = {
        {"null", 1, 4}, {" null,", 1, 5}, {"null]", 1, 4}, {"\nnull }", 1, 5}, {"nul", 0, 0}, {"nullx", 0, 0},
        {"null0", 0, 0}, {"\"null\"", 0, 0}, {"0", 0, 0}, {"", 0, 0}, {"Null", 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = strlen(cases[i].text);
        char *b = exact(cases[i].text, n);
        struct vm_scan p = {b, b + n, NULL, NULL, NULL};
        int is = vm_scan_null(&p);
        CHECK_EQ(is, cases[i].is);
        if (is) CHECK_EQ((size_t)(p.s - b), cases[i].used);
        CHECK(p.err == NULL);
        free(b);
    }
}

int main(void) {
    test_integers_at_their_bounds();
    test_null();
    test_values_skipped_to_their_end();
    test_long_value_handed_over_as_read();
    return check_report("unit_scan");
}
