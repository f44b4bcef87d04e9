/* t_lateglobal.c -- a libvramtrace.so loaded by dlopen RTLD_GLOBAL (argv[1]
 * its path) before the program's first CUDA call, so that the CUDA
 * libraries load after it: every route into the driver is taken and
 * allocations are left live. vramtrace stands behind the C library and
 * must see none of them (test_pytest.py). */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*proc_fn)(const char *, void **, int, cuuint64_t, void *);

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *vt = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!vt) return 3;
    int (*active)(void) = (int (*)(void))dlsym(vt, "vramtrace_active");
    int (*dump)(const char *, char *, size_t) = (int (*)(const char *, char *, size_t))dlsym(vt, "vramtrace_dump");
    printf("active %d\n", active());
    /* Its CUDA names, on its own handle. */
    printf("exports %s %s\n", dlsym(vt, "cudaMalloc") ? "cudaMalloc" : "-", dlsym(vt, "cuMemAlloc_v2") ? "cuMemAlloc_v2" : "-");

    /* The runtime, whose driver (dlopen, cuGetProcAddress) loads now. */
    void *a, *b, *host;
    printf("runtime %d %d %d %d\n", (int)cudaMalloc(&a, 1 << 20), (int)cudaMalloc(&b, 2 << 20), (int)cudaFree(a),
           (int)cudaMallocHost(&host, 4096));

    /* The driver's export, by dlsym on its handle. */
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    alloc_fn by_name = (alloc_fn)dlsym(cu, "cuMemAlloc_v2");
    CUdeviceptr p1 = 0, p2 = 0, p3 = 0;
    printf("driver export %d\n", (int)by_name(&p1, 4 << 20));

    /* cuGetProcAddress, as the runtime asks it. */
    proc_fn gpa = (proc_fn)dlsym(cu, "cuGetProcAddress_v2");
    void *by_proc = NULL;
    int r = (int)gpa("cuMemAlloc", &by_proc, 3020, 0, NULL);
    printf("cuGetProcAddress %d %s %d\n", r, by_proc == (void *)by_name ? "same" : "other",
           (int)((alloc_fn)by_proc)(&p2, 8 << 20));

    /* vramtrace's own dlsym, reached by name on its handle. */
    void *(*vt_dlsym)(void *, const char *) = (void *(*)(void *, const char *))dlsym(vt, "dlsym");
    alloc_fn through_vt = (alloc_fn)vt_dlsym(cu, "cuMemAlloc_v2");
    printf("its dlsym %s %d\n", through_vt == by_name ? "same" : "other", (int)through_vt(&p3, 16 << 20));

    char path[256] = "x";
    printf("dump %d '%s'\n", dump("late.json", path, sizeof path), path);
    return 0;
}
