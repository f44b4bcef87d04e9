/* fmt_folded.c -- folded stacks ("frame;frame;... BYTES", outermost first),
 * the input of flamegraph.pl, inferno and speedscope. Weight: bytes held at
 * the chosen moment (--at). Each line's root is its stack's call-site label
 * (vm_site_label: the user's line, then the library line it went through),
 * so that a flame graph's first level is the holders table by call site,
 * the same bytes per label; with several dumps "rank R pid P" follows it
 * ("pid P begun ... UTC" where several processes of one pid on one host
 * are given: containers' pid 1), and of each process its newest dump
 * alone is folded (vr_newest_of_process), as the holders combined take it.
 * Lines come in the order of each dump's holders in the one order of the
 * formats (vr_holders_ranked: more bytes first, ties by call-site label).
 * --folded-root none writes the whole stacks alone, as before labels: then
 * with several dumps each line starts with "rank R pid P". Stacks that read
 * the same (they differ only in addresses) are written as one line. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reporters.h"

/* A line's text, built in a buffer that grows and is used again. */
struct text {
    char *buf;
    size_t len, cap;
    int failed;              /* out of memory on the way */
};

/* Append n bytes of text to t. */
static void append(struct text *t, const char *text, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t c = (t->cap + n + 1) * 2 + 64;
        char *b = realloc(t->buf, c);
        if (!b) { t->failed = 1; return; }
        t->buf = b;
        t->cap = c;
    }
    memcpy(t->buf + t->len, text, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

/* Append text; a frame label (raw == 0) has the format's separator taken
 * out (';' becomes ':') and is written in its display form, so that no
 * name can start a new frame or a new line, or reach a terminal as a
 * control character. A run of printable ASCII other than ';' is copied
 * at once (a character at a time, 318 MB of lines took 4 s). */
static void put(struct text *t, const char *label, int raw) {
    char ch[VR_CHAR_MAX + 1];
    if (raw) {
        append(t, label, strlen(label));
        return;
    }
    while (*label) {
        size_t run = 0;
        for (unsigned char c; (c = (unsigned char)label[run]) >= 0x20 && c < 0x7f && c != ';';) run++;
        if (run) {
            append(t, label, run);
            label += run;
            continue;
        }
        size_t n = vr_display_char(label, ch);
        if (n == 0) break;
        const char *w = ch[0] == ';' ? ":" : ch;
        append(t, w, strlen(w));
        label += n;
    }
}

/* Each frame's text as a line holds it (put's display form), made once:
 * a frame is in many lines and each line is made twice, and making labels
 * (snprintf, the display form) was half the time of a dump of 100,000
 * stacks of 210 frames. Per dump: for frame i of its table, at[i] is the
 * text's offset in `room` + 1 (0: not made yet) and len[i] its length.
 * The room is bounded (LABELS_ROOM): a frame whose text does not fit is
 * made at each use, as before, so that the cache never adds more than the
 * bound and 8 bytes a frame to the report's memory. */
#ifndef VR_FOLDED_LABELS_ROOM
#define VR_FOLDED_LABELS_ROOM (16u << 20) /* a test build narrows it (reader_mem.mk) */
#endif
#define LABELS_ROOM ((size_t)VR_FOLDED_LABELS_ROOM)

struct labels {
    uint32_t *at, *len;
    char *room;
    size_t used;
    int off;                 /* out of memory for the tables: no cache */
};

static struct labels *labels_of(struct labels *all, const struct vm_dump *d, size_t di) {
    struct labels *l = &all[di];
    if (!l->at && !l->off && d->nframes) {
        l->at = calloc(d->nframes, sizeof *l->at);
        l->len = malloc(d->nframes * sizeof *l->len);
        l->room = malloc(LABELS_ROOM);
        if (!l->at || !l->len || !l->room) {
            free(l->at);
            free(l->len);
            free(l->room);
            *l = (struct labels){.off = 1};
        }
    }
    return l->at ? l : NULL;
}

static void labels_free(struct labels *all, size_t n) {
    for (size_t i = 0; all && i < n; i++) {
        free(all[i].at);
        free(all[i].len);
        free(all[i].room);
    }
    free(all);
}

/* The line of stack `stack` of dump `di` (without its weight) into t;
 * frames' texts from and into `cache` (NULL: made each time). */
/* A line whose last frame ends in a space and a number ("frame 42") reads
 * to flamegraph.pl and inferno as a differential line of two counts (the
 * frame cut at the space, 42 taken as the first count): that space
 * becomes '_'. */
static void no_second_count(struct text *t) {
    size_t e = t->len;
    while (e > 0 && t->buf[e - 1] >= '0' && t->buf[e - 1] <= '9') e--;
    if (e > 0 && t->buf[e - 1] == '.') {
        size_t f = --e;
        while (e > 0 && t->buf[e - 1] >= '0' && t->buf[e - 1] <= '9') e--;
        if (e == f) return;
    } else if (e == t->len) {
        return;
    }
    if (e > 0 && t->buf[e - 1] == ' ') t->buf[e - 1] = '_';
}

static void line_of(struct text *t, const struct vr_input *in, size_t di, size_t stack, const struct vr_opts *o,
                    struct labels *cache) {
    const struct vm_dump *d = &in->dumps[di];
    const struct vm_stack *s = &d->stacks[stack];
    struct labels *l = cache ? labels_of(cache, d, di) : NULL;
    char label[2048], site[1024]; /* the site cut where the holders table's is */
    t->len = 0;
    t->failed = 0;
    append(t, "", 0);
    if (o->folded_root == VR_ROOT_SITE) {
        put(t, vm_site_label(d, stack, site, sizeof site), 0);
        put(t, ";", 1);
    }
    if (in->n > 1) {
        /* As report's table names a process: a rank only where a launcher
         * gave one, a local rank with its host. */
        if (d->rank_local)
            snprintf(label, sizeof label, "local rank %d %s pid %d", d->rank, d->host ? d->host : "?", d->pid);
        else if (d->rank_known) snprintf(label, sizeof label, "rank %d pid %d", d->rank, d->pid);
        else snprintf(label, sizeof label, "pid %d", d->pid);
        put(t, label, 0);
        /* Processes of one pid on one host (containers' pid 1) told apart
         * by when each began, as the text's note says it. */
        if (vr_began(in, d, site, sizeof site)[0]) {
            put(t, " ", 1);
            put(t, site, 0);
        }
        put(t, ";", 1);
    }
    const struct vt_frame *const *fr = vm_stack_frames(d, stack);
    for (size_t k = s->nframes; k-- > 0;) {
        size_t i = (size_t)(fr[k] - d->frames);
        if (l && l->at[i]) {
            append(t, l->room + l->at[i] - 1, l->len[i]);
        } else {
            size_t from = t->len;
            put(t, vm_frame_label(fr[k], label, sizeof label), 0);
            size_t n = t->len - from;
            if (l && !t->failed && n <= LABELS_ROOM - l->used) {
                memcpy(l->room + l->used, t->buf + from, n);
                l->at[i] = (uint32_t)l->used + 1;
                l->len[i] = (uint32_t)n;
                l->used += n;
            }
        }
        if (k) put(t, ";", 1);
    }
    if (s->nframes == 0) put(t, "(no stack)", 0);
    if (!t->failed) no_second_count(t);
}

/* The lines are not kept: a dump of 1,000,000 stacks made 224 MB of them,
 * and kept with a hash entry each they were 4.2 times the dump in memory.
 * A group is one distinct line: the first holder that made it (its dump
 * and stack, to make the text again), its hash and the bytes of every
 * holder whose line reads the same. Groups are found by hash in an
 * open-addressed table of their indexes; two lines of one hash are
 * compared as text (the group's made again), so lines are merged only
 * when they read the same. The output makes each line once more, in the
 * order the groups were first met. */
struct group {
    uint64_t hash, bytes;
    uint32_t dump, stack;
};

struct groups {
    struct group *g;
    size_t n, cap;
    uint32_t *slot;          /* group index + 1; 0 empty */
    size_t nslots;           /* a power of two, at least twice n */
};

/* A test build narrows the hash (tests/progs/reader_mem.mk), so that
 * lines of one hash that read differently are met at every turn. */
#ifndef VR_FOLDED_HASH_MASK
#define VR_FOLDED_HASH_MASK UINT64_MAX
#endif

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a, 64 bits */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return (h ^ n) & VR_FOLDED_HASH_MASK;
}

