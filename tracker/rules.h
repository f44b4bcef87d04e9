/* rules.h -- the table of unwind rules by code address, shared by every
 * thread's walks.
 *
 * Internal to tracker/walker.c and tracker/rules.c. A rule (cfi.h) is read
 * once from the .eh_frame the loader mapped and kept in a table that threads
 * read without a lock; only a miss takes the rule lock, to compute it. */
#ifndef VT_RULES_H
#define VT_RULES_H

#include <stdint.h>
#include <string.h>

#include "blocks.h"
#include "cfi.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))

/* One entry of the rule table: a code address and its rule. */
struct vt_rule_entry {
    uintptr_t ip; /* 0: empty; written last, with release order */
    uint64_t rule;
};

#define VT_RULES_BITS 16
#define VT_RULES_SIZE (1u << VT_RULES_BITS)
#define VT_RULES_PROBES 32

/* The table (NULL until vt_rules_init maps it), and its generation: a
 * dlclose empties the table and bumps the generation, so that threads drop
 * the rules they remember too. */
extern struct vt_rule_entry *vt_rules VT_HIDDEN;
extern uint64_t vt_rules_generation VT_HIDDEN;

/* Which 4 KiB blocks of the table were written since it was mapped or
 * emptied, a bit each (blocks.h; set under the rule lock, cleared when a
 * dlclose empties the table): a look-up never reads a block never written
 * (with 256 threads starting at once, their first calls' reads did). */
#define VT_RULES_BLOCK (4096 / sizeof(struct vt_rule_entry))
extern uint64_t vt_rules_written[VT_BLOCK_WORDS(VT_RULES_SIZE / VT_RULES_BLOCK)] VT_HIDDEN;

static inline int vt_rules_block_written(uint32_t i) {
    return vt_block_written(vt_rules_written, i / (uint32_t)VT_RULES_BLOCK);
}

static inline uint32_t vt_rules_slot(uintptr_t ip) {
    return (uint32_t)(((uint64_t)ip * 0x9e3779b97f4a7c15ull) >> (64 - VT_RULES_BITS));
}

/* The cached rule for code address `ip` into `out`; 0 when not cached. */
static inline int vt_rules_lookup(const struct vt_rule_entry *t, uintptr_t ip, struct vt_rule *out) {
    uint32_t i = vt_rules_slot(ip);
    for (int p = 0; p < VT_RULES_PROBES; p++, i = (i + 1) & (VT_RULES_SIZE - 1)) {
        if ((p == 0 || i % VT_RULES_BLOCK == 0) && !vt_rules_block_written(i)) return 0; /* all empty */
        uintptr_t k = __atomic_load_n(&t[i].ip, __ATOMIC_ACQUIRE);
        if (k == ip) {
            uint64_t r = __atomic_load_n(&t[i].rule, __ATOMIC_ACQUIRE);
            /* Still the same entry? (A dlclose may have emptied it, and a
             * new rule taken it, between the two loads.) */
            if (__atomic_load_n(&t[i].ip, __ATOMIC_RELAXED) != ip) return 0;
            memcpy(out, &r, sizeof r);
            return 1;
        }
        if (k == 0) return 0;
    }
    return 0;
}

/* The rule for `pc` (a return address minus one), computed from the CFI
 * under the rule lock and cached; VT_RULE_OTHER when there is none. */
struct vt_rule vt_rules_compute(uintptr_t pc) VT_HIDDEN;

/* Map the table (once). */
void vt_rules_init(void) VT_HIDDEN;

/* Empty the table (code was unloaded) and bump the generation. */
void vt_rules_forget(void) VT_HIDDEN;

/* Around fork: the rule lock is held across it. */
void vt_rules_fork_prepare(void) VT_HIDDEN;
void vt_rules_fork_done(void) VT_HIDDEN;

#endif
