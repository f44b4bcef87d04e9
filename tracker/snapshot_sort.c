/* snapshot_sort.c -- a snapshot's live list sorted by size, in place.
 *
 * The live list of a million allocations is most of a dump's memory: it is
 * sorted where it lies (an introsort: quicksort, insertion sort for short
 * runs, heapsort past a depth bound), with no buffer beside it, where qsort
 * would take one as large as an eighth to the whole of it. A list longer
 * than VRAMTRACE_SPILL's bytes is sorted the same way one run at a time
 * (tracker/live_spill.c). */
#include "live_spill.h"

static inline void swap(struct vt_live *a, struct vt_live *b) {
    struct vt_live t = *a;
    *a = *b;
    *b = t;
}

static void insertion(struct vt_live *v, size_t n) {
    for (size_t i = 1; i < n; i++) {
        struct vt_live x = v[i];
        size_t j = i;
        for (; j > 0 && vt_live_before(&x, &v[j - 1]); j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

static void sift(struct vt_live *v, size_t root, size_t n) {
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n) return;
        if (c + 1 < n && vt_live_before(&v[c], &v[c + 1])) c++;
        if (!vt_live_before(&v[root], &v[c])) return;
        swap(&v[root], &v[c]);
        root = c;
    }
}

static void heapsort(struct vt_live *v, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift(v, i, n);
    for (size_t end = n; end-- > 1;) {
        swap(&v[0], &v[end]);
        sift(v, 0, end);
    }
}

static void introsort(struct vt_live *v, size_t n, int depth) {
    while (n > 16) {
        if (depth-- == 0) {
            heapsort(v, n);
            return;
        }
        /* The median of the first, middle and last as the pivot, kept at
         * v[0] while the rest is split around it. */
        size_t m = n / 2;
        if (vt_live_before(&v[m], &v[0])) swap(&v[m], &v[0]);
        if (vt_live_before(&v[n - 1], &v[0])) swap(&v[n - 1], &v[0]);
        if (vt_live_before(&v[n - 1], &v[m])) swap(&v[n - 1], &v[m]);
        swap(&v[0], &v[m]);
        size_t i = 1, j = n - 1;
        for (;;) {
            while (vt_live_before(&v[i], &v[0])) i++;
            while (vt_live_before(&v[0], &v[j])) j--;
            if (i >= j) break;
            swap(&v[i++], &v[j--]);
        }
        swap(&v[0], &v[j]);
        /* The shorter side first, the longer in this loop: the stack stays
         * within log2(n) frames. */
        if (j < n - j - 1) {
            introsort(v, j, depth);
            v += j + 1;
            n -= j + 1;
        } else {
            introsort(v + j + 1, n - j - 1, depth);
            n = j;
        }
    }
    insertion(v, n);
}

int vt_live_vt_live_before(const struct vt_live *x, const struct vt_live *y) { return vt_live_before(x, y); }

void vt_live_sort(struct vt_live *v, size_t n) {
    int depth = 0;
    for (size_t k = n; k > 1; k >>= 1) depth += 2;
    if (n > 1) introsort(v, n, depth);
}

void vt_snapshot_sort_live(struct vt_snapshot *s) {
    if (s->spill) vt_live_spill_sort(s);
    else vt_live_sort(s->live, s->nlive);
}
