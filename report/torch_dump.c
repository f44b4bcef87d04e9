/* torch_dump.c -- the dump's "torch" arrays (docs/dump-format.md). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "torch.h"

#define U64 "%" PRIu64

/* Where a tensor's address falls, for the pass below: the tensors sorted
 * by address. */
struct wanted {
    uint64_t address;
    size_t tensor;
};

static int by_address(const void *x, const void *y) {
    uint64_t a = ((const struct wanted *)x)->address, b = ((const struct wanted *)y)->address;
    return a < b ? -1 : a > b;
}

/* The tensors' addresses are sorted once; each live allocation of the
 * device finds the ones it holds by a binary search. A spilled list is
 * read in file order, each holder kept when it comes before the one kept
 * (vt_live_before); one in memory is in that order already, so the pass
 * ends when every tensor has its holder. */
void vt_torch_tensor_stacks(const struct vt_snapshot *s, const struct vt_torch_device *d,
                            int64_t stack[VT_TORCH_TENSORS]) {
    struct wanted w[VT_TORCH_TENSORS];
    struct vt_live best[VT_TORCH_TENSORS];
    size_t n = 0, left = 0;
    for (size_t j = 0; j < d->ntensors && j < VT_TORCH_TENSORS; j++) {
        stack[j] = -1;
        uint64_t at = d->tensors[j].block ? d->tensors[j].block : d->tensors[j].segment;
        if (at) w[n++] = (struct wanted){at, j};
    }
    if (!n) return;
    qsort(w, n, sizeof w[0], by_address);
    left = n;
    struct vt_live_reader *rd = vt_live_read(s, 0);
    for (const struct vt_live *a; rd && (a = vt_live_next(rd));) {
        if (!vt_kind_owned_device(a->kind) || a->device != d->device) continue;
        uint64_t start = vt_kind_space(a->kind) == VT_SPACE_HANDLE ? vt_live_mapped(s, a) : a->address;
        if (!start) continue;
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (w[mid].address < start) lo = mid + 1;
            else hi = mid;
        }
        for (size_t i = lo; i < n && w[i].address - start < a->bytes; i++) {
            size_t j = w[i].tensor;
            if (stack[j] >= 0 && !vt_live_before(a, &best[j])) continue;
            if (stack[j] < 0) left--;
            best[j] = *a;
            stack[j] = a->stack;
        }
        if (!left && !s->spill) break;
    }
    vt_live_read_end(rd);
}

int vt_torch_outside(const struct vt_torch_device *d, uint64_t *bytes) {
    if (!d->have_mem || d->free > d->total || d->total - d->free < d->reserved) return 0;
    *bytes = d->total - d->free - d->reserved;
    return 1;
}

static void hex(FILE *f, uint64_t v) { fprintf(f, "\"0x%" PRIx64 "\"", v); }

/* The library's growing site g, whose holder this device's tensors name:
 * its rate (vt_growth_rate's), its stack and its holder. */
static void write_growth(FILE *f, const struct vt_growth *g) {
    if (!g) { fputs(",\"growth\":null", f); return; }
    struct vt_growth_rate r = vt_growth_rate(g);
    fprintf(f, ",\"growth\":{\"stack\":%" PRIu32 ",\"unit\":\"%s\",\"units\":" U64 ",\"bytes_per_unit\":" U64
               ",\"rise_bytes\":" U64 ",\"span_ns\":" U64 ",\"holder_bytes\":" U64 ",\"holder\":",
            g->stack, r.unit, r.units, r.per_unit, r.rise, r.span_ns, g->holder_bytes);
    vt_json_string(f, g->holder);
    if (r.run_steps) fprintf(f, ",\"run_steps\":" U64, r.run_steps);
    if (r.history_from_ns) fprintf(f, ",\"history_from_ns\":" U64, r.history_from_ns);
    fputc('}', f);
}

/* Record r; an "oom" record's request is `request` (`rounded`: PyTorch's
 * error's two-decimal figure); g[0..n) the growing sites its devices'
 * "growth" is taken from. */
static void write_record(FILE *f, const struct vt_snapshot *s, const struct vt_torch_record *r, uint64_t request,
                         int rounded, const struct vt_growth *g, size_t n) {
    fputs(",\"torch\":[", f);
    for (size_t i = 0; i < r->ndevices; i++) {
        const struct vt_torch_device *d = &r->devices[i];
        fprintf(f, "%s{\"device\":%d,\"allocated_bytes\":" U64 ",\"reserved_bytes\":" U64
                   ",\"largest_free_block_bytes\":" U64 ",\"outside_bytes\":",
                i ? ",\n  " : "\n  ", d->device, d->allocated, d->reserved, d->largest_free);
        uint64_t out;
        if (vt_torch_outside(d, &out)) fprintf(f, U64, out);
        else fputs("null", f);
        if (d->have_mem) fprintf(f, ",\"free_bytes\":" U64 ",\"total_bytes\":" U64, d->free, d->total);
        else fputs(",\"free_bytes\":null,\"total_bytes\":null", f);
        if (r->reason == VT_TORCH_OOM && r->oom_device == d->device)
            fprintf(f, ",\"request_bytes\":" U64 "%s", request, rounded ? ",\"request_rounded\":true" : "");
        fprintf(f, ",\"steps\":" U64, r->steps);
        write_growth(f, vt_torch_growth_on(g, n, d->device));
        fputs(",\"settings\":", f);
        vt_json_string(f, d->settings);
        fputs(",\"categories\":{", f);
        for (int k = 0; k < VT_TORCH_NCAT; k++)
            fprintf(f, "%s\"%s\":" U64, k ? "," : "", vt_torch_categories[k], d->cat[k]);
        fputs("},\"tensors\":[", f);
        int64_t stacks[VT_TORCH_TENSORS];
        vt_torch_tensor_stacks(s, d, stacks);
        for (size_t j = 0; j < d->ntensors; j++) {
            const struct vt_torch_tensor *t = &d->tensors[j];
            fprintf(f, "%s{\"bytes\":" U64 ",\"shape\":", j ? ",\n   " : "\n   ", t->bytes);
            vt_json_string(f, t->shape);
            fputs(",\"dtype\":", f);
            vt_json_string(f, t->dtype);
            fprintf(f, ",\"category\":\"%s\",\"name\":", vt_torch_categories[t->category]);
            vt_json_string(f, t->name);
            fputs(",\"holder\":", f);
            vt_json_string(f, t->holder);
            fputs(",\"block_address\":", f);
            hex(f, t->block);
            fputs(",\"segment_address\":", f);
            hex(f, t->segment);
            int64_t st = j < VT_TORCH_TENSORS ? stacks[j] : -1;
            if (st >= 0) fprintf(f, ",\"stack\":%" PRId64 "}", st);
            else fputs(",\"stack\":null}", f);
        }
        fputs("]}", f);
    }
    fputc(']', f);
}

void vt_torch_write_top(FILE *f, const struct vt_snapshot *s, const char *reason, const struct vt_growth *g,
                        size_t n) {
    vt_torch_lock();
    const struct vt_torch_record *r = vt_torch_top(reason);
    if (r) write_record(f, s, r, r->request, r->request_rounded, g, n);
    vt_torch_unlock();
}

void vt_torch_write_oom(FILE *f, const struct vt_snapshot *s, size_t i, const struct vt_growth *g, size_t n) {
    vt_torch_lock();
    const struct vt_torch_record *r = vt_torch_for_oom(s, i);
    if (r) write_record(f, s, r, vt_torch_request(r, s, i), vt_torch_request_rounded(r, s, i), g, n);
    vt_torch_unlock();
}
