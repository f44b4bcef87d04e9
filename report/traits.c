/* traits.c -- what a stack's frames say (traits.h). */
#include <string.h>

#include "../tracker/departed.h"
#include "traits.h"

enum {
    T_KNOWN = 1,
    T_TORCH = 2,       /* a frame in libc10* or libtorch* */
    T_TORCH_ALLOC = 4, /* a frame in libc10_cuda* */
    T_CKPT = 8,        /* Python code of torch/utils/checkpoint.py */
    T_OPTIM = 16,      /* Python code of torch/optim/: an optimizer's own */
};

/* The stack's traits, found in one walk of its frames and kept in
 * sym->traits (asked again when that table could not be made). */
static unsigned stack_traits(const struct vt_symbols *sym, uint32_t stack) {
    if (!sym || stack >= sym->nstacks) return 0;
    if (sym->traits && sym->traits[stack]) return sym->traits[stack];
    static const char ckpt[] = "torch/utils/checkpoint.py";
    const size_t nckpt = sizeof ckpt - 1;
    const struct vt_stack *st = sym->stack[stack];
    unsigned t = T_KNOWN;
    const char *last = NULL;   /* the module of the frame before: most run on in one */
    for (uint32_t j = 0; j < st->depth; j++) {
        const struct vt_frame *fr = vt_symbols_frame(sym, vt_code_key(st, j));
        if (!fr) continue;
        if (fr->python) {
            size_t n = fr->file ? strlen(fr->file) : 0;
            if (n >= nckpt && strcmp(fr->file + n - nckpt, ckpt) == 0) t |= T_CKPT;
            if (fr->file && strstr(fr->file, "torch/optim/")) t |= T_OPTIM;
        }
        if (!fr->module || fr->module == last) continue;
        last = fr->module;
        const char *m = strrchr(fr->module, '/');
        m = m ? m + 1 : fr->module;
        if (strncmp(m, "libc10_cuda", 11) == 0) t |= T_TORCH | T_TORCH_ALLOC;
        else if (strncmp(m, "libc10", 6) == 0 || strncmp(m, "libtorch", 8) == 0) t |= T_TORCH;
    }
    if (sym->traits) sym->traits[stack] = (uint8_t)t;
    return t;
}

int vt_is_python(const struct vt_symbols *sym, uint32_t stack) {
    const struct vt_frame *fr = vt_call_site(sym, stack);
    return fr && fr->python;
}

int vt_through_torch(const struct vt_symbols *sym, uint32_t stack) {
    return (stack_traits(sym, stack) & T_TORCH) != 0;
}

int vt_through_torch_allocator(const struct vt_symbols *sym, uint32_t stack) {
    return (stack_traits(sym, stack) & T_TORCH_ALLOC) != 0;
}

int vt_in_checkpoint(const struct vt_symbols *sym, uint32_t stack) {
    return (stack_traits(sym, stack) & T_CKPT) != 0;
}

int vt_in_optimizer(const struct vt_symbols *sym, uint32_t stack) {
    return (stack_traits(sym, stack) & T_OPTIM) != 0;
}
