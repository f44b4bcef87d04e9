/* stack_plugin.c -- a library test_stack loads and unloads: frames from
 * code that came after the walker's first look at the process. */
#include <stdint.h>

typedef int (*capture_fn)(uintptr_t *a, int *na, uintptr_t *b, int *nb);

__attribute__((noinline)) int plugin_call(capture_fn f, uintptr_t *a, int *na, uintptr_t *b, int *nb, int depth) {
    if (depth > 0) {
        int r = plugin_call(f, a, na, b, nb, depth - 1);
        __asm__ volatile("" : : : "memory");
        return r + 1;
    }
    return f(a, na, b, nb);
}
