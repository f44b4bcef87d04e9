/* data.c -- the JSON data block of one dump in the HTML page.
 *
 * The script (cli/html/) draws everything from this block, so it is
 * laid out for size and for the script's speed at millions of events:
 * arrays of numbers rather than objects, each string once (frames, call
 * sites, kinds and APIs are tables the rest points into), stacks as a tree
 * of frames (a stack is the node of its innermost frame), and each
 * device's events as three arrays: time since the previous event, signed
 * bytes (in units of `unit`, the greatest common divisor of the sizes) and
 * the timeline series, with the step boundaries' places among them. The
 * field names are the contract between this file and the script; nothing
 * else reads them. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/callsite.h"
#include "../../common/freeall.h"
#include "../../common/labels.h"
#include "../../common/oomtext.h"
#include "../model_torch.h"
#include "../varint.h"
#include "html.h"

#define MAXLABEL 1024
/* The digits of a series number; vh_data's callers ask for at most 24
 * series, plus "other" and "before the history". */
static const char SERIES_DIGITS[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

void vh_text(FILE *f, const char *s) {
    char ch[VR_CHAR_MAX + 1];
    for (size_t n; s && (n = vr_display_char(s, ch)) > 0; s += n) {
        switch (ch[0]) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputs(ch, f);
        }
    }
}

void vh_json_string(FILE *f, const char *s) {
    char ch[VR_CHAR_MAX + 1];
    fputc('"', f);
    for (size_t n; s && (n = vr_display_char(s, ch)) > 0; s += n) {
        for (const char *p = ch; *p; p++) {
            switch (*p) {
            case '"': fputs("\\\"", f); break;
            case '\\': fputs("\\\\", f); break;
            case '<': fputs("\\u003c", f); break;
            case '>': fputs("\\u003e", f); break;
            case '&': fputs("\\u0026", f); break;
            default: fputc(*p, f);
            }
        }
    }
    fputc('"', f);
}

/* Whether a frame is a library's or the runtime's rather than the user's
 * own code, by the call-site rule (common/callsite.h; the CLI applies it
 * without the traced process's VRAMTRACE_APP and VRAMTRACE_LIBRARY). The
 * page folds these away on request. */
static int frame_is_library(const struct vt_frame *fr) {
    if (fr->python) return vt_frame_is_library(fr->file, fr->function, NULL);
    return vt_frame_is_library(fr->file, fr->function, fr->module) || vt_frame_is_runtime(fr->module);
}

/* The tree of stacks: node (parent, frame) -> node id, by open addressing.
 * A slot holds the first dump node that made a page node (plus one; 0 is
 * empty): the key is read back through it (its parent's page node and its
 * frame's label) and so is the id (page_of). A slot of a 64-bit key and an
 * id was 12 bytes, 12 MB of the page's 31 MB for a dump of 387,000 nodes;
 * a slot of the page node, with each page node's dump node beside it
 * (rep), was 8 bytes a node while the tree was built (84 MB of a page's
 * 483 MB for 21,000,000 nodes): rep is made after the table is freed. */
struct tree {
    uint32_t *slot;
    size_t cap, n;
    uint32_t *rep;              /* each page node's dump nodes, one of them; after the table */
    const struct vm_node *nodes; /* the dump's */
    const uint32_t *page_of;    /* each dump node's page node, UINT32_MAX before it has one */
    const uint32_t *fr_of;      /* each dump frame's label */
};

/* Dump node m's parent's page node (UINT32_MAX at the root) and frame label. */
static uint32_t dump_parent(const struct tree *t, uint32_t m) {
    uint32_t p = t->nodes[m].parent;
    return p == VM_NO_NODE ? UINT32_MAX : t->page_of[p];
}

static uint32_t dump_frame(const struct tree *t, uint32_t m) { return t->fr_of[t->nodes[m].frame]; }

/* Node id's parent in the page's tree (UINT32_MAX at the root) and frame:
 * every dump node of a page node has its key, so any serves (rep). */
static uint32_t tree_parent(const struct tree *t, uint32_t id) { return dump_parent(t, t->rep[id]); }

static uint32_t tree_frame(const struct tree *t, uint32_t id) { return dump_frame(t, t->rep[id]); }

/* The page node of dump node m, whose parent's page node is parent (made
 * when it is new). */
