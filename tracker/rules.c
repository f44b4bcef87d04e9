/* rules.c -- the rule table: one 8-byte unwind rule per code address.
 *
 * See rules.h. A rule is found inside dl_iterate_phdr, which keeps the
 * object from being unloaded meanwhile: PT_GNU_EH_FRAME gives the
 * .eh_frame_hdr where the loader mapped it, and cfi.c reads the rule from
 * there. */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>

#include "rules.h"

struct vt_rule_entry *vt_rules;
uint64_t vt_rules_generation;
uint64_t vt_rules_written[VT_BLOCK_WORDS(VT_RULES_SIZE / VT_RULES_BLOCK)];
static size_t table_used;
static pthread_mutex_t rule_lock = PTHREAD_MUTEX_INITIALIZER;

/* Rule lock held. A full probe run leaves the rule uncached. */
static void store(struct vt_rule_entry *t, uintptr_t ip, struct vt_rule r) {
    uint64_t v;
    memcpy(&v, &r, sizeof v);
    uint32_t i = vt_rules_slot(ip);
    for (int p = 0; p < VT_RULES_PROBES; p++, i = (i + 1) & (VT_RULES_SIZE - 1)) {
        int fresh = !vt_rules_block_written(i);
        if (fresh || t[i].ip == 0) {
            __atomic_store_n(&t[i].rule, v, __ATOMIC_RELAXED);
            __atomic_store_n(&t[i].ip, ip, __ATOMIC_RELEASE);
            if (fresh) vt_block_mark(vt_rules_written, i / (uint32_t)VT_RULES_BLOCK); /* look-ups may read it now */
            table_used++;
            return;
        }
        if (t[i].ip == ip) return;
    }
}

struct find {
    uintptr_t pc;
    struct vt_rule r;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct find *f = data;
    const ElfW(Phdr) *eh = NULL;
    int inside = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_EH_FRAME) eh = ph;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            if (f->pc >= lo && f->pc - lo < ph->p_memsz) inside = 1;
        }
    }
    if (!inside) return 0;
    if (eh) {
        const uint8_t *fde = vt_cfi_find_fde((const uint8_t *)(info->dlpi_addr + eh->p_vaddr), f->pc);
        if (fde) f->r = vt_cfi_rule(fde, f->pc);
    }
    return 1;
}

struct vt_rule vt_rules_compute(uintptr_t pc) {
    struct vt_rule r = {.flags = VT_RULE_OTHER, .known = 1};
    pthread_mutex_lock(&rule_lock);
    struct vt_rule_entry *t = vt_rules;
    if (t && !vt_rules_lookup(t, pc, &r)) {
        struct find f = {pc, {.flags = VT_RULE_OTHER, .known = 1}};
        dl_iterate_phdr(find_object, &f);
        r = f.r;
        store(t, pc, r);
    }
    pthread_mutex_unlock(&rule_lock);
    return r;
}

void vt_rules_forget(void) {
    pthread_mutex_lock(&rule_lock);
    if (vt_rules && table_used) {
        /* Private anonymous pages read as zeros once dropped: an empty
         * table, without a new mapping or a write to every entry. A reader
         * that meets an entry as it goes sees the entry change and misses. */
        for (size_t w = 0; w < sizeof vt_rules_written / sizeof vt_rules_written[0]; w++)
            __atomic_store_n(&vt_rules_written[w], 0, __ATOMIC_RELEASE);
        madvise(vt_rules, VT_RULES_SIZE * sizeof(struct vt_rule_entry), MADV_DONTNEED);
        table_used = 0;
    }
    __atomic_add_fetch(&vt_rules_generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rule_lock);
}

void vt_rules_fork_prepare(void) { pthread_mutex_lock(&rule_lock); }
void vt_rules_fork_done(void) { pthread_mutex_unlock(&rule_lock); }

void vt_rules_init(void) {
    pthread_mutex_lock(&rule_lock);
    if (!vt_rules) {
        void *m = mmap(NULL, VT_RULES_SIZE * sizeof(struct vt_rule_entry), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m != MAP_FAILED) __atomic_store_n(&vt_rules, (struct vt_rule_entry *)m, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&rule_lock);
}