static int grow(struct groups *gs) {
    if (gs->n == gs->cap) {
        size_t c = gs->cap ? 2 * gs->cap : 1024;
        struct group *g = realloc(gs->g, c * sizeof *g);
        if (!g) return -1;
        gs->g = g;
        gs->cap = c;
    }
    if (2 * (gs->n + 1) > gs->nslots) {
        size_t ns = gs->nslots ? 2 * gs->nslots : 4096;
        uint32_t *slot = calloc(ns, sizeof *slot);
        if (!slot) return -1;
        for (size_t i = 0; i < gs->n; i++) {
            size_t at = gs->g[i].hash & (ns - 1);
            while (slot[at]) at = (at + 1) & (ns - 1);
            slot[at] = (uint32_t)i + 1;
        }
        free(gs->slot);
        gs->slot = slot;
        gs->nslots = ns;
    }
    return 0;
}

/* Add a holder's bytes to the group of its line (t, made already), a new
 * group when no line reads the same. `other` is room to make a group's
 * line in. -1 when out of memory. */
static int add(struct groups *gs, const struct text *t, const struct vr_input *in, const struct vr_opts *o,
               uint32_t dump, uint32_t stack, uint64_t bytes, struct text *other, struct labels *cache) {
    uint64_t h = hash_text(t->buf, t->len);
    size_t at = gs->nslots ? h & (gs->nslots - 1) : 0;
    for (; gs->nslots && gs->slot[at]; at = (at + 1) & (gs->nslots - 1)) {
        struct group *g = &gs->g[gs->slot[at] - 1];
        if (g->hash != h) continue;
        line_of(other, in, g->dump, g->stack, o, cache);
        if (other->failed) return -1;
        if (other->len == t->len && memcmp(other->buf, t->buf, t->len) == 0) {
            g->bytes = g->bytes > UINT64_MAX - bytes ? UINT64_MAX : g->bytes + bytes; /* held, as reporters.c's sums */
            return 0;
        }
    }
    if (grow(gs) != 0) return -1;
    at = h & (gs->nslots - 1);
    while (gs->slot[at]) at = (at + 1) & (gs->nslots - 1);
    gs->g[gs->n] = (struct group){h, bytes, dump, stack};
    gs->slot[at] = (uint32_t)++gs->n;
    return 0;
}

