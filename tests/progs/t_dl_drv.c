/* t_dl_drv.c -- a stand-in driver, built twice (libt_dl_drva.so with
 * DRV_BASE 0xa0000000, libt_dl_drvb.so with 0xb0000000): each hands out
 * addresses from its own range and counts its calls. */
#include <stddef.h>

#define DRV_EXPORT __attribute__((visibility("default")))

static int calls;
static unsigned long long next = DRV_BASE;

DRV_EXPORT int cuMemAlloc_v2(unsigned long long *p, size_t n) {
    calls++;
    *p = next;
    next += (n + 4095) & ~(size_t)4095;
    return 0;
}

DRV_EXPORT int cuMemFree_v2(unsigned long long p) {
    calls++;
    return p >= DRV_BASE && p < next ? 0 : 1;
}

DRV_EXPORT int drv_calls(void) { return calls; }
