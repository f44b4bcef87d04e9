/* cmd_diff.c -- `vramtrace diff OLD.json NEW.json [--fail-over SIZE]
 * [--top N]`: how live memory changed per call site between two dumps
 * (two snapshots of one run, or two runs), largest growth first. With
 * --fail-over, exit status 1 when the net growth of live bytes exceeds
 * SIZE: a CI check that an iteration retains no more than it should.
 * Status 1 says that alone: a dump that cannot be read, or output that
 * cannot be written, is DIFF_ERROR, so that CI tells "it leaked" from
 * "there was no dump to compare". */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/options.h"
#include "cli.h"
#include "model.h"
#include "reporters.h"

/* a + b, held at UINT64_MAX: totals of a hostile dump stay defined. */
static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* new - old as a sign and a magnitude: exact for any two counts. */
struct change {
    int sign;
    uint64_t by;
};

static struct change change_of(uint64_t old, uint64_t new) {
    struct change c = {new > old ? 1 : new < old ? -1 : 0, new > old ? new - old : old - new};
    return c;
}

/* Call sites by growth of their bytes, largest first; equal growth in the
 * holders' order. */
static int by_growth(const void *a, const void *b) {
    const struct vr_combined *x = a, *y = b;
    struct change cx = change_of(x->bytes_in[0], x->bytes_in[1]), cy = change_of(y->bytes_in[0], y->bytes_in[1]);
    if (cx.sign != cy.sign) return cx.sign < cy.sign ? 1 : -1;
    if (cx.by != cy.by) return (cx.by < cy.by) == (cx.sign >= 0) ? 1 : -1;
    return strcmp(x->where, y->where);
}

static const char *signed_bytes(struct change c, char *buf, size_t size) {
    char b[32];
    vr_bytes(c.by, b, sizeof b);
    snprintf(buf, size, "%s%s", c.sign < 0 ? "-" : c.sign > 0 ? "+" : "", b);
    return buf;
}

/* The bytes a figure of vr_bytes reads as ("1.00 MiB" and "1024.00 KiB"
 * read as the same 1048576). */
static double shown_bytes(const char *s) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    char *end;
    double v = strtod(s, &end);
    while (*end == ' ') end++;
    for (size_t u = 0; u < sizeof units / sizeof *units; u++, v *= 1024.0)
        if (strcmp(end, units[u]) == 0) return v;
    return -1;
}

static const char *signed_count(struct change c, char *buf, size_t size) {
    snprintf(buf, size, "%s%" PRIu64, c.sign < 0 ? "-" : "+", c.by);
    return buf;
}

/* The status of a diff that could not be made or said (2 is a usage
 * error, 1 the growth past --fail-over). */
#define DIFF_ERROR 3

static int load_error(const char *err) {
    char safe[1024];
    fprintf(stderr, "vramtrace diff: %s\n", vr_safe(err, safe, sizeof safe));
    return DIFF_ERROR;
}

