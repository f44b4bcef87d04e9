/* torch_kept.c -- what a kept exception's traceback holds at an
 * out-of-memory failure, from PyTorch's record of it: the companion names
 * the tensors that only a caught exception's frames keep "held by `the
 * traceback of NAME at ...`" (python/vramtrace_torch/collect.py), and their
 * graphs' "graph of the traceback of ...". */
#include <string.h>

#include "torch.h"

static const char kept_prefix[] = "the traceback of ";

/* The holder's text past "the traceback of " (and a graph's "graph of "),
 * or NULL when the tensor is not held by a kept traceback. */
static const char *kept_by(const char *holder) {
    if (strncmp(holder, "graph of ", 9) == 0) holder += 9;
    return strncmp(holder, kept_prefix, sizeof kept_prefix - 1) == 0 ? holder + sizeof kept_prefix - 1 : NULL;
}

int vt_torch_oom_kept(const struct vt_snapshot *s, size_t i, struct vt_torch_kept *out) {
    memset(out, 0, sizeof *out);
    vt_torch_lock();
    const struct vt_torch_record *r = vt_torch_for_oom(s, i);
    for (size_t k = 0; r && k < r->ndevices; k++) {
        const struct vt_torch_device *d = &r->devices[k];
        if (d->device != r->oom_device) continue;
        const struct vt_torch_tensor *largest = NULL;
        for (size_t j = 0; j < d->ntensors; j++) {
            const struct vt_torch_tensor *t = &d->tensors[j];
            if (!kept_by(t->holder)) continue;
            out->bytes += t->bytes;
            out->count++;
            /* The largest; of equal ones, one a frame holds itself (`x`)
             * rather than through a graph: what the program wrote. */
            if (!largest || t->bytes > largest->bytes ||
                (t->bytes == largest->bytes && largest->holder[0] == 'g' && t->holder[0] != 'g'))
                largest = t;
        }
        if (largest) {
            /* The exception's name: up to " at FRAME", where there is one. */
            const char *by = kept_by(largest->holder), *at = strstr(by, " at ");
            size_t n = at ? (size_t)(at - by) : strlen(by);
            if (n >= sizeof out->exception) n = sizeof out->exception - 1;
            memcpy(out->exception, by, n);
            out->exception[n] = '\0';
            snprintf(out->largest, sizeof out->largest, "%s, %s %s%s%s",
                     largest->name[0] ? largest->name : "a tensor", largest->dtype, largest->shape, at ? "," : "",
                     at ? at : "");
        }
    }
    vt_torch_unlock();
    return out->count > 0;
}