static uint32_t tree_node(struct tree *t, uint32_t m, uint32_t parent) {
    uint32_t frame = dump_frame(t, m);
    uint64_t key = ((((uint64_t)parent + 1) << 32) | frame) + 1;
    /* Mixed so that every bit of parent and frame reaches the slot's bits
     * (a slot from the product's middle bits saw only a parent's low bits:
     * nodes of one frame under many parents crowded together, and a page
     * of 2,350,000 nodes took 3.4 s, now 1.1 s). */
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    /* The slot by the high half of a 64 by 64 bit product: any cap will do. */
    size_t i = (size_t)(((unsigned __int128)(h ^ h >> 32) * t->cap) >> 64);
    for (; t->slot[i]; i = i + 1 == t->cap ? 0 : i + 1) {
        uint32_t x = t->slot[i] - 1;
        if (dump_frame(t, x) == frame && dump_parent(t, x) == parent) return t->page_of[x];
    }
    t->slot[i] = m + 1;
    return (uint32_t)t->n++;
}

/* ",\"NAME\":" and v packed as `kind` (pack.c); UINT32_MAX as -1. */
static void put_u32s(FILE *f, const char *name, const uint32_t *v, size_t n, char kind) {
    struct vh_pack p;
    vh_pack_init(&p, kind);
    for (size_t i = 0; i < n; i++) vh_pack(&p, v[i] == UINT32_MAX ? -1 : (int64_t)v[i]);
    vh_pack_write(f, name, &p);
}

static void put_labels(FILE *f, const char *name, const struct vt_labels *l) {
    fprintf(f, ",\"%s\":[", name);
    for (size_t i = 0; l && i < vt_labels_count(l); i++) {
        if (i) fputc(',', f);
        vh_json_string(f, vt_label_of(l, (uint32_t)i));
    }
    fputc(']', f);
}

/* What the page's names are remade from (vh_names' name_of): frame fi of
 * the dump's table (SRC_SITE clear), or part k of call site i's label
 * (SRC_SITE | i << 16 | k); sites is set once the call sites are
 * labelled. */
#define SRC_SITE (1ull << 63)
struct name_source {
    const struct vm_dump *d;
    const struct vt_labels *sites;
};

/* Frame fi's text on the page, the name the names table gives it. */
static void frame_where(const struct vm_dump *d, size_t fi, char where[MAXLABEL]) {
    const struct vt_frame *fp = &d->frames[fi];
    char raw[MAXLABEL];
    vr_safe(vt_frame_where(fp, raw, sizeof raw), where, MAXLABEL);
    /* As the text report marks it (common/summary.c). */
    if (fp->inlined) strncat(where, " (inlined)", MAXLABEL - strlen(where) - 1);
}

/* Frame fi's key among the page's frames: '1' for a library's frame, else
 * '0', then its text (frame_where). Its length. */
static size_t frame_key(const struct vm_dump *d, size_t fi, char key[MAXLABEL + 1]) {
    key[0] = frame_is_library(&d->frames[fi]) ? '1' : '0';
    frame_where(d, fi, key + 1);
    return strlen(key);
}

/* The page frame's key of frame ref (vr_remake_fn). */
static size_t remake_frame_key(void *ctx, uint64_t ref, char *buf, size_t size) {
    const struct name_source *n = ctx;
    char key[MAXLABEL + 1];
    if (ref >= n->d->nframes) return SIZE_MAX;
    size_t len = frame_key(n->d, (size_t)ref, key);
    return len < size ? (size_t)snprintf(buf, size, "%s", key) : SIZE_MAX;
}

/* A name of the names table remade from its source (vr_remake_fn). */
static size_t remake_name(void *ctx, uint64_t src, char *buf, size_t size) {
    const struct name_source *n = ctx;
    char where[MAXLABEL];
    if (!(src & SRC_SITE)) {
        if (src >= n->d->nframes) return SIZE_MAX;
        frame_where(n->d, (size_t)src, where);
        size_t len = strlen(where);
        return len < size ? (size_t)snprintf(buf, size, "%s", where) : SIZE_MAX;
    }
    const char *q = n->sites ? vt_label_of(n->sites, (uint32_t)((src & ~SRC_SITE) >> 16)) : NULL;
    for (uint64_t k = src & 0xffff; q && k > 0; k--)
        if ((q = strstr(q, " -> "))) q += 4;
    if (!q) return SIZE_MAX;
    const char *end = strstr(q, " -> ");
    size_t len = end ? (size_t)(end - q) : strlen(q);
    if (len >= size) return SIZE_MAX;
    memcpy(buf, q, len);
    buf[len] = 0;
    return len;
}

/* ",\"sp\":PACKED": per call site, how many parts its label has (split
 * at " -> ") and their entries in the names table. */