int vt_cmd_diff(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL};
    int np = 0, have_limit = 0;
    long top = 20;
    uint64_t limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: vramtrace diff OLD.json NEW.json [--fail-over SIZE] [--top N]\n\n"
                   "Change of live device bytes and allocations per call site (the holders at\n"
                   "exit of each dump), largest growth first.\n"
                   "  --fail-over SIZE  exit status 1 when live bytes (with what contexts gave\n"
                   "                    back, reset or destroyed, without a free) grew by more\n"
                   "                    than SIZE\n"
                   "                    (bytes, or with K, M, G, T: 512M, 1.5G)\n"
                   "  --top N           rows to show, 1 to 100000 (default 20); the call sites\n"
                   "                    past them are added up on one line\n\n"
                   "Exit status: 0 compared; 1 grew past --fail-over; 2 a usage error; 3 a dump\n"
                   "could not be read or the output could not be written.\n");
            return vt_cli_flush("vramtrace diff");
        }
        if (strcmp(a, "--fail-over") == 0) {
            if (i + 1 >= argc || vt_parse_size(argv[i + 1], &limit) != 0) {
                char safe[256];
                fprintf(stderr, "vramtrace diff: --fail-over takes a size below 16 EiB such as 512M, not '%s'\n",
                        i + 1 < argc ? vr_safe(argv[i + 1], safe, sizeof safe) : "");
                return 2;
            }
            have_limit = 1;
            i++;
        } else if (strcmp(a, "--top") == 0) {
            if (i + 1 >= argc || vt_cli_count(argv[i + 1], 1, 100000, &top) != 0) {
                char safe[256];
                fprintf(stderr, "vramtrace diff: --top takes a number from 1 to 100000, not '%s'\n",
                        i + 1 < argc ? vr_safe(argv[i + 1], safe, sizeof safe) : "");
                return 2;
            }
            i++;
        } else if (a[0] == '-' && a[1]) {
            char safe[256];
            fprintf(stderr, "vramtrace diff: unknown option %s (see vramtrace diff --help)\n",
                    vr_safe(a, safe, sizeof safe));
            return 2;
        } else {
            if (np < 2) paths[np] = a;
            np++; /* a third is told below, as one too few is */
        }
    }
    if (np != 2) { fprintf(stderr, "vramtrace diff: give exactly two dumps: OLD.json NEW.json\n"); return 2; }
    struct vm_dump d[2];
    char err[1024];
    /* The diff reads holders, never an event: the events are counted. */
    if (vm_load_with(paths[0], VM_LOAD_COUNT_EVENTS, &d[0], err, sizeof err) != 0) return load_error(err);
    if (vm_load_with(paths[1], VM_LOAD_COUNT_EVENTS, &d[1], err, sizeof err) != 0) {
        vm_free(&d[0]);
        return load_error(err);
    }
    /* Each dump's holders at exit (the report's holders table: this
     * process's own device memory), joined by call site as the report
     * groups them (vr_combine_each). */
    struct vr_input in = {.dumps = d, .n = 2};
    size_t k = 0;
    int rc = 0;
    struct vr_combined *list = vr_combine_each(&in, VR_AT_EXIT, &k);
    if (!list) {
        fprintf(stderr, "vramtrace diff: out of memory\n");
        rc = DIFF_ERROR;
    }
    uint64_t total[2] = {0, 0}, count[2] = {0, 0};
    for (size_t g = 0; g < k; g++)
        for (int w = 0; w < 2; w++) {
            total[w] = add_sat(total[w], list[g].bytes_in[w]);
            count[w] = add_sat(count[w], list[g].count_in[w]);
        }
    if (list) qsort(list, k, sizeof *list, by_growth);
    /* What context resets released without a free: leaks too, not live;
     * the limit applies to live and released device bytes together.
     * Pinned host memory a reset released is shown with the pinned host
     * memory, apart from the rows and the limit, as when no reset took
     * it. */
    uint64_t released[2] = {0, 0}, released_host[2] = {0, 0};
    for (int w = 0; w < 2; w++) {
        for (size_t i = 0; i < d[w].nreleased; i++) released[w] = add_sat(released[w], d[w].released[i].bytes);
        for (size_t i = 0; i < d[w].nreleased_host; i++)
            released_host[w] = add_sat(released_host[w], d[w].released_host[i].bytes);
    }
    char a[32], b[32], c[48], e[48];
    struct change grew = change_of(add_sat(total[0], released[0]), add_sat(total[1], released[1]));
    if (rc == 0) {
        fputs("vramtrace diff: ", stdout);
        vr_put_safe(stdout, paths[0]);
        fputs(" -> ", stdout);
        vr_put_safe(stdout, paths[1]);
        printf("\nlive: %s -> %s (%s); allocations: %" PRIu64 " -> %" PRIu64 " (%s)\n",
               vr_bytes(total[0], a, sizeof a), vr_bytes(total[1], b, sizeof b),
               signed_bytes(change_of(total[0], total[1]), c, sizeof c),
               count[0], count[1], signed_count(change_of(count[0], count[1]), e, sizeof e));
        const struct vm_totals *t0 = &d[0].totals, *t1 = &d[1].totals;
        if (released[0] || released[1])
            printf("released by a context's reset or destruction without a free (leaks, not in the rows below): %s -> %s\n",
                   vr_bytes(released[0], a, sizeof a), vr_bytes(released[1], b, sizeof b));
        if (t0->host_live_bytes || t1->host_live_bytes || released_host[0] || released_host[1]) {
            printf("pinned host memory (not in the rows below): %s -> %s",
                   vr_bytes(t0->host_live_bytes, a, sizeof a), vr_bytes(t1->host_live_bytes, b, sizeof b));
            if (released_host[0] || released_host[1])
                printf("; released by a context's reset or destruction without a free (leaks): %s -> %s",
                       vr_bytes(released_host[0], a, sizeof a), vr_bytes(released_host[1], b, sizeof b));
            putchar('\n');
        }
        printf("  %12s  %-26s %-18s %s\n", "change", "bytes (old -> new)", "allocations", "call site");
        long shown = 0;
        /* The changed sites past --top, added up, so that the rows and
         * this line add up to the totals line (rows are largest growth
         * first: --top cut the largest releases without a word). */
        uint64_t more = 0, more_bytes[2] = {0, 0}, more_count[2] = {0, 0};
        for (size_t i = 0; i < k; i++) {
            const struct vr_combined *s = &list[i];
            const uint64_t *sb = s->bytes_in, *sc = s->count_in;
            if (sb[0] == sb[1] && sc[0] == sc[1]) continue;
            if (shown == top) {
                more++;
                for (int w = 0; w < 2; w++) {
                    more_bytes[w] = add_sat(more_bytes[w], sb[w]);
                    more_count[w] = add_sat(more_count[w], sc[w]);
                }
                continue;
            }
            char range[64], cnt[96];
            snprintf(range, sizeof range, "%s -> %s", vr_bytes(sb[0], a, sizeof a), vr_bytes(sb[1], b, sizeof b));
            snprintf(cnt, sizeof cnt, "%s (%" PRIu64 " -> %" PRIu64 ")",
                     signed_count(change_of(sc[0], sc[1]), e, sizeof e), sc[0], sc[1]);
            printf("  %12s  %-26s %-18s ", signed_bytes(change_of(sb[0], sb[1]), c, sizeof c), range, cnt);
            vr_put_safe(stdout, s->where);
            putchar('\n');
            shown++;
        }
        if (shown == 0) printf("  (no change)\n");
        if (more) {
            struct change mc = change_of(more_count[0], more_count[1]);
            printf("  (%" PRIu64 " more %s changed, %s and %s %s together, not shown: --top %ld)\n", more,
                   vr_plural(more, "call site", "call sites"),
                   signed_bytes(change_of(more_bytes[0], more_bytes[1]), c, sizeof c), signed_count(mc, e, sizeof e),
                   vr_plural(mc.by, "allocation", "allocations"), top);
        }
        /* Output that did not reach its destination fails the command. */
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "vramtrace diff: writing failed: %s\n", strerror(errno ? errno : EIO));
            rc = DIFF_ERROR;
        } else if (have_limit && grew.sign > 0 && grew.by > limit) {
            signed_bytes(grew, c, sizeof c);
            vr_bytes(limit, b, sizeof b);
            /* The same when rounded ("+1.00 MiB, more than 1.00 MiB" for
             * 1048576 over 1048575): in bytes, exact. */
            double x = shown_bytes(c + 1), y = shown_bytes(b);
            if ((x > y ? x - y : y - x) <= 1e-9 * (x > y ? x : y)) {
                snprintf(c, sizeof c, "+%" PRIu64 " bytes", grew.by);
                snprintf(b, sizeof b, "%" PRIu64 " bytes", limit);
            }
            fprintf(stderr, "vramtrace diff: live%s bytes grew by %s, more than --fail-over %s\n",
                    released[0] || released[1] ? " and released" : "", c, b);
            rc = 1;
        }
    }
    vr_combined_free(list, k);
    vm_free(&d[0]);
    vm_free(&d[1]);
    return rc;
}
