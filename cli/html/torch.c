/* torch.c -- PyTorch's own view of its memory in the HTML page: the
 * figures per device in the summary, and the tensors in the data block
 * (the script's tensors tables). Both come from a "torch" record of the
 * dump (at exit or on demand) or of one of its OOMs (cli/model_torch.h). */
#include <inttypes.h>
#include <string.h>

#include "../../common/format.h"
#include "../model_torch.h"
#include "html.h"

#define B(v, buf) vr_bytes((v), (buf), sizeof(buf))

static void cell(FILE *f, int known, uint64_t v) {
    char b[32];
    if (known) fprintf(f, "<td class=n>%s</td>", B(v, b));
    else fputs("<td class=n>-</td>", f);
}

/* Two tables a record: per device allocated by PyTorch, reserved, outside
 * PyTorch (the CUDA context, other libraries and processes), free, the
 * largest free block (and, at an OOM, the request PyTorch's allocator
 * made), the steps and the growth per optimizer step; then per device the
 * live tensors' bytes by category and what is allocated in none. "-"
 * where the record does not say. */
void vh_torch_table(FILE *f, const struct vm_torch *t, const char *title) {
    char a[32], b[32];
    if (!t || !t->ndevices) return;
    fputs("<h4 class=\"torch-title\">", f);
    vh_text(f, title);
    fputs("</h4>\n<table class=\"torch\"><thead><tr><th>device</th><th>allocated</th><th>reserved</th>"
          "<th>outside PyTorch</th><th>free</th><th>largest free block</th><th>failed request</th>"
          "<th>steps</th><th>growth per step</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < t->ndevices; i++) {
        const struct vm_torch_device *x = &t->devices[i];
        fprintf(f, "<tr><td class=n>%d</td>", x->device);
        cell(f, 1, x->allocated);
        cell(f, 1, x->reserved);
        cell(f, x->has_outside, x->outside);
        cell(f, x->has_free, x->free_bytes);
        /* cudaMallocAsync's pool is the driver's: its blocks are unknown
         * (as the text reports say it). */
        int pool = x->settings && strstr(x->settings, "backend:cudaMallocAsync");
        if (pool) fputs("<td class=n>unknown (cudaMallocAsync)</td>", f);
        else cell(f, 1, x->largest_free);
        if (x->has_request && pool)
            fprintf(f, "<td class=n>%s</td>", B(x->request, a));
        else if (x->has_request)
            fprintf(f, "<td class=n>%s (%s)</td>", B(x->request, a),
                    x->request > x->largest_free ? "does not fit" : "fits");
        else
            fputs("<td class=n>-</td>", f);
        fprintf(f, "<td class=n>%" PRIu64 "</td>", x->steps);
        if (x->growth_steps)
            fprintf(f, "<td class=n>+%s over %" PRIu64 " step%s</td>", B(x->per_step, b), x->growth_steps,
                    x->growth_steps == 1 ? "" : "s");
        else
            fputs("<td class=n>-</td>", f);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n<table class=\"torch-cats\"><thead><tr><th>device</th>", f);
    for (int k = 0; k < VM_TORCH_NCAT; k++) fprintf(f, "<th>%s</th>", vm_torch_categories[k]);
    fputs("<th>in no category</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < t->ndevices; i++) {
        const struct vm_torch_device *x = &t->devices[i];
        uint64_t known = 0;
        fprintf(f, "<tr><td class=n>%d</td>", x->device);
        for (int k = 0; k < VM_TORCH_NCAT; k++) {
            cell(f, 1, x->cat[k]);
            known += x->cat[k];
        }
        cell(f, 1, x->allocated > known ? x->allocated - known : 0);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void strings(FILE *f, const char *name, const struct vm_torch_device *x, size_t field) {
    fprintf(f, ",\"%s\":[", name);
    for (size_t j = 0; j < x->ntensors; j++) {
        const struct vm_torch_tensor *y = &x->tensors[j];
        const char *s[] = {y->shape, y->dtype, y->category, y->name, y->holder};
        if (j) fputc(',', f);
        vh_json_string(f, s[field]);
    }
    fputc(']', f);
}

/* ",\"NAME\":" and the record as the script reads it (null when absent):
 * per device its figures, its categories' bytes in vm_torch_categories'
 * order, and its tensors as parallel arrays (s: the stack, -1 for none). */
void vh_torch_data(FILE *f, const char *name, const struct vm_torch *t) {
    fprintf(f, ",\"%s\":", name);
    if (!t) { fputs("null", f); return; }
    fputc('[', f);
    for (size_t i = 0; i < t->ndevices; i++) {
        const struct vm_torch_device *x = &t->devices[i];
        fprintf(f, "%s{\"device\":%d,\"allocated\":%" PRIu64 ",\"reserved\":%" PRIu64 ",\"cat\":[", i ? "," : "",
                x->device, x->allocated, x->reserved);
        for (int k = 0; k < VM_TORCH_NCAT; k++) fprintf(f, k ? ",%" PRIu64 : "%" PRIu64, x->cat[k]);
        fputs("],\"b\":[", f);
        for (size_t j = 0; j < x->ntensors; j++) fprintf(f, j ? ",%" PRIu64 : "%" PRIu64, x->tensors[j].bytes);
        fputc(']', f);
        strings(f, "shape", x, 0);
        strings(f, "dtype", x, 1);
        strings(f, "category", x, 2);
        strings(f, "name", x, 3);
        strings(f, "holder", x, 4);
        fputs(",\"s\":[", f);
        for (size_t j = 0; j < x->ntensors; j++)
            fprintf(f, j ? ",%ld" : "%ld", x->tensors[j].has_stack ? (long)x->tensors[j].stack : -1L);
        fputs("]}", f);
    }
    fputc(']', f);
}
