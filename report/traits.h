/* traits.h -- what a stack's frames say of the code that allocated.
 *
 * The questions every report asks of a stack's frames: whether it went
 * through PyTorch, through PyTorch's CUDA allocator (the memory of its
 * cache), whether its call site is Python code, whether it runs activation
 * checkpointing's recomputation. Each stack is walked once and its
 * answers kept in sym->traits, so that the findings of every failure of a
 * dump and a per-test leak check ask again for nothing. */
#ifndef VT_TRAITS_H
#define VT_TRAITS_H

#include <stdint.h>

#include "symbolize.h"

/* Whether the stack's call site is a Python frame. */
int vt_is_python(const struct vt_symbols *sym, uint32_t stack);

/* Whether the stack went through PyTorch (a frame in libc10* or
 * libtorch*): PyTorch's advice (its allocator's settings, .detach(),
 * no_grad) is for its memory, not for a numba, CuPy or ctypes program's. */
int vt_through_torch(const struct vt_symbols *sym, uint32_t stack);

/* Whether the stack went through PyTorch's CUDA allocator (a frame in
 * libc10_cuda*: its caching allocator and its cudaMallocAsync backend
 * both live there): the memory of PyTorch's cache, which serves PyTorch's
 * tensors alone. */
int vt_through_torch_allocator(const struct vt_symbols *sym, uint32_t stack);

/* Whether the stack runs Python code of torch/utils/checkpoint.py: a
 * failure in activation checkpointing's recomputation. */
int vt_in_checkpoint(const struct vt_symbols *sym, uint32_t stack);

/* Whether the stack runs an optimizer's own code (torch/optim/): the
 * memory of its state (Adam's two tensors a parameter, made at its first
 * step). */
int vt_in_optimizer(const struct vt_symbols *sym, uint32_t stack);

#endif
