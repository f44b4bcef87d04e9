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
#include "../../common/labels.h"
#include "../model_torch.h"
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

/* The tree of stacks: node (parent, frame) -> node id, by open addressing. */
struct tree {
    uint64_t *keys;     /* (parent + 1) << 32 | frame, plus 1; 0 is empty */
    uint32_t *ids;
    size_t cap, n;
    uint32_t *parent, *frame;
};

static uint32_t tree_node(struct tree *t, uint32_t parent, uint32_t frame) {
    uint64_t key = ((((uint64_t)parent + 1) << 32) | frame) + 1;
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (t->cap - 1);
    for (; t->keys[i]; i = (i + 1) & (t->cap - 1))
        if (t->keys[i] == key) return t->ids[i];
    t->keys[i] = key;
    t->ids[i] = (uint32_t)t->n;
    t->parent[t->n] = parent;
    t->frame[t->n] = frame;
    return (uint32_t)t->n++;
}

static void put_u32s(FILE *f, const char *name, const uint32_t *v, size_t n) {
    fprintf(f, ",\"%s\":[", name);
    for (size_t i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", v[i] == UINT32_MAX ? -1 : (int)v[i]);
    fputc(']', f);
}

static void put_labels(FILE *f, const char *name, const struct vt_labels *l) {
    fprintf(f, ",\"%s\":[", name);
    for (size_t i = 0; l && i < vt_labels_count(l); i++) {
        if (i) fputc(',', f);
        vh_json_string(f, vt_label_of(l, (uint32_t)i));
    }
    fputc(']', f);
}

/* Frames, the stack tree and each stack's call site. Returns each stack's
 * call-site group in *site_of (nstacks entries) and the groups in *sites. */
static int stacks(FILE *f, const struct vm_dump *d, uint32_t **site_of, struct vt_labels **sites) {
    size_t total = 0;
    for (size_t i = 0; i < d->nstacks; i++) total += d->stacks[i].nframes;
    struct vt_labels *frames = vt_labels_new();
    struct tree t = {0};
    for (t.cap = 16; t.cap < 2 * total + 2; t.cap *= 2) {}
    t.keys = calloc(t.cap, sizeof *t.keys);
    t.ids = malloc(t.cap * sizeof *t.ids);
    t.parent = malloc((total + 1) * sizeof *t.parent);
    t.frame = malloc((total + 1) * sizeof *t.frame);
    uint32_t *node_of = malloc((d->nstacks + 1) * sizeof *node_of);
    uint8_t *lib = malloc(total + 1);
    *site_of = malloc((d->nstacks + 1) * sizeof **site_of);
    *sites = vt_labels_new();
    int ok = frames && t.keys && t.ids && t.parent && t.frame && node_of && lib && *site_of && *sites;
    size_t nframes = 0;
    for (size_t i = 0; ok && i < d->nstacks; i++) {
        const struct vm_stack *s = &d->stacks[i];
        uint32_t at = UINT32_MAX;
        for (size_t k = s->nframes; k-- > 0 && ok;) {
            char raw[MAXLABEL], where[MAXLABEL], key[MAXLABEL + 1];
            vr_safe(vt_frame_where(s->frames[k], raw, sizeof raw), where, sizeof where);
            int l = frame_is_library(s->frames[k]), added = 0;
            snprintf(key, sizeof key, "%c%s", l ? '1' : '0', where);
            uint32_t fr = vt_label_group(frames, key, &added);
            if (fr == UINT32_MAX) { ok = 0; break; }
            if (added) lib[nframes++] = (uint8_t)l;
            at = tree_node(&t, at, fr);
        }
        node_of[i] = at;
        char where[MAXLABEL];
        (*site_of)[i] = vt_label_group(*sites, vm_site_label(d, i, where, sizeof where), NULL);
        if ((*site_of)[i] == UINT32_MAX) ok = 0;
    }
    if (ok) {
        /* Each frame's key is its library flag and its name. */
        fputs(",\"fw\":[", f);
        for (size_t i = 0; i < nframes; i++) {
            if (i) fputc(',', f);
            vh_json_string(f, vt_label_of(frames, (uint32_t)i) + 1);
        }
        fputs("],\"lib\":[", f);
        for (size_t i = 0; i < nframes; i++) fprintf(f, i ? ",%d" : "%d", lib[i]);
        fputc(']', f);
        /* A node's parent as the distance back to it (0: none), mostly 1. */
        fputs(",\"np\":[", f);
        for (size_t i = 0; i < t.n; i++)
            fprintf(f, i ? ",%zu" : "%zu", t.parent[i] == UINT32_MAX ? 0 : i - t.parent[i]);
        fputc(']', f);
        put_u32s(f, "nf", t.frame, t.n);
        put_u32s(f, "sn", node_of, d->nstacks);
        put_u32s(f, "so", *site_of, d->nstacks);
        put_labels(f, "sites", *sites);
    }
    vt_labels_free(frames);
    free(t.keys); free(t.ids); free(t.parent); free(t.frame); free(node_of); free(lib);
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
    for (size_t i = 0; i < d->nevents; i++) {
        const struct vm_event *e = &d->events[i];
        if (e->type == 'o' || e->stack >= d->nstacks) continue;
        uint32_t s = site_of[e->stack];
        live[s] += e->type == 'a' ? (int64_t)e->bytes : -(int64_t)e->bytes;
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

/* ",\"steps_at\":[...]": each step boundary's place among this device's
 * events (how many of them came before it), -1 where the ring overwrote
 * it. The boundaries' event indices never go back (cli/model_steps.h). */
static void steps_at(FILE *f, const struct vm_dump *d, int device) {
    fputs(",\"steps_at\":[", f);
    size_t i = 0, seen = 0;
    for (size_t k = 0; k < d->nsteps; k++) {
        int64_t at = d->steps[k].event;
        for (; at >= 0 && i < (size_t)at && i < d->nevents; i++)
            if (d->events[i].device == device && d->events[i].type != 'o') seen++;
        fprintf(f, k ? ",%lld" : "%lld", at < 0 ? -1LL : (long long)seen);
    }
    fputc(']', f);
}

/* Each device's facts and its events, with the bytes live before the
 * recorded history began (the ring may have dropped older events) as
 * `base`, so that the history ends at the device's live bytes. */
static void devices(FILE *f, const struct vm_dump *d, const uint32_t *site_of, const uint32_t *series_of,
                    uint32_t other) {
    fputs(",\"devices\":[", f);
    for (size_t di = 0; di < d->ndevices; di++) {
        const struct vm_device *v = &d->devices[di];
        uint64_t unit = 0;
        int64_t delta = 0;
        size_t n = 0;
        for (size_t i = 0; i < d->nevents; i++) {
            const struct vm_event *e = &d->events[i];
            if (e->device != v->ordinal || e->type == 'o') continue;
            unit = gcd(unit, e->bytes);
            delta += e->type == 'a' ? (int64_t)e->bytes : -(int64_t)e->bytes;
            n++;
        }
        if (!unit) unit = 1;
        int64_t before = (int64_t)v->live_bytes - delta;
        fprintf(f, "%s{\"ordinal\":%d,\"name\":", di ? "," : "", v->ordinal);
        vh_json_string(f, v->name ? v->name : "?");
        fprintf(f, ",\"total\":%" PRIu64 ",\"live\":%" PRIu64 ",\"peak\":%" PRIu64 ",\"peak_t\":%" PRIu64
                   ",\"base\":%" PRId64 ",\"unit\":%" PRIu64 ",\"n\":%zu,\"dt\":[",
                v->total_bytes, v->live_bytes, v->peak_bytes, v->peak_time_ns, before > 0 ? before : 0, unit, n);
        uint64_t last = 0;
        size_t k = 0;
        for (size_t i = 0; i < d->nevents; i++) {
            const struct vm_event *e = &d->events[i];
            if (e->device != v->ordinal || e->type == 'o') continue;
            fprintf(f, k++ ? ",%" PRIu64 : "%" PRIu64, e->time_ns >= last ? e->time_ns - last : 0);
            if (e->time_ns > last) last = e->time_ns;
        }
        fputs("],\"b\":[", f);
        k = 0;
        for (size_t i = 0; i < d->nevents; i++) {
            const struct vm_event *e = &d->events[i];
            if (e->device != v->ordinal || e->type == 'o') continue;
            fprintf(f, "%s%s%" PRIu64, k++ ? "," : "", e->type == 'f' ? "-" : "", e->bytes / unit);
        }
        /* The series, one character an event: 0-9, a-z, A-Z. */
        fputs("],\"s\":\"", f);
        for (size_t i = 0; i < d->nevents; i++) {
            const struct vm_event *e = &d->events[i];
            if (e->device != v->ordinal || e->type == 'o') continue;
            uint32_t s = e->stack < d->nstacks ? series_of[site_of[e->stack]] : other;
            fputc(SERIES_DIGITS[s], f);
        }
        fputc('"', f);
        /* OOMs: the failure's place among this device's events, and time. */
        fputs(",\"oom_at\":[", f);
        k = 0;
        size_t seen = 0;
        for (size_t i = 0; i < d->nevents; i++) {
            const struct vm_event *e = &d->events[i];
            if (e->device != v->ordinal) continue;
            if (e->type != 'o') seen++;
            else fprintf(f, k++ ? ",%zu,%" PRIu64 ",%" PRIu64 : "%zu,%" PRIu64 ",%" PRIu64, seen, e->time_ns, e->bytes);
        }
        fputc(']', f);
        steps_at(f, d, v->ordinal);
        fputc('}', f);
    }
    fputc(']', f);
}

static void holders(FILE *f, const char *name, const struct vm_holder *h, size_t n, int have) {
    fprintf(f, ",\"%s\":", name);
    if (!have) { fputs("null", f); return; }
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%zu,%" PRIu64 ",%" PRIu64, i ? "," : "", h[i].stack, h[i].bytes, h[i].count);
    fputc(']', f);
}

static void live(FILE *f, const struct vm_dump *d) {
    struct vt_labels *kinds = vt_labels_new(), *apis = vt_labels_new(), *threads = vt_labels_new();
    fputs(",\"live\":{\"b\":[", f);
    for (size_t i = 0; i < d->nlive; i++) fprintf(f, i ? ",%" PRIu64 : "%" PRIu64, d->live[i].bytes);
    fputs("],\"k\":[", f);
    for (size_t i = 0; i < d->nlive; i++)
        fprintf(f, i ? ",%d" : "%d", (int)vt_label_group(kinds, d->live[i].kind ? d->live[i].kind : "?", NULL));
    fputs("],\"a\":[", f);
    for (size_t i = 0; i < d->nlive; i++)
        fprintf(f, i ? ",%d" : "%d", (int)vt_label_group(apis, d->live[i].api ? d->live[i].api : "?", NULL));
    fputs("],\"d\":[", f);
    for (size_t i = 0; i < d->nlive; i++) fprintf(f, i ? ",%d" : "%d", d->live[i].device);
    fputs("],\"x\":[", f);
    for (size_t i = 0; i < d->nlive; i++) fprintf(f, i ? ",\"%" PRIx64 "\"" : "\"%" PRIx64 "\"", d->live[i].address);
    fputs("],\"t\":[", f);
    for (size_t i = 0; i < d->nlive; i++) fprintf(f, i ? ",%" PRIu64 : "%" PRIu64, d->live[i].time_ns);
    fputs("],\"th\":[", f);
    for (size_t i = 0; i < d->nlive; i++) {
        char th[24];
        snprintf(th, sizeof th, "%d", d->live[i].thread);
        fprintf(f, i ? ",%d" : "%d", (int)vt_label_group(threads, th, NULL));
    }
    fputs("],\"s\":[", f);
    for (size_t i = 0; i < d->nlive; i++) fprintf(f, i ? ",%zu" : "%zu", d->live[i].stack);
    fputc(']', f);
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
    if (stacks(f, d, &site_of, &sites) == 0 && series(f, d, site_of, sites, want, &series_of, &other) == 0)
        devices(f, d, site_of, series_of, other);
    /* Each moment's holders over all devices, then split by device. */
    int *dev = vh_stack_devices(d);
    int have_peak = d->npeak_holders > 0 || d->totals.peak_bytes == 0;
    holders(f, "exit", d->holders, d->nholders, 1);
    vh_holders_by_device(f, "exit", d, dev, d->holders, d->nholders, 1, d->events_dropped ? SIZE_MAX : d->nevents);
    holders(f, "peak", d->peak_holders, d->npeak_holders, have_peak);
    vh_holders_by_device(f, "peak", d, dev, d->peak_holders, d->npeak_holders, have_peak, vh_events_before_peak(d));
    fputs(",\"ooms\":[", f);
    for (size_t i = 0; i < d->nooms; i++) {
        const struct vm_oom *x = &d->ooms[i];
        fprintf(f, "%s{\"device\":%d,\"t\":%" PRIu64 ",\"requested\":%" PRIu64 ",\"stack\":%zu", i ? "," : "",
                x->device, x->time_ns, x->requested, x->stack);
        holders(f, "holders", x->holders, x->nholders, x->have_holders);
        vh_holders_by_device(f, "holders", d, dev, x->holders, x->nholders, x->have_holders, vh_events_before_oom(d, i));
        vh_torch_data(f, "torch", x->torch);
        fputc('}', f);
    }
    fputc(']', f);
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
    free(site_of);
    free(series_of);
    vt_labels_free(sites);
}