static int put_sites(FILE *f, const struct vt_labels *sites, struct vh_names *names) {
    struct vh_pack p;
    vh_pack_init(&p, 'u');
    int ok = 1;
    for (size_t i = 0; ok && i < vt_labels_count(sites); i++) {
        const char *label = vt_label_of(sites, (uint32_t)i);
        size_t len = strlen(label), nparts = 1;
        for (const char *q = label; (q = strstr(q, " -> ")); q += 4) nparts++;
        vh_pack(&p, (int64_t)nparts);
        char *part = malloc(len + 1);
        if (!part) { ok = 0; break; }
        /* Part j of a label of MAXLABEL bytes: j is below 2^16. */
        uint64_t j = 0;
        for (const char *q = label;; j++) {
            const char *end = strstr(q, " -> ");
            size_t k = end ? (size_t)(end - q) : strlen(q);
            memcpy(part, q, k);
            part[k] = 0;
            long e = vh_names_add(names, part, 0, SRC_SITE | (uint64_t)i << 16 | j);
            if (e < 0) { ok = 0; break; }
            vh_pack(&p, e);
            if (!end) break;
            q = end + 4;
        }
        free(part);
    }
    if (ok) vh_pack_write(f, "sp", &p);
    else free(p.bytes);
    return ok ? 0 : -1;
}

/* Frames, the stack tree and each stack's call site. Returns each stack's
 * call-site group in *site_of (nstacks entries) and the groups in *sites. */
