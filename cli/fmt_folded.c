/* fmt_folded.c -- folded stacks ("frame;frame;... BYTES", outermost first),
 * the input of flamegraph.pl, inferno and speedscope. Weight: bytes held at
 * the chosen moment (--at). Each line's root is its stack's call-site label
 * (vm_site_label: the user's line, then the library line it went through),
 * so that a flame graph's first level is the holders table by call site,
 * the same bytes per label; with several dumps "rank R pid P" follows it.
 * --folded-root none writes the whole stacks alone, as before labels: then
 * with several dumps each line starts with "rank R pid P". Stacks that read
 * the same (they differ only in addresses) are written as one line. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "reporters.h"

struct line {
    char *text;
    uint64_t bytes;
    size_t order;
    UT_hash_handle hh;
};

/* Append n bytes of text to the line. */
static void append(char **buf, size_t *len, size_t *cap, const char *text, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = (*cap + n + 1) * 2 + 64;
        char *b = realloc(*buf, c);
        if (!b) return;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, text, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* Append text; a frame label (raw == 0) has the format's separator taken
 * out (';' becomes ':') and is written in its display form, so that no
 * name can start a new frame or a new line, or reach a terminal as a
 * control character. A run of printable ASCII other than ';' is copied
 * at once (a character at a time, 318 MB of lines took 4 s). */
static void put(char **buf, size_t *len, size_t *cap, const char *label, int raw) {
    char ch[VR_CHAR_MAX + 1];
    if (!*buf) {
        if (!(*buf = malloc(64))) return;
        *cap = 64;
        *len = 0;
        (*buf)[0] = '\0';
    }
    if (raw) {
        append(buf, len, cap, label, strlen(label));
        return;
    }
    while (*label) {
        size_t run = 0;
        for (unsigned char c; (c = (unsigned char)label[run]) >= 0x20 && c < 0x7f && c != ';';) run++;
        if (run) {
            append(buf, len, cap, label, run);
            label += run;
            continue;
        }
        size_t n = vr_display_char(label, ch);
        if (n == 0) break;
        const char *w = ch[0] == ';' ? ":" : ch;
        append(buf, len, cap, w, strlen(w));
        label += n;
    }
}

static int by_order(const void *a, const void *b) {
    const struct line *x = *(struct line *const *)a, *y = *(struct line *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

int vr_folded(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err, size_t errsize) {
    struct line *lines = NULL, *l, *tmp;
    size_t count = 0;
    int rc = 0;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const struct vm_dump *d = &in->dumps[i];
        size_t n;
        int missing;
        const struct vm_holder *h = vr_holders_at(d, o->at, &n, &missing);
        if (missing) {
            snprintf(err, errsize, "%s has no holders at %s", d->path, vr_moment_name(o->at));
            rc = -1;
            break;
        }
        for (size_t j = 0; j < n; j++) {
            const struct vm_stack *s = &d->stacks[h[j].stack];
            char *buf = NULL, label[2048];
            size_t len = 0, cap = 0;
            if (o->folded_root == VR_ROOT_SITE) {
                put(&buf, &len, &cap, vm_site_label(d, h[j].stack, label, sizeof label), 0);
                put(&buf, &len, &cap, ";", 1);
            }
            if (in->n > 1) {
                snprintf(label, sizeof label, "rank %d pid %d", d->rank, d->pid);
                put(&buf, &len, &cap, label, 0);
                put(&buf, &len, &cap, ";", 1);
            }
            const struct vt_frame *const *fr = vm_stack_frames(d, h[j].stack);
            for (size_t k = s->nframes; k-- > 0;) {
                put(&buf, &len, &cap, vm_frame_label(fr[k], label, sizeof label), 0);
                if (k) put(&buf, &len, &cap, ";", 1);
            }
            if (s->nframes == 0) put(&buf, &len, &cap, "(no stack)", 0);
            if (!buf) continue;
            /* The length once: uthash's macros evaluate their length
             * argument at every use, a key compare in the bucket among
             * them, and a line is the stack's every frame (10,000 stacks
             * of 32 KB lines spent 3 s in strlen). */
            size_t buflen = len;
            HASH_FIND(hh, lines, buf, buflen, l);
            if (l) {
                l->bytes += h[j].bytes;
                free(buf);
                continue;
            }
            l = calloc(1, sizeof *l);
            if (!l) { free(buf); continue; }
            l->text = buf;
            l->bytes = h[j].bytes;
            l->order = count++;
            HASH_ADD_KEYPTR(hh, lines, l->text, buflen, l);
        }
    }
    struct line **sorted = calloc(count ? count : 1, sizeof *sorted);
    size_t k = 0;
    HASH_ITER(hh, lines, l, tmp) {
        if (sorted) sorted[k++] = l;
    }
    if (sorted) {
        qsort(sorted, k, sizeof *sorted, by_order);
        for (size_t i = 0; i < k && rc == 0; i++) fprintf(f, "%s %" PRIu64 "\n", sorted[i]->text, sorted[i]->bytes);
    }
    HASH_ITER(hh, lines, l, tmp) {
        HASH_DEL(lines, l);
        free(l->text);
        free(l);
    }
    free(sorted);
    return rc;
}
