/* cmd_diff.c -- `vramtrace diff OLD.json NEW.json [--fail-over SIZE]
 * [--top N]`: how live memory changed per call site between two dumps
 * (two snapshots of one run, or two runs), largest growth first. With
 * --fail-over, exit status 1 when the net growth of live bytes exceeds
 * SIZE: a CI check that an iteration retains no more than it should. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "../tracker/options.h"
#include "cli.h"
#include "model.h"
#include "reporters.h"

struct site {
    char *where;
    int64_t bytes[2], count[2];
    UT_hash_handle hh;
};

static int by_growth(const void *a, const void *b) {
    const struct site *x = *(struct site *const *)a, *y = *(struct site *const *)b;
    int64_t dx = x->bytes[1] - x->bytes[0], dy = y->bytes[1] - y->bytes[0];
    if (dx != dy) return dx < dy ? 1 : -1;
    return strcmp(x->where, y->where);
}

static void add(struct site **sites, const struct vm_dump *d, int which) {
    for (size_t i = 0; i < d->nlive; i++) {
        char where[1024];
        const struct vm_frame *f = vm_site(d, d->live[i].stack);
        if (f) vm_frame_where(f, where, sizeof where);
        else snprintf(where, sizeof where, "(no stack)");
        struct site *s;
        HASH_FIND_STR(*sites, where, s);
        if (!s) {
            s = calloc(1, sizeof *s);
            if (!s || !(s->where = strdup(where))) { free(s); continue; }
            HASH_ADD_KEYPTR(hh, *sites, s->where, strlen(s->where), s);
        }
        s->bytes[which] += (int64_t)d->live[i].bytes;
        s->count[which]++;
    }
}

static const char *signed_bytes(int64_t v, char *buf, size_t size) {
    char b[32];
    vr_bytes((uint64_t)(v < 0 ? -v : v), b, sizeof b);
    snprintf(buf, size, "%s%s", v < 0 ? "-" : v > 0 ? "+" : "", b);
    return buf;
}

int vt_cmd_diff(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL};
    int np = 0, top = 20, have_limit = 0;
    uint64_t limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: vramtrace diff OLD.json NEW.json [--fail-over SIZE] [--top N]\n\n"
                   "Change of live bytes and allocations per call site, largest growth first.\n"
                   "  --fail-over SIZE  exit status 1 when live bytes grew by more than SIZE\n"
                   "                    (bytes, or with K, M, G: 512M)\n"
                   "  --top N           rows to show (default 20)\n");
            return 0;
        }
        if (strcmp(a, "--fail-over") == 0) {
            if (i + 1 >= argc || vt_parse_size(argv[i + 1], &limit) != 0) {
                fprintf(stderr, "vramtrace diff: --fail-over takes a size such as 512M, not '%s'\n",
                        i + 1 < argc ? argv[i + 1] : "");
                return 2;
            }
            have_limit = 1;
            i++;
        } else if (strcmp(a, "--top") == 0) {
            top = i + 1 < argc ? atoi(argv[++i]) : 0;
            if (top < 1) { fprintf(stderr, "vramtrace diff: --top takes a positive number\n"); return 2; }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vramtrace diff: unknown option %s (see vramtrace diff --help)\n", a);
            return 2;
        } else if (np < 2) {
            paths[np++] = a;
        } else {
            fprintf(stderr, "vramtrace diff: give exactly two dumps\n");
            return 2;
        }
    }
    if (np != 2) { fprintf(stderr, "vramtrace diff: give exactly two dumps: OLD.json NEW.json\n"); return 2; }
    struct vm_dump d[2];
    char err[1024];
    if (vm_load(paths[0], &d[0], err, sizeof err) != 0) {
        fprintf(stderr, "vramtrace diff: %s\n", err);
        return 1;
    }
    if (vm_load(paths[1], &d[1], err, sizeof err) != 0) {
        fprintf(stderr, "vramtrace diff: %s\n", err);
        vm_free(&d[0]);
        return 1;
    }
    struct site *sites = NULL, *s, *tmp;
    add(&sites, &d[0], 0);
    add(&sites, &d[1], 1);
    size_t n = HASH_COUNT(sites), k = 0;
    struct site **list = calloc(n ? n : 1, sizeof *list);
    int64_t total[2] = {0, 0}, count[2] = {0, 0};
    HASH_ITER(hh, sites, s, tmp) {
        if (list) list[k++] = s;
        total[0] += s->bytes[0]; total[1] += s->bytes[1];
        count[0] += s->count[0]; count[1] += s->count[1];
    }
    if (list) qsort(list, k, sizeof *list, by_growth);
    char a[32], b[32], c[48];
    printf("vramtrace diff: %s -> %s\n", paths[0], paths[1]);
    printf("live: %s -> %s (%s); allocations: %" PRId64 " -> %" PRId64 " (%+" PRId64 ")\n",
           vr_bytes((uint64_t)total[0], a, sizeof a), vr_bytes((uint64_t)total[1], b, sizeof b),
           signed_bytes(total[1] - total[0], c, sizeof c), count[0], count[1], count[1] - count[0]);
    printf("  %12s  %-26s %-18s %s\n", "change", "bytes (old -> new)", "allocations", "call site");
    int shown = 0;
    for (size_t i = 0; i < k && shown < top; i++) {
        s = list[i];
        if (s->bytes[0] == s->bytes[1] && s->count[0] == s->count[1]) continue;
        char range[64], cnt[48];
        snprintf(range, sizeof range, "%s -> %s", vr_bytes((uint64_t)s->bytes[0], a, sizeof a),
                 vr_bytes((uint64_t)s->bytes[1], b, sizeof b));
        snprintf(cnt, sizeof cnt, "%+" PRId64 " (%" PRId64 " -> %" PRId64 ")", s->count[1] - s->count[0],
                 s->count[0], s->count[1]);
        printf("  %12s  %-26s %-18s %s\n", signed_bytes(s->bytes[1] - s->bytes[0], c, sizeof c), range, cnt,
               s->where);
        shown++;
    }
    if (shown == 0) printf("  (no change)\n");
    int rc = 0;
    if (have_limit && total[1] - total[0] > (int64_t)limit) {
        fprintf(stderr, "vramtrace diff: live bytes grew by %s, more than --fail-over %s\n",
                signed_bytes(total[1] - total[0], c, sizeof c), vr_bytes(limit, b, sizeof b));
        rc = 1;
    }
    HASH_ITER(hh, sites, s, tmp) {
        HASH_DEL(sites, s);
        free(s->where);
        free(s);
    }
    free(list);
    vm_free(&d[0]);
    vm_free(&d[1]);
    return rc;
}
