/* t_libfini_lib.cc -- a library the program links that keeps GPU memory in
 * two globals and frees it in their ends: a C++ object's destructor
 * (registered with __cxa_atexit at load) and a C destructor function. The
 * loader finalizes it after vramtrace's own destructor (unrelated to
 * vramtrace, loaded after it), so vramtrace's exit check must wait for
 * them: nothing leaks (tests/integration/test_exitorder.py). */
#include <cuda_runtime_api.h>
#include <stdio.h>

namespace {
struct Cache {
    void *p = nullptr;
    void use() {
        if (!p) cudaMalloc(&p, 4096);
    }
    ~Cache() {
        int rc = cudaFree(p);
        printf("library object's destructor: free %d\n", rc);
        fflush(stdout);
    }
};
Cache cache;
void *kept;
}  // namespace

extern "C" void libfini_use(void) {
    cache.use();
    if (!kept) cudaMalloc(&kept, 8192);
}

__attribute__((destructor)) static void release(void) {
    int rc = cudaFree(kept);
    printf("library destructor: free %d\n", rc);
    fflush(stdout);
}
