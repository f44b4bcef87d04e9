/* t_jit.c -- device memory allocated from code made at run time (a JIT's,
 * a libffi trampoline's): a few instructions in an anonymous executable
 * mapping call grab(), which allocates 1 MiB and leaks it. The mapping
 * goes where the kernel puts it: between libraries, where libdwfl's view
 * of the process took it for the library before it. Prints the return
 * address in that code. */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

__attribute__((noinline)) void grab(void) {
    CUdeviceptr p;
    cuMemAlloc(&p, 1 << 20);
    __asm__ volatile("" ::: "memory");
}

int main(void) {
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    uint8_t *code = mmap(NULL, 0x40000, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) return 2;
    /* push rbp; mov rbp, rsp; movabs rax, grab; call rax; pop rbp; ret */
    uint8_t insn[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xd0, 0x5d, 0xc3};
    uint64_t g = (uint64_t)(uintptr_t)grab;
    memcpy(insn + 6, &g, 8);
    memcpy(code + 0x100, insn, sizeof insn);
    ((void (*)(void))(code + 0x100))();
    printf("return address %p\n", (void *)(code + 0x110));
    return 0;
}