int vr_folded(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err, size_t errsize) {
    struct groups gs = {0};
    struct text t = {0}, other = {0};
    struct labels *cache = calloc(in->n ? in->n : 1, sizeof *cache); /* NULL: labels made each time */
    int rc = 0;
    size_t have = 0;
    const char *without = NULL;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const struct vm_dump *d = &in->dumps[i];
        size_t n;
        int missing;
        /* Of each process its newest dump alone, as the holders combined
         * take it: its earlier dumps (on-demand dumps beside its exit
         * dump) hold what it holds or held, and added they multiplied its
         * bytes by its number of dumps. */
        if (!vr_newest_of_process(in, i)) continue;
        const struct vm_holder *h = vr_holders_at(d, o->at, &n, &missing);
        /* A rank that never failed has no holders at its failure: the
         * others' stacks are the graph, as the text and json combine them. */
        if (missing) {
            if (!without) without = d->path;
            continue;
        }
        have++;
        /* In the one order of the formats, the text's holders table's;
         * as the dump lists them where memory ran out for it. */
        size_t nr, left;
        struct vm_holder *r = vr_holders_ranked(d, h, n, 0, &nr, &left);
        if (r) h = r;
        for (size_t j = 0; j < n && rc == 0; j++) {
            line_of(&t, in, i, h[j].stack, o, cache);
            if (t.failed || gs.n >= UINT32_MAX - 1 ||
                add(&gs, &t, in, o, (uint32_t)i, (uint32_t)h[j].stack, h[j].bytes, &other, cache) != 0) {
                snprintf(err, errsize, "out of memory");
                rc = -1;
            }
        }
        free(r);
    }
    /* No dump has holders at that moment (no failure for --at oom): no
     * line, said on stderr, and the status of the other formats, which say
     * "none" (a script looping over the formats read it as a failure). */
    if (rc == 0 && have == 0 && without)
        fprintf(stderr, "vramtrace report: %s%s has no holders at %s: nothing to fold\n",
                in->n > 1 ? "no dump has holders at this moment: " : "", without, vr_moment_name(o->at));
    for (size_t i = 0; i < gs.n && rc == 0; i++) {
        line_of(&t, in, gs.g[i].dump, gs.g[i].stack, o, cache);
        if (t.failed) {
            snprintf(err, errsize, "out of memory");
            rc = -1;
            break;
        }
        fprintf(f, "%s %" PRIu64 "\n", t.buf, gs.g[i].bytes);
    }
    labels_free(cache, in->n);
    free(gs.g);
    free(gs.slot);
    free(t.buf);
    free(other.buf);
    return rc;
}
