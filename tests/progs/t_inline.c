/* t_inline.c -- an allocation made in functions the compiler inlined,
 * built with -O2 as a library is (tests/integration/test_inline.py).
 *
 * grab_inner is inlined into grab_outer, which is inlined into pool_fill:
 * the allocation's return address is in pool_fill's code, and each of the
 * three functions has its own frame in a report, its own line. The
 * markers name the lines the test looks for. */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

static inline __attribute__((always_inline)) CUresult grab_inner(size_t bytes) {
    CUdeviceptr p;
    CUresult r = cuMemAlloc_v2(&p, bytes); /* LINE:alloc */
    __asm__ volatile("" : : : "memory");
    return r;
}

static inline __attribute__((always_inline)) CUresult grab_outer(size_t bytes) {
    CUresult r = grab_inner(bytes * 2); /* LINE:inner */
    __asm__ volatile("" : : : "memory");
    return r;
}

__attribute__((noinline)) CUresult pool_fill(size_t bytes) {
    CUresult r = grab_outer(bytes); /* LINE:outer */
    __asm__ volatile("" : : : "memory");
    return r;
}

/* A frame of its own, not inlined: the stack goes on past the inlined
 * ones as before. */
__attribute__((noinline)) int fill_twice(void) {
    int bad = 0;
    for (int i = 0; i < 2; i++) bad |= pool_fill(1000 + (size_t)i) != CUDA_SUCCESS; /* LINE:twice */
    __asm__ volatile("" : : : "memory");
    return bad;
}

/* ------------------------------------------------------------ deep */

/* Forty functions inlined one into the next: deeper than a chain keeps
 * (32 frames at one address), so the innermost are kept, and deep_top at
 * the line it calls deep39. */