static int stacks(FILE *f, const struct vm_dump *d, uint32_t **site_of, struct vt_labels **sites) {
    size_t total = 0, deepest = 0;
    for (size_t i = 0; i < d->nstacks; i++) {
        total += d->stacks[i].nframes;
        if (d->stacks[i].nframes > deepest) deepest = d->stacks[i].nframes;
    }
    /* Each node of the page's tree ends the path of one of the dump's own nodes at least. */
    if (total > d->nnodes) total = d->nnodes;
    /* The page's frames by their key (frame_key), and the names, keep no
     * copy of a frame's text: both remake it from the dump's frame
     * (refset.h). Copies of each distinct frame's text in four tables took
     * 113 MB of the 174 MB that a page of 60,000 Python functions with
     * 300-character names and paths (a dump of 47 MB) needed. */
    struct name_source src = {d, NULL};
    struct vr_refset frames;
    vr_refset_init(&frames, remake_frame_key, &src, MAXLABEL);
    struct vh_names names;
    vh_names_init(&names, remake_name, &src);
    struct tree t = {0};
    /* At most three quarters full (a table kept half full was 34 MB of
     * a page's 170 MB for 2,350,000 nodes), and no bigger: a power of two
     * was up to half as big again. */
    t.cap = total + total / 3 + 16;
    t.slot = calloc(t.cap, sizeof *t.slot);
    uint32_t *node_of = NULL;
    uint8_t *lib = malloc(d->nframes + 1);
    *site_of = NULL;
    *sites = NULL;
    /* Each of the dump's frames labelled, and each of its nodes given its
     * node of the page's tree, once: the stacks share them (walking every
     * frame of every stack, 100,000 stacks 240 deep took 24 s). A stack's
     * path is resolved from its innermost node up to the first node done,
     * then down, outermost first, so that frames and nodes are numbered in
     * the order a walk of every frame met them first. */
    uint32_t *fr_of = malloc((d->nframes + 1) * sizeof *fr_of);
    uint32_t *page_of = malloc((d->nnodes + 1) * sizeof *page_of);
    uint32_t *path = malloc((deepest + 1) * sizeof *path); /* one stack's nodes not done yet */
    t.nodes = d->nodes;
    t.page_of = page_of;
    t.fr_of = fr_of;
    int ok = t.slot && lib && fr_of && page_of && path;
    for (size_t i = 0; ok && i < d->nframes; i++) fr_of[i] = UINT32_MAX;
    for (size_t i = 0; ok && i < d->nnodes; i++) page_of[i] = UINT32_MAX;
    size_t nframes = 0;
    for (size_t i = 0; ok && i < d->nstacks; i++) {
        const struct vm_stack *s = &d->stacks[i];
        size_t np = 0;
        uint32_t n = s->nframes ? s->node : VM_NO_NODE;
        for (uint32_t k = 0; k < s->nframes && page_of[n] == UINT32_MAX; k++, n = d->nodes[n].parent) path[np++] = n;
        uint32_t at = np < s->nframes ? page_of[n] : UINT32_MAX; /* the first node done, or the root */
        while (np > 0 && ok) {
            uint32_t m = path[--np], fi = d->nodes[m].frame;
            if (fr_of[fi] == UINT32_MAX) {
                char key[MAXLABEL + 1];
                int added = 0;
                uint32_t fr = vr_refset_add(&frames, key, frame_key(d, fi, key), fi, &added);
                if (fr == UINT32_MAX) { ok = 0; break; }
                if (added) {
                    lib[nframes++] = (uint8_t)(key[0] == '1');
                    if (vh_names_add(&names, key + 1, 1, fi) < 0) { ok = 0; break; }
                }
                fr_of[fi] = fr;
            }
            at = page_of[m] = tree_node(&t, m, at);
        }
    }
    /* The tree is written, and what only it needed freed, before the
     * stacks' call sites are labelled: they are not needed while it is
     * built. */
    free(t.slot); free(path);
    t.slot = NULL; path = NULL;
    t.rep = ok ? malloc((t.n + 1) * sizeof *t.rep) : NULL;
    node_of = ok ? malloc((d->nstacks + 1) * sizeof *node_of) : NULL;
    if (!t.rep || !node_of) ok = 0;
    for (size_t m = 0; ok && m < d->nnodes; m++)
        if (page_of[m] != UINT32_MAX) t.rep[page_of[m]] = (uint32_t)m;
    if (ok) {
        for (size_t i = 0; i < d->nstacks; i++) node_of[i] = d->stacks[i].nframes ? page_of[d->stacks[i].node] : UINT32_MAX;
        /* The names table's first entries are the frames, in order; then
         * the parts of call-site labels that are no frame's name. */
        struct vh_pack np;
        vh_pack_init(&np, 'u');
        for (uint32_t i = 0; i < t.n; i++) {
            uint32_t parent = tree_parent(&t, i);
            vh_pack(&np, parent == UINT32_MAX ? 0 : (int64_t)(i - parent));
        }
        vh_pack_write(f, "np", &np);
        vh_pack_init(&np, 'u');
        for (uint32_t i = 0; i < t.n; i++) vh_pack(&np, tree_frame(&t, i));
        vh_pack_write(f, "nf", &np);
        put_u32s(f, "sn", node_of, d->nstacks, 's');
    }
    free(t.rep); free(fr_of); free(page_of); free(node_of);
    t.rep = fr_of = page_of = node_of = NULL;
    if (ok) {
        *site_of = malloc((d->nstacks + 1) * sizeof **site_of);
        *sites = vt_labels_new();
        ok = *site_of && *sites;
        src.sites = *sites;
    }
    for (size_t i = 0; ok && i < d->nstacks; i++) {
        char where[MAXLABEL];
        (*site_of)[i] = vt_label_group(*sites, vm_site_label(d, i, where, sizeof where), NULL);
        if ((*site_of)[i] == UINT32_MAX) ok = 0;
    }
    if (ok) {
        put_u32s(f, "so", *site_of, d->nstacks, 'u');
        ok = put_sites(f, *sites, &names) == 0;
        /* Each frame's library flag, one character a frame. */
        fputs(",\"lib\":\"", f);
        for (size_t i = 0; i < nframes; i++) fputc('0' + lib[i], f);
        fputc('"', f);
        vh_names_write(f, &names);
    }
    vr_refset_free(&frames);
    vh_names_free(&names);
    free(lib);
    return ok ? 0 : -1;
}

static uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) { uint64_t r = a % b; a = b; b = r; }
    return a;
}

struct rank { uint32_t site; uint64_t peak; };

static int by_peak(const void *a, const void *b) {
    const struct rank *x = a, *y = b;
    return x->peak != y->peak ? (x->peak < y->peak ? 1 : -1) : (x->site > y->site) - (x->site < y->site);
}

/* The timeline's series: the `want` call sites whose live bytes rose
 * highest over the history, largest first, then "other" for the rest.
 * Returns each site's series in *series_of. */
