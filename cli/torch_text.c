/* torch_text.c -- PyTorch's breakdown in `vramtrace report`'s text: the
 * lines of common/torchfmt.c, as the library's reports print them. */
#include "../common/format.h"
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
                            vm_torch_categories, x->cat, VM_TORCH_NCAT, x->settings);
        if (x->has_growth) {   /* the library's figure, as the library printed it */
            char rate[512], site[1024];
            vt_fmt_growth(x->growth_rise, x->growth_units, x->growth_unit, x->growth_span_ns, x->growth_per_unit,
                          x->growth_run_steps, rate, sizeof rate);
            vt_fmt_held(x->growth_holder, rate, sizeof rate);
            vt_fmt_kept(x->growth_history_from_ns, rate, sizeof rate);
            vt_put_torch_growth(f, indent, rate, vm_site_label(d, x->growth_stack, site, sizeof site), x->growth_holder,
                                x->settings, vr_put_safe);
        }
        if (x->ntensors) fprintf(f, "%s  largest tensors:\n", indent);
        for (size_t j = 0; j < x->ntensors && j < TOP_SHOWN; j++) {
            const struct vm_torch_tensor *y = &x->tensors[j];
            char site[1024] = "";
            if (y->has_stack) vm_site_label(d, y->stack, site, sizeof site);
            vt_put_torch_tensor(f, indent, y->bytes, y->dtype, y->shape, y->category, y->name, y->holder, site,
                                vr_put_safe);
        }
        if (x->ntensors) vt_put_torch_segment_note(f, indent, x->settings);
    }
}