static inline __attribute__((always_inline)) CUresult deep0(size_t b) { CUdeviceptr p; CUresult r = cuMemAlloc_v2(&p, b); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep0 */
static inline __attribute__((always_inline)) CUresult deep1(size_t b) { CUresult r = deep0(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep1 */
static inline __attribute__((always_inline)) CUresult deep2(size_t b) { CUresult r = deep1(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep2 */
static inline __attribute__((always_inline)) CUresult deep3(size_t b) { CUresult r = deep2(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep3 */
static inline __attribute__((always_inline)) CUresult deep4(size_t b) { CUresult r = deep3(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep4 */
static inline __attribute__((always_inline)) CUresult deep5(size_t b) { CUresult r = deep4(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep5 */
static inline __attribute__((always_inline)) CUresult deep6(size_t b) { CUresult r = deep5(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep6 */
static inline __attribute__((always_inline)) CUresult deep7(size_t b) { CUresult r = deep6(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep7 */
static inline __attribute__((always_inline)) CUresult deep8(size_t b) { CUresult r = deep7(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep8 */
static inline __attribute__((always_inline)) CUresult deep9(size_t b) { CUresult r = deep8(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep9 */
static inline __attribute__((always_inline)) CUresult deep10(size_t b) { CUresult r = deep9(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep10 */
static inline __attribute__((always_inline)) CUresult deep11(size_t b) { CUresult r = deep10(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep11 */
static inline __attribute__((always_inline)) CUresult deep12(size_t b) { CUresult r = deep11(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep12 */
static inline __attribute__((always_inline)) CUresult deep13(size_t b) { CUresult r = deep12(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep13 */
static inline __attribute__((always_inline)) CUresult deep14(size_t b) { CUresult r = deep13(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep14 */
static inline __attribute__((always_inline)) CUresult deep15(size_t b) { CUresult r = deep14(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep15 */
static inline __attribute__((always_inline)) CUresult deep16(size_t b) { CUresult r = deep15(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep16 */
static inline __attribute__((always_inline)) CUresult deep17(size_t b) { CUresult r = deep16(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep17 */
static inline __attribute__((always_inline)) CUresult deep18(size_t b) { CUresult r = deep17(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep18 */
static inline __attribute__((always_inline)) CUresult deep19(size_t b) { CUresult r = deep18(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep19 */
static inline __attribute__((always_inline)) CUresult deep20(size_t b) { CUresult r = deep19(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep20 */
static inline __attribute__((always_inline)) CUresult deep21(size_t b) { CUresult r = deep20(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep21 */
static inline __attribute__((always_inline)) CUresult deep22(size_t b) { CUresult r = deep21(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep22 */
static inline __attribute__((always_inline)) CUresult deep23(size_t b) { CUresult r = deep22(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep23 */
static inline __attribute__((always_inline)) CUresult deep24(size_t b) { CUresult r = deep23(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep24 */
static inline __attribute__((always_inline)) CUresult deep25(size_t b) { CUresult r = deep24(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep25 */
static inline __attribute__((always_inline)) CUresult deep26(size_t b) { CUresult r = deep25(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep26 */
static inline __attribute__((always_inline)) CUresult deep27(size_t b) { CUresult r = deep26(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep27 */
static inline __attribute__((always_inline)) CUresult deep28(size_t b) { CUresult r = deep27(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep28 */
static inline __attribute__((always_inline)) CUresult deep29(size_t b) { CUresult r = deep28(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep29 */
static inline __attribute__((always_inline)) CUresult deep30(size_t b) { CUresult r = deep29(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep30 */
static inline __attribute__((always_inline)) CUresult deep31(size_t b) { CUresult r = deep30(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep31 */
static inline __attribute__((always_inline)) CUresult deep32(size_t b) { CUresult r = deep31(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep32 */
static inline __attribute__((always_inline)) CUresult deep33(size_t b) { CUresult r = deep32(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep33 */
static inline __attribute__((always_inline)) CUresult deep34(size_t b) { CUresult r = deep33(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep34 */
static inline __attribute__((always_inline)) CUresult deep35(size_t b) { CUresult r = deep34(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep35 */
static inline __attribute__((always_inline)) CUresult deep36(size_t b) { CUresult r = deep35(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep36 */
static inline __attribute__((always_inline)) CUresult deep37(size_t b) { CUresult r = deep36(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep37 */
static inline __attribute__((always_inline)) CUresult deep38(size_t b) { CUresult r = deep37(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep38 */
static inline __attribute__((always_inline)) CUresult deep39(size_t b) { CUresult r = deep38(b + 1); __asm__ volatile("" : : : "memory"); return r; } /* LINE:deep39 */

__attribute__((noinline)) CUresult deep_top(void) {
    CUresult r = deep39(100); /* LINE:deeptop */
    __asm__ volatile("" : : : "memory");
    return r;
}

/* ----------------------------------------------------------- clone */

/* A function GCC clones (its unused argument dropped, its constant one
 * propagated: "clone_fill.constprop.0" or ".isra.0" in the symbol table):
 * reports name the function. */
static __attribute__((noinline)) CUresult clone_fill(size_t bytes, int unused) {
    CUresult r = grab_outer(bytes); /* LINE:clone */
    __asm__ volatile("" : : : "memory");
    return r;
}

/* ---------------------------------------------------------- nested */

#ifndef __clang__
/* A GNU C nested function: its code lies outside its parent's, its DWARF
 * inside it (as GCC's OpenMP outlined functions). */
static int nested(void) {
    int bad = 0;
    __attribute__((noinline)) void inner(size_t k) {
        bad |= grab_inner(k) != CUDA_SUCCESS; /* LINE:nested */
        __asm__ volatile("" : : : "memory");
    }
    inner(3000);
    return bad;
}
#endif

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "deep") == 0) printf("deep -> %d\n", (int)deep_top());
    else if (strcmp(mode, "clone") == 0) printf("clone -> %d\n", (int)clone_fill(700, 5));
#ifndef __clang__
    else if (strcmp(mode, "nested") == 0) printf("nested -> %d\n", nested());
#endif
    else printf("fill -> %d\n", fill_twice());
    return 0;
}
