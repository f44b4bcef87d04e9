/* stack.c -- native stack capture with libunwind. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <execinfo.h>
#include <link.h>
#include <string.h>

#include "stack.h"

/* The text of this library, whose frames a stack must not show. */
static uintptr_t self_lo, self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            self_lo = lo;
            self_hi = hi;
            return 1;
        }
    }
    return 0;
}

void vt_stack_init(void) {
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&vt_stack_init);
}

int vt_stack_capture(uintptr_t *out, int max) {
    void *buf[VT_STACK_MAX + 16];
    int want = max + 16;
    if (want > (int)(sizeof buf / sizeof buf[0])) want = (int)(sizeof buf / sizeof buf[0]);
#ifdef VT_TSAN_BUILD
    /* The TSan build checks vramtrace's own locking; libunwind's per-thread
     * cache is freed by a thread-exit destructor that runs after TSan has
     * let go of the thread, so it unwinds with glibc's backtrace instead. */
    int n = backtrace(buf, want);
#else
    int n = unw_backtrace(buf, want);
#endif
    int i = 0;
    /* Our own frames are the innermost ones: the hook and its helpers. */
    while (i < n && (uintptr_t)buf[i] >= self_lo && (uintptr_t)buf[i] < self_hi) i++;
    int depth = 0;
    for (; i < n && depth < max; i++) out[depth++] = (uintptr_t)buf[i];
    return depth;
}