static int series(FILE *f, const struct vm_dump *d, const uint32_t *site_of, const struct vt_labels *sites,
                  int want, uint32_t **series_of, uint32_t *other) {
    size_t ns = vt_labels_count(sites);
    int64_t *live = calloc(ns + 1, sizeof *live);
    struct rank *r = calloc(ns + 1, sizeof *r);
    *series_of = malloc((ns + 1) * sizeof **series_of);
    if (!live || !r || !*series_of) { free(live); free(r); return -1; }
    for (size_t i = 0; i < ns; i++) r[i].site = (uint32_t)i;
    struct vm_ev_cursor c;
    struct vm_event e;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, &e);) {
        if (e.type == 'o' || e.stack >= d->nstacks) continue;
        uint32_t s = site_of[e.stack];
        live[s] += e.type == 'a' ? (int64_t)e.bytes : -(int64_t)e.bytes;
        if (live[s] > 0 && (uint64_t)live[s] > r[s].peak) r[s].peak = (uint64_t)live[s];
    }
    qsort(r, ns, sizeof *r, by_peak);
    size_t n = 0;
    for (; n < ns && n < (size_t)want && r[n].peak > 0; n++) {}
    *other = (uint32_t)n;
    for (size_t i = 0; i < ns; i++) (*series_of)[r[i].site] = i < n ? (uint32_t)i : (uint32_t)n;
    fputs(",\"series\":[", f);
    for (size_t i = 0; i < n; i++) fprintf(f, i ? ",%u" : "%u", r[i].site);
    fputc(']', f);
    free(live);
    free(r);
    return 0;
}


/* One device ordinal's events as the page writes them, made in one pass
 * over the events for every listed device at once: the arrays are the
 * page's own size, where a list of each device's events (8 bytes an event)
 * took more than the packed events themselves. */
struct dev_out {
    struct vh_pack dt, b, s;   /* s: the series, one value (< 64) an event */
    uint64_t *oom;             /* (place among the device's events, time, bytes) each */
    size_t noom, oom_cap;
    uint64_t last;             /* the latest time so far */
    size_t seen;               /* events other than OOMs so far */
    /* Its place among the step boundaries as runs: each a count of steps
     * passed since the run before and the events seen since it, as two
     * varints (pack.c's 'u'); made when the device has an event, so that
     * every device's places take one pass over the events, not one each
     * (4,096 devices over 400,000 events and 64 steps: 9 s). */
    struct vh_pack runs;
    size_t run_step, run_seen; /* where the last run ended */
    int failed;
};

/* A run up to step k (the steps before it all passed, not yet in a run)
 * at the events seen so far. */
static void dev_run(struct dev_out *o, size_t k) {
    if (k == o->run_step) return;
    vh_pack(&o->runs, (int64_t)(k - o->run_step));
    vh_pack(&o->runs, (int64_t)(o->seen - o->run_seen));
    o->run_step = k;
    o->run_seen = o->seen;
}

/* ",\"steps_at\":[...]": each step boundary's place among this device's
 * events (how many of them came before it), -1 where the ring overwrote
 * it; o NULL for a listed device no event can name (its ordinal out of
 * range: every place is 0). The boundaries' event indices never go back
 * (cli/model_steps.h). */
static void steps_at(FILE *f, const struct vm_dump *d, const struct dev_out *o) {
    fputs(",\"steps_at\":[", f);
    const uint8_t *p = o && !o->runs.failed ? o->runs.bytes : NULL, *end = p ? p + o->runs.n : NULL;
    uint64_t left = 0, seen = 0;
    for (size_t k = 0; k < d->nsteps; k++) {
        /* The runs are read as the steps go: a step in none is after the
         * device's last event, at its count of events. */
        while (!left && p && p < end) {
            uint64_t dv;
            p = vm_varint_get(vm_varint_get(p, &left), &dv);
            seen += dv;
        }
        uint64_t at = left ? seen : o ? o->seen : 0;
        if (left) left--;
        fprintf(f, k ? ",%lld" : "%lld", d->steps[k].event < 0 ? -1LL : (long long)at);
    }
    fputc(']', f);
}

static void dev_oom(struct dev_out *o, uint64_t a, uint64_t b, uint64_t c) {
    if (o->failed) return;
    if (o->noom + 3 > o->oom_cap) {
        size_t cap = o->oom_cap ? 2 * o->oom_cap : 48;
        uint64_t *v = realloc(o->oom, cap * sizeof *v);
        if (!v) { o->failed = 1; return; }
        o->oom = v;
        o->oom_cap = cap;
    }
    o->oom[o->noom++] = a;
    o->oom[o->noom++] = b;
    o->oom[o->noom++] = c;
}

/* Each device's facts and its events, with the bytes live before the
 * recorded history began (the ring may have dropped older events) as
 * `base`, so that the history ends at the device's live bytes. */
