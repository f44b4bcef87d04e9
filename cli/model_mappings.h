/* model_mappings.h -- the dump's history of VMM mappings ("mappings",
 * "mapping_fields", "mappings_total") read back and checked. Optional: a
 * dump without them (any of an earlier vramtrace) has none. */
#ifndef VT_MODEL_MAPPINGS_H
#define VT_MODEL_MAPPINGS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* A mapping of a VMM handle, as docs/dump-format.md's "mappings" has it:
 * the handle, the address and bytes mapped, the handle's device, its time
 * and its place among the dump's events (the index of the first event
 * after it: nevents when none, -1 when the ring overwrote it), and the
 * same two of its unmap (`unmapped` 0: still mapped at the dump, the two
 * 0). Rows are in the order the mappings were made, so `event` never goes
 * back from one to the next. */
struct vm_mapping {
    uint64_t handle, address, bytes;
    uint64_t time_ns, unmap_ns;
    int64_t event, unmap_event;
    int16_t device;          /* -1 .. 4095 */
    uint8_t unmapped;
};

/* The mappings of a dump whose events number nevents into *out
 * (malloc'd, *n of them; NULL and 0 when it has none) and
 * "mappings_total" into *total: from the text at `at` (len bytes: a
 * version 2 dump's array, cut out of the document) or, with at NULL, from
 * root's "mappings" (version 1). "mapping_fields" (in root) must be the
 * list this vramtrace writes. Returns 0, or -1 with a one-line reason in
 * err and nothing to free. */
int vm_mappings_load(const char *at, size_t len, json_t *root, size_t nevents, struct vm_mapping **out, size_t *n,
                     uint64_t *total, char *err, size_t errsize);

#endif
