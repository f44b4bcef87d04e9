/* t_inline_part.c -- a unit built by GCC, linked into t_inline_mixed with
 * t_inline.c built by clang: GCC writes .debug_aranges for its unit,
 * clang none for its own, so the binary's aranges list one unit of two;
 * and this unit's cold part (.text.unlikely, inline_part.cold) lies before
 * clang's code and its hot part after it, so clang's code lies between
 * two ranges of this unit (tests/integration/test_inline.py). */
#include <stdlib.h>

int inline_part(int x);
__attribute__((noinline)) int inline_part(int x) {
    if (__builtin_expect(x > 1000000, 0)) {
        if (getenv("VRAMTRACE_TEST_NEVER")) abort();
        return x * 7;
    }
    return x * 3 + 1;
}