static void devices(FILE *f, const struct vm_dump *d, const uint32_t *site_of, const uint32_t *series_of,
                    uint32_t other) {
    /* Per device ordinal (-1 to 4095): its events' count, size unit and
     * net bytes in one pass; then every listed ordinal's arrays in a
     * second (a pass over every event per device took seconds for a dump
     * listing thousands of devices). */
    enum { NORD = 4097 };
    struct tally { uint64_t unit; int64_t delta; size_t n; int32_t out; } *t = calloc(NORD, sizeof *t);
    struct dev_out *out = calloc(d->ndevices + 1, sizeof *out);
    if (!t || !out) {
        free(t);
        free(out);
        fputs(",\"devices\":[]", f);
        return;
    }
    struct vm_ev_cursor c;
    struct vm_event e;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, &e);) {
        if (e.type == 'o' || e.device < -1 || e.device >= NORD - 1) continue;
        struct tally *x = &t[e.device + 1];
        x->unit = gcd(x->unit, e.bytes);
        x->delta += e.type == 'a' ? (int64_t)e.bytes : -(int64_t)e.bytes;
        x->n++;
    }
    /* The listed ordinals, each with its arrays (a dump listing one
     * ordinal twice writes the same arrays twice). */
    size_t nout = 0;
    for (size_t di = 0; di < d->ndevices; di++) {
        int o = d->devices[di].ordinal;
        if (o < -1 || o >= NORD - 1 || t[o + 1].out) continue;
        t[o + 1].out = (int32_t)++nout;
        struct dev_out *w = &out[nout - 1];
        vh_pack_init(&w->dt, 'u');
        vh_pack_init(&w->b, 's');
        vh_pack_init(&w->s, 'u');
        vh_pack_init(&w->runs, 'u');
        if (!t[o + 1].unit) t[o + 1].unit = 1;
    }
    size_t step = 0; /* the steps passed: their boundary is at or before this event */
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, &e);) {
        while (step < d->nsteps && d->steps[step].event < (int64_t)c.i) step++;
        if (e.device < -1 || e.device >= NORD - 1 || !t[e.device + 1].out) continue;
        struct dev_out *w = &out[t[e.device + 1].out - 1];
        if (e.type == 'o') {
            dev_oom(w, w->seen, e.time_ns, e.bytes);
            continue;
        }
        dev_run(w, step);
        w->seen++;
        vh_pack(&w->dt, (int64_t)(e.time_ns >= w->last ? e.time_ns - w->last : 0));
        if (e.time_ns > w->last) w->last = e.time_ns;
        uint64_t unit = t[e.device + 1].unit;
        vh_pack(&w->b, e.type == 'f' ? -(int64_t)(e.bytes / unit) : (int64_t)(e.bytes / unit));
        vh_pack(&w->s, e.stack < d->nstacks ? series_of[site_of[e.stack]] : other);
    }
    fputs(",\"devices\":[", f);
    for (size_t di = 0; di < d->ndevices; di++) {
        const struct vm_device *v = &d->devices[di];
        int ok_ord = v->ordinal >= -1 && v->ordinal < NORD - 1;
        const struct tally *x = ok_ord ? &t[v->ordinal + 1] : NULL;
        struct dev_out *w = x ? &out[x->out - 1] : NULL;
        int64_t before = (int64_t)v->live_bytes - (x ? x->delta : 0);
        fprintf(f, "%s{\"ordinal\":%d,\"name\":", di ? "," : "", v->ordinal);
        vh_json_string(f, v->name ? v->name : "?");
        fprintf(f, ",\"total\":%" PRIu64 ",\"live\":%" PRIu64 ",\"peak\":%" PRIu64 ",\"peak_t\":%" PRIu64
                   ",\"base\":%" PRId64 ",\"unit\":%" PRIu64 ",\"n\":%zu",
                v->total_bytes, v->live_bytes, v->peak_bytes, v->peak_time_ns, before > 0 ? before : 0,
                x ? x->unit : 1, x ? x->n : 0);
        struct vh_pack none;
        vh_pack_init(&none, 'u');
        vh_pack_print(f, "dt", w ? &w->dt : &none);
        vh_pack_init(&none, 's');
        vh_pack_print(f, "b", w ? &w->b : &none);
        /* The series, one character an event: 0-9, a-z, A-Z. */
        fputs(",\"s\":\"", f);
        for (size_t j = 0; w && !w->s.failed && j < w->s.n; j++) fputc(SERIES_DIGITS[w->s.bytes[j]], f);
        fputc('"', f);
        /* OOMs: the failure's place among this device's events, and time. */
        fputs(",\"oom_at\":[", f);
        for (size_t j = 0; w && !w->failed && j < w->noom; j += 3)
            fprintf(f, j ? ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 : "%" PRIu64 ",%" PRIu64 ",%" PRIu64, w->oom[j],
                    w->oom[j + 1], w->oom[j + 2]);
        fputc(']', f);
        steps_at(f, d, w);
        fputc('}', f);
    }
    fputc(']', f);
    for (size_t k = 0; k < nout; k++) {
        VT_FREE_ALL(out[k].dt.bytes, out[k].b.bytes, out[k].s.bytes, out[k].runs.bytes, out[k].oom);
    }
    free(out);
    free(t);
}

