/* model_steps.h -- the dump's step boundaries ("steps", "steps_total")
 * read back and checked. Optional: a dump without them has none. */
#ifndef VT_MODEL_STEPS_H
#define VT_MODEL_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct vm_step {
    uint64_t step;      /* 1 and up, increasing */
    uint64_t time_ns;
    int64_t event;      /* index in the dump's events of the first event
                           after the boundary; nevents when none yet, -1
                           when the ring overwrote it */
};

/* The "steps" array of dump root (whose events number nevents) into
 * *steps (malloc'd, *n of them; NULL and 0 when the dump has none) and
 * "steps_total" into *total. Returns 0, or -1 with a one-line reason in
 * err and nothing to free. */
int vm_steps_load(json_t *root, size_t nevents, struct vm_step **steps, size_t *n, uint64_t *total, char *err,
                  size_t errsize);

/* A growing site's unit of work (struct vm_growth in model.h): the dump's
 * "unit" ("step", "second" or "allocation"), "units" and "bytes_per_unit"
 * when all three are there and sound, with "rise_bytes" and "span_ns" when
 * those are too (else the whole growth: end_bytes - first_bytes, last_ns -
 * since_ns), else allocations and bytes_per_allocation; "run_steps" with
 * the unit "step" and "history_from_ns" (0 when absent);
 * and its "holder" (NULL when absent or ""). */
struct vm_growth;
void vm_growth_unit(json_t *o, struct vm_growth *g);

#endif
