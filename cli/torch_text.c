/* torch_text.c -- PyTorch's breakdown in `vramtrace report`'s text: the
 * lines of common/torchfmt.c, as the library's reports print them. */
#include <string.h>

#include "../common/torchfmt.h"
#include "model.h"
#include "model_torch.h"
#include "reporters.h"

#define TOP_SHOWN 10

void vr_text_torch(FILE *f, const struct vm_dump *d, const struct vm_torch *t, const char *indent) {
    if (!t) return;
    for (size_t i = 0; i < t->ndevices; i++) {
        const struct vm_torch_device *x = &t->devices[i];
        vt_put_torch_device(f, indent, x->device, x->allocated, x->reserved, x->largest_free,
                            x->has_request ? &x->request : NULL, x->has_outside ? &x->outside : NULL, x->steps,
                            vm_torch_categories, x->cat, VM_TORCH_NCAT);
        const char *holder = "";
        uint64_t most = 0;
        for (size_t j = 0; j < x->ntensors; j++) {
            uint64_t sum = 0;
            for (size_t k = 0; k < x->ntensors; k++)
                if (strcmp(x->tensors[k].holder, x->tensors[j].holder) == 0) sum += x->tensors[k].bytes;
            if (x->tensors[j].holder[0] && sum > most) { most = sum; holder = x->tensors[j].holder; }
        }
        vt_put_torch_growth(f, indent, x->per_step, x->growth_steps, holder, vr_put_safe);
        if (x->ntensors) fprintf(f, "%s  largest tensors:\n", indent);
        for (size_t j = 0; j < x->ntensors && j < TOP_SHOWN; j++) {
            const struct vm_torch_tensor *y = &x->tensors[j];
            char site[1024] = "";
            if (y->has_stack) vm_site_label(d, y->stack, site, sizeof site);
            vt_put_torch_tensor(f, indent, y->bytes, y->dtype, y->shape, y->category, y->name, y->holder, site,
                                vr_put_safe);
        }
    }
}