/* A holder list in the one order of the formats (vr_holders_ranked), the
 * text's holders table's, for the holders table, the flame graph and the
 * split by device alike: a copy in *own (for the caller to free), or h
 * itself where memory ran out. The stacks' call sites are the page's
 * (stacks()'s) where it has them. */
static const struct vm_holder *ranked(const struct vm_dump *d, const struct vm_holder *h, size_t n,
                                      struct vr_sites *sites, struct vm_holder **own) {
    size_t k, left;
    *own = sites ? vr_holders_ranked_by_site(d, h, n, sites) : vr_holders_ranked(d, h, n, 0, &k, &left);
    return *own ? *own : h;
}

static void holders(FILE *f, const char *name, const struct vm_holder *h, size_t n, int have) {
    fprintf(f, ",\"%s\":", name);
    if (!have) { fputs("null", f); return; }
    struct vh_pack p;
    vh_pack_init(&p, 'u');
    for (size_t i = 0; i < n; i++) {
        vh_pack(&p, (int64_t)h[i].stack);
        vh_pack(&p, (int64_t)h[i].bytes);
        vh_pack(&p, (int64_t)h[i].count);
    }
    vh_pack_write(f, NULL, &p);
}

static void live(FILE *f, const struct vm_dump *d) {
    struct vt_labels *kinds = vt_labels_new(), *apis = vt_labels_new(), *threads = vt_labels_new();
    struct vh_pack p;
    /* The first member written without its comma, then the others. */
    fputs(",\"live\":{\"b\":", f);
    vh_pack_init(&p, 'u');
    for (size_t i = 0; i < d->nlive; i++) vh_pack(&p, (int64_t)d->live[i].bytes);
    vh_pack_write(f, NULL, &p);
    for (size_t i = 0; i < d->nlive; i++)
        vh_pack(&p, vt_label_group(kinds, vm_alloc_kind(d, &d->live[i]), NULL));
    vh_pack_write(f, "k", &p);
    for (size_t i = 0; i < d->nlive; i++)
        vh_pack(&p, vt_label_group(apis, vm_alloc_api(d, &d->live[i]), NULL));
    vh_pack_write(f, "a", &p);
    vh_pack_init(&p, 's');
    for (size_t i = 0; i < d->nlive; i++) vh_pack(&p, d->live[i].device);
    vh_pack_write(f, "d", &p);
    /* Addresses as differences: the script adds them up in doubles, exact
     * below 2^53 (every x86-64 and GPU virtual address). */
    vh_pack_init(&p, 'd');
    for (size_t i = 0; i < d->nlive; i++) vh_pack(&p, (int64_t)d->live[i].address);
    vh_pack_write(f, "x", &p);
    vh_pack_init(&p, 'u');
    for (size_t i = 0; i < d->nlive; i++) vh_pack(&p, (int64_t)d->live[i].time_ns);
    vh_pack_write(f, "t", &p);
    for (size_t i = 0; i < d->nlive; i++) {
        char th[24];
        snprintf(th, sizeof th, "%d", d->live[i].thread);
        vh_pack(&p, vt_label_group(threads, th, NULL));
    }
    vh_pack_write(f, "th", &p);
    vh_pack_init(&p, 's');
    for (size_t i = 0; i < d->nlive; i++) vh_pack(&p, (int64_t)d->live[i].stack);
    vh_pack_write(f, "s", &p);
    put_labels(f, "kinds", kinds);
    put_labels(f, "apis", apis);
    put_labels(f, "threads", threads);
    fputc('}', f);
    vt_labels_free(kinds);
    vt_labels_free(apis);
    vt_labels_free(threads);
}

