/* callsite.c -- telling CUDA's own frames from the program's. */
#include <string.h>

#include "callsite.h"

int vt_cuda_frame(const char *module, const char *function) {
    if (module) {
        const char *b = strrchr(module, '/');
        b = b ? b + 1 : module;
        if (strncmp(b, "libcuda.", 8) == 0 || strncmp(b, "libcudart", 9) == 0) return 1;
    }
    const char *fn = function;
    if (!fn) return 0;
    if (strncmp(fn, "__cudart", 8) == 0) return 1;
    if (strncmp(fn, "cuda", 4) == 0 && fn[4] >= 'A' && fn[4] <= 'Z') return 1;
    if (strncmp(fn, "cu", 2) == 0 && fn[2] >= 'A' && fn[2] <= 'Z') return 1;
    return 0;
}
