/* live_read.c -- a snapshot's live list read one record at a time,
 * wherever it lies: in memory (s->live, as sorted), or spilled to a file
 * (tracker/live_spill.c) as sorted runs, merged here on the way out.
 *
 * The merge keeps a cursor on each run, each with a buffer of its next
 * records, read with pread as it empties: 4 MiB of buffers shared among the
 * runs, at least a page's worth each, and a heap of the cursors by their
 * next record in the one order (vt_live_before). A list in file order is
 * one cursor over the whole file, 256 KiB at a time. */
#include <stdlib.h>

#include "../common/warn.h"
#include "live_spill.h"

#define MERGE_BYTES (4u << 20)
#define SCAN_BYTES (256u << 10)

struct cursor {
    size_t at, end;        /* the records of buf[0] and past the run's last */
    size_t nbuf, i;        /* records in buf, and the next to give */
    struct vt_live *buf;
};

struct vt_live_reader {
    const struct vt_snapshot *s;
    size_t next;           /* in memory: the index of the next record */
    size_t per;            /* records a cursor's buffer holds */
    size_t nheap;          /* cursors with records left, in heap[] */
    int given;             /* the top cursor's record was given: move on */
    size_t *heap;          /* cursor indexes, the first record's on top */
    size_t k;
    struct cursor c[];
};

/* Read the cursor's next buffer; 0 when its run is done. */
static int refill(const struct vt_snapshot *s, struct cursor *c, size_t per) {
    c->at += c->nbuf;
    c->i = 0;
    c->nbuf = 0;
    if (c->at >= c->end) return 0;
    size_t want = c->end - c->at < per ? c->end - c->at : per;
    c->nbuf = vt_live_spill_read(s, c->at, want, c->buf);
    if (c->nbuf < want) c->end = c->at + c->nbuf; /* warned: the run ends here */
    return c->nbuf > 0;
}

static int cursor_before(const struct vt_live_reader *r, size_t x, size_t y) {
    return vt_live_before(&r->c[x].buf[r->c[x].i], &r->c[y].buf[r->c[y].i]);
}

static void sift_down(struct vt_live_reader *r, size_t at) {
    for (;;) {
        size_t first = at, kid = 2 * at + 1;
        if (kid < r->nheap && cursor_before(r, r->heap[kid], r->heap[first])) first = kid;
        if (kid + 1 < r->nheap && cursor_before(r, r->heap[kid + 1], r->heap[first])) first = kid + 1;
        if (first == at) return;
        size_t t = r->heap[at];
        r->heap[at] = r->heap[first];
        r->heap[first] = t;
        at = first;
    }
}

struct vt_live_reader *vt_live_read(const struct vt_snapshot *s, int in_order) {
    const struct vt_live_spill *sp = s->spill;
    size_t k = !sp || !s->nlive ? 0 : in_order ? (s->nlive + sp->run - 1) / sp->run : 1;
    size_t per = 0;
    if (k) {
        size_t page = 4096 / sizeof(struct vt_live);
        per = (in_order ? MERGE_BYTES / k : SCAN_BYTES) / sizeof(struct vt_live);
        if (per < page) per = page;
        if (per > sp->run && in_order) per = sp->run;
    }
    struct vt_live_reader *r = calloc(1, sizeof *r + k * sizeof *r->c);
    size_t *heap = k ? malloc(k * sizeof *heap) : NULL;
    struct vt_live *bufs = k ? malloc(k * per * sizeof *bufs) : NULL;
    if (!r || (k && (!heap || !bufs))) {
        free(r);
        free(heap);
        free(bufs);
        vt_records_lost("a reading of a dump's live list");
        return NULL;
    }
    *r = (struct vt_live_reader){.s = s, .per = per, .heap = heap, .k = k};
    for (size_t j = 0; j < k; j++) {
        struct cursor *c = &r->c[j];
        c->buf = bufs + j * per;
        c->at = k == 1 ? 0 : j * sp->run;
        c->end = k == 1 || c->at + sp->run > s->nlive ? s->nlive : c->at + sp->run;
        if (refill(s, c, per)) r->heap[r->nheap++] = j;
    }
    for (size_t j = r->nheap / 2; j-- > 0;) sift_down(r, j);
    return r;
}

const struct vt_live *vt_live_next(struct vt_live_reader *r) {
    if (!r->k) return r->next < r->s->nlive ? &r->s->live[r->next++] : NULL;
    if (r->given && r->nheap) {
        struct cursor *c = &r->c[r->heap[0]];
        if (++c->i == c->nbuf && !refill(r->s, c, r->per)) r->heap[0] = r->heap[--r->nheap];
        sift_down(r, 0);
    }
    r->given = 1;
    if (!r->nheap) return NULL;
    const struct cursor *c = &r->c[r->heap[0]];
    return &c->buf[c->i];
}

void vt_live_read_end(struct vt_live_reader *r) {
    if (!r) return;
    if (r->k) free(r->c[0].buf);
    free(r->heap);
    free(r);
}
