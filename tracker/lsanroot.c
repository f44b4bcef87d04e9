/* lsanroot.c -- vramtrace's own mappings shown to LeakSanitizer
 * (lsanroot.h). */
#include "lsanroot.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#define REGISTER __lsan_register_root_region
#define UNREGISTER __lsan_unregister_root_region
#else
#define REGISTER NULL
#define UNREGISTER NULL
#endif

typedef void region_fn(const void *p, size_t bytes);
static region_fn *reg = REGISTER, *unreg = UNREGISTER;

void vt_lsan_find(void *(*lookup)(const char *name)) {
    if (reg) return; /* found already, or the library's own runtime */
    region_fn *r, *u;
    *(void **)&r = lookup("__lsan_register_root_region");
    *(void **)&u = lookup("__lsan_unregister_root_region");
    if (r && u) {
        unreg = u;
        reg = r;
    }
}

void vt_lsan_root(const void *p, size_t bytes) {
    if (reg && p && bytes) reg(p, bytes);
}

void vt_lsan_unroot(const void *p, size_t bytes) {
    if (unreg && p && bytes) unreg(p, bytes);
}
