/* torchfmt.c -- what PyTorch holds, in words (see torchfmt.h). */
#include <inttypes.h>
#include <string.h>

#include "format.h"
#include "torchfmt.h"

void vt_put_torch_device(FILE *f, const char *prefix, int device, uint64_t allocated, uint64_t reserved,
                         uint64_t largest_free, const uint64_t *request, const uint64_t *outside, uint64_t steps,
                         const char *const *cat_names, const uint64_t *cat_bytes, int ncat, const char *settings) {
    char a[32], r[32], l[32], q[32], o[32];
    fprintf(f, "%sPyTorch on device %d: %s allocated by PyTorch, %s reserved but unallocated", prefix, device,
            vt_fmt_bytes(allocated, a, sizeof a), vt_fmt_bytes(reserved > allocated ? reserved - allocated : 0, r, sizeof r));
    /* cudaMallocAsync's pool is the driver's: its free blocks are unknown. */
    if (settings && strstr(settings, "backend:cudaMallocAsync")) {
        fputs(" (in its cudaMallocAsync pool, whose free blocks are not known", f);
    } else {
        fprintf(f, " (largest free block %s", vt_fmt_bytes(largest_free, l, sizeof l));
        if (request)
            fprintf(f, "; the failed request of %s %s", vt_fmt_bytes(*request, q, sizeof q),
                    *request > largest_free ? "does not fit in it"
                                            : "fits in it by size, yet failed: a free block serves only the stream it "
                                              "was made on, so that one is another stream's");
    }
    fputc(')', f);
    if (outside) fprintf(f, ", %s outside PyTorch", vt_fmt_bytes(*outside, o, sizeof o));
    if (steps) fprintf(f, "; %" PRIu64 " optimizer step%s", steps, steps == 1 ? "" : "s");
    fprintf(f, "\n%s  by category:", prefix);
    uint64_t named = 0;
    for (int k = 0; k < ncat; k++) {
        fprintf(f, "%s %s %s", k ? "," : "", cat_names[k], vt_fmt_bytes(cat_bytes[k], a, sizeof a));
        named += cat_bytes[k];
    }
    /* What PyTorch allocated in no tensor the walk reached: the line adds
     * up (cuBLAS's workspaces, autograd's buffers in flight at a failure
     * in backward: the answer, left out, at an outside check). */
    if (ncat && allocated > named)
        fprintf(f, "; in no tensor Python reaches %s (library workspaces such as cuBLAS's, autograd's buffers in "
                   "flight, tensors only C++ holds)", vt_fmt_bytes(allocated - named, a, sizeof a));
    fputc('\n', f);
}

static void put_plain(FILE *f, const char *s) { fputs(s, f); }

void vt_put_torch_growth(FILE *f, const char *prefix, const char *rate, const char *site, const char *holder,
                         const char *settings, void (*put)(FILE *, const char *)) {
    if (!put) put = put_plain;
    fprintf(f, "%s  growth: ", prefix);
    put(f, rate);
    if (site && *site) {
        fputs(" in ", f);
        put(f, site);
    }
    fputc('\n', f);
    if (!holder || !*holder) return;
    fprintf(f, "%s     next: free what `", prefix);
    put(f, holder);
    fputs("` keeps from one step to the next", f);
    if (site && *site && !(settings && strstr(settings, "backend:cudaMallocAsync")))
        fputs(" (its tensors lie in segments PyTorch's cache made at that line, which need not be where they were "
              "made: `vramtrace run --tensors` records each tensor's own line)", f);
    fputc('\n', f);
}

void vt_put_torch_tensor(FILE *f, const char *prefix, uint64_t bytes, const char *dtype, const char *shape,
                         const char *category, const char *name, const char *holder, const char *site,
                         void (*put)(FILE *, const char *)) {
    char b[32];
    if (!put) put = put_plain;
    fprintf(f, "%s    %10s  ", prefix, vt_fmt_bytes(bytes, b, sizeof b));
    put(f, dtype);
    fputc(' ', f);
    put(f, shape);
    fprintf(f, "  %s  ", category);
    put(f, name && *name ? name : "(unnamed)");
    if (holder && *holder) {
        fputs(" (held by ", f);
        put(f, holder);
        fputc(')', f);
    }
    if (site && *site) {
        fputs("  ", f);
        put(f, site);
    }
    fputc('\n', f);
}

void vt_put_torch_segment_note(FILE *f, const char *prefix, const char *settings) {
    if (settings && strstr(settings, "backend:cudaMallocAsync")) return;
    fprintf(f, "%s  (a tensor's line is where PyTorch's cache made the segment it lies in, which later tensors reuse; "
               "`vramtrace run --tensors` records each tensor's own line)\n", prefix);
}
