/* rawsys.h -- a system call made without the C library, for the start of
 * every process an LD_PRELOAD reaches.
 *
 * Each C library function the library's start calls first is bound then
 * (lazy binding: a symbol look-up through every loaded object, about a
 * thousand instructions), and the code that runs while the dynamic linker
 * relocates the library may call nothing at all. These calls are the
 * system's own: the return value is the kernel's (a negative errno on
 * failure), and errno is left alone. x86-64 (the library's one target). */
#ifndef VT_RAWSYS_H
#define VT_RAWSYS_H

static inline long vt_sys3(long nr, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "0"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

static inline long vt_sys4(long nr, long a, long b, long c, long d) {
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(r) : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return r;
}

#endif
