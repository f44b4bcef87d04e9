/* model_tree.c -- a dump's stacks as nodes of one prefix tree of frames,
 * their frames read on demand (model.h).
 *
 * A stack keeps only its innermost node, its depth and its call site: the
 * frames are found by walking the nodes up to the root, so that the model
 * holds no per-stack array of frames (a version 2 dump stores the tree
 * itself; a version 1 dump's stacks are added to it as they are read). */
#include <stdlib.h>
#include <string.h>

#include "model.h"

const struct vt_frame *vm_stack_frame(const struct vm_dump *d, size_t stack, size_t i) {
    if (stack >= d->nstacks || i >= d->stacks[stack].nframes) return NULL;
    uint32_t n = d->stacks[stack].node;
    while (i--) n = d->nodes[n].parent;
    return &d->frames[d->nodes[n].frame];
}

const struct vt_frame *const *vm_stack_frames(const struct vm_dump *d, size_t stack) {
    if (stack >= d->nstacks || d->stacks[stack].nframes == 0 || !d->scratch) return NULL;
    const struct vm_stack *s = &d->stacks[stack];
    uint32_t n = s->node;
    for (uint32_t i = 0; i < s->nframes; i++, n = d->nodes[n].parent) d->scratch[i] = &d->frames[d->nodes[n].frame];
    return d->scratch;
}

const struct vt_frame *vm_stack_flat(const struct vm_dump *d, size_t stack) {
    if (stack >= d->nstacks || d->stacks[stack].nframes == 0 || !d->flat) return NULL;
    const struct vm_stack *s = &d->stacks[stack];
    uint32_t n = s->node;
    for (uint32_t i = 0; i < s->nframes; i++, n = d->nodes[n].parent) d->flat[i] = d->frames[d->nodes[n].frame];
    return d->flat;
}

/* The capacity of an array of n elements: the power of two at least n
 * (64 at least), so that it need not be stored beside the count. */
static size_t capacity(size_t n) {
    size_t c = 64;
    while (c < n) c *= 2;
    return c;
}

/* Room for `more` elements past n in the array *(T **)arrayp, each `each`
 * bytes. 0 when memory ran out (the array is kept as it was). */
static int grow(void *arrayp, size_t n, size_t more, size_t each) {
    void *old;
    memcpy(&old, arrayp, sizeof old);
    if (old && capacity(n + more) == capacity(n)) return 1;
    void *grown = realloc(old, capacity(n + more) * each);
    if (!grown) return 0;
    memcpy(arrayp, &grown, sizeof grown);
    return 1;
}

/* A version 1 stack's frames become a chain of new nodes over new frames:
 * such a dump is parsed whole by jansson, whose tree (every frame an
 * object of its own) outweighs by far what sharing frames and nodes here
 * would save. */
int vm_tree_add(struct vm_dump *d, struct vm_stack *st, const struct vt_frame *frames, size_t n) {
    st->node = VM_NO_NODE;
    st->nframes = 0;
    if (n == 0) return 0;
    if (d->nframes + n >= VM_NO_NODE) return -1;
    if (!grow(&d->frames, d->nframes, n, sizeof *d->frames) || !grow(&d->nodes, d->nnodes, n, sizeof *d->nodes))
        return -1;
    uint32_t base = (uint32_t)d->nframes;
    memcpy(d->frames + base, frames, n * sizeof *frames);
    for (uint32_t j = 0; j < n; j++)
        d->nodes[base + j] = (struct vm_node){j + 1 < n ? base + j + 1 : VM_NO_NODE, base + j};
    d->nframes += n;
    d->nnodes += n;
    st->node = base;
    st->nframes = (uint32_t)n;
    return 0;
}

int vm_tree_ready(struct vm_dump *d) {
    free(d->flat);
    free(d->scratch);
    size_t deepest = 1;
    for (size_t i = 0; i < d->nstacks; i++)
        if (d->stacks[i].nframes > deepest) deepest = d->stacks[i].nframes;
    d->flat = malloc(deepest * sizeof *d->flat);
    d->scratch = malloc(deepest * sizeof *d->scratch);
    return d->flat && d->scratch ? 0 : -1;
}
