/* stacks.h -- distinct stacks for the C benchmarks that sit on many call
 * paths: deep(d, idx) recurses through d plain levels, then ten levels each
 * made by one of four functions (chosen by two bits of idx, so stacks share
 * their callers as a program's do), and last calls STACKS_LEAF(), which the
 * benchmark defines before it includes this. 4^10 distinct stacks at most.
 * outer(d, idx) is the other way up: the ten chosen levels first, then the
 * d plain ones, so that stacks differ near their outermost frames and share
 * no node of a prefix tree below them (a tree of frames per distinct stack). */
#ifndef VT_BENCH_STACKS_H
#define VT_BENCH_STACKS_H

#ifndef STACKS_LEAF
#error "define STACKS_LEAF() first"
#endif

/* Level functions: each calls the next level through its own call site. */
typedef long level_fn(int, unsigned);
static level_fn *levels[4];
static int stacks_below; /* plain levels below the chosen ones: outer()'s d */
__attribute__((noinline)) static long plain(int d) {
    if (d <= 0) return STACKS_LEAF();
    long r = plain(d - 1);
    __asm__ volatile("" : : : "memory");
    return r + 1;
}
static long level(int d, unsigned idx) { return d ? levels[idx & 3](d - 1, idx >> 2) :
                                      stacks_below ? plain(stacks_below - 1) : STACKS_LEAF(); }
#define LEVEL(k) __attribute__((noinline)) static long level##k(int d, unsigned idx) { \
        long r = level(d, idx); __asm__ volatile("" : : : "memory"); return r + k; }
LEVEL(0) LEVEL(1) LEVEL(2) LEVEL(3)
static level_fn *levels[4] = {level0, level1, level2, level3};

__attribute__((noinline)) static long deep(int d, unsigned idx) {
    if (d <= 0) return level(10, idx);
    long r = deep(d - 1, idx);
    __asm__ volatile("" : : : "memory");
    return r + 1;
}

__attribute__((noinline, unused)) static long outer(int d, unsigned idx) {
    stacks_below = d;
    long r = level(10, idx);
    stacks_below = 0;
    return r;
}

#endif