void vh_data(FILE *f, const struct vm_dump *d, size_t index, const struct vr_opts *o, int want) {
    fprintf(f, "<script type=\"application/json\" id=\"vt-data-%zu\">{\"rank\":%d,\"pid\":%d,\"time\":%" PRIu64
               ",\"at\":\"%s\",\"dropped\":%" PRIu64, index, d->rank, d->pid, d->time_ns, vr_moment_name(o->at),
            d->events_dropped);
    uint32_t *site_of = NULL, *series_of = NULL, other = 0;
    struct vt_labels *sites = NULL;
    int have_sites = stacks(f, d, &site_of, &sites) == 0;
    if (have_sites && series(f, d, site_of, sites, want, &series_of, &other) == 0)
        devices(f, d, site_of, series_of, other);
    struct vr_sites by_site = {site_of, sites, NULL}, *ranks_by = have_sites ? &by_site : NULL; /* for ranked() */
    /* Each moment's holders over all devices, then split by device. */
    int *dev = vh_stack_devices(d);
    struct vh_replay r;
    if (vh_replay_init(&r, d, dev) != 0) {
        free(dev);
        dev = NULL; /* each split written as not known */
        vh_replay_init(&r, d, NULL);
    }
    size_t *before_oom = vh_events_before_ooms(d);
    int have_peak = d->npeak_holders > 0 || d->totals.peak_bytes == 0;
    /* The exit, the peak, then the OOMs in turn: the replay goes through
     * the history three times at most, not once per OOM. */
    struct vm_holder *own;
    const struct vm_holder *h = ranked(d, d->holders, d->nholders, ranks_by, &own);
    holders(f, "exit", h, d->nholders, 1);
    vh_holders_by_device(f, "exit", &r, dev, h, d->nholders, 1, d->events_dropped ? SIZE_MAX : d->nevents);
    free(own);
    /* The peak is the process's (every device's bytes together): when it
     * was, for the flame graph's name of it. */
    fprintf(f, ",\"peak_at\":%" PRIu64, d->totals.peak_time_ns);
    h = ranked(d, d->peak_holders, d->npeak_holders, ranks_by, &own);
    holders(f, "peak", h, d->npeak_holders, have_peak);
    vh_holders_by_device(f, "peak", &r, dev, h, d->npeak_holders, have_peak, vh_events_before_peak(d));
    free(own);
    fputs(",\"ooms\":[", f);
    for (size_t i = 0; i < d->nooms; i++) {
        const struct vm_oom *x = &d->ooms[i];
        fprintf(f, "%s{\"device\":%d,\"t\":%" PRIu64 ",\"requested\":%" PRIu64 ",\"stack\":%zu", i ? "," : "",
                x->device, x->time_ns, x->requested, x->stack);
        /* A request for host memory is named as the text names it, not
         * by its device (-1, none). */
        const char *host = vt_host_memory_label(x->kind);
        if (host) fprintf(f, ",\"host\":\"%s\"", host);
        h = ranked(d, x->holders, x->nholders, ranks_by, &own);
        holders(f, "holders", h, x->nholders, x->have_holders);
        vh_holders_by_device(f, "holders", &r, dev, h, x->nholders, x->have_holders,
                             before_oom ? before_oom[i] : SIZE_MAX);
        free(own);
        /* The failing device's own, where the dump kept them apart (the
         * rule of vr_holders_device): the holders table and the flame
         * graph of that device show these, as the text report does. */
        if (x->have_holders && x->have_device_holders && x->device >= 0) {
            h = ranked(d, x->device_holders, x->ndevice_holders, ranks_by, &own);
            holders(f, "device_holders", h, x->ndevice_holders, 1);
            free(own);
        }
        vh_torch_data(f, "torch", x->torch);
        fputc('}', f);
    }
    fputc(']', f);
    free(before_oom);
    vh_replay_free(&r);
    free(dev);
    live(f, d);
    fputs(",\"tcats\":[", f);
    for (int k = 0; k < VM_TORCH_NCAT; k++) fprintf(f, k ? ",\"%s\"" : "\"%s\"", vm_torch_categories[k]);
    fputc(']', f);
    vh_torch_data(f, "torch", d->torch);
    fprintf(f, ",\"steps_total\":%" PRIu64 ",\"steps\":[", d->steps_total);
    for (size_t k = 0; k < d->nsteps; k++) fprintf(f, k ? ",%" PRIu64 : "%" PRIu64, d->steps[k].step);
    fputs("],\"steps_t\":[", f);
    for (size_t k = 0; k < d->nsteps; k++) fprintf(f, k ? ",%" PRIu64 : "%" PRIu64, d->steps[k].time_ns);
    fputs("]}</script>\n", f);
    vr_sites_free(&by_site);
    free(site_of);
    free(series_of);
    vt_labels_free(sites);
}
