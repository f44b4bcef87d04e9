/* model_torch.h -- the dump's "torch" arrays (PyTorch's own view of its
 * memory, written by the library from the companion's records) read back
 * and checked, for the report writers. Optional: dumps without them read
 * as before. Strings point into the parsed JSON. */
#ifndef VT_MODEL_TORCH_H
#define VT_MODEL_TORCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#define VM_TORCH_NCAT 6
extern const char *const vm_torch_categories[VM_TORCH_NCAT];

struct vm_torch_tensor {
    uint64_t bytes, block, segment;
    const char *shape, *dtype, *category, *name, *holder;
    int has_stack;
    size_t stack;
};

struct vm_torch_device {
    int device, has_outside, has_request, has_free;
    int request_rounded;                /* request is PyTorch's error's two-decimal figure */
    uint64_t allocated, reserved, largest_free, outside, request, steps;
    uint64_t free_bytes, total_bytes;   /* read only together: has_free */
    uint64_t cat[VM_TORCH_NCAT];   /* in vm_torch_categories' order; 0 when absent */
    uint64_t per_step, growth_steps;   /* the growth per step and its steps; 0 when absent */
    /* The library's growing site whose holder these tensors are ("growth";
     * has_growth 0 when null or absent): its stack, unit ("step" or
     * "allocation", static), units, rise per unit, rise, span and holder. */
    int has_growth;
    size_t growth_stack;
    const char *growth_unit, *growth_holder;
    uint64_t growth_units, growth_per_unit, growth_rise, growth_span_ns;
    uint64_t growth_run_steps, growth_history_from_ns; /* as struct vm_growth's; 0 when absent */
    const char *settings;          /* NULL when absent */
    struct vm_torch_tensor *tensors;
    size_t ntensors;
};

struct vm_torch {
    struct vm_torch_device *devices;
    size_t ndevices;
};

/* The "torch" field of object o (the dump or one of its ooms): *out NULL
 * when o has none; else a checked, malloc'd vm_torch (vm_torch_free).
 * Returns 0, or -1 with a one-line reason in err. */
int vm_torch_load(json_t *o, size_t nstacks, struct vm_torch **out, char *err, size_t errsize);
void vm_torch_free(struct vm_torch *t);

#endif
