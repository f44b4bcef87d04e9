/* t_reset.c -- memory a device reset gives back without a free.
 *
 *   t_reset          before_reset leaks 3 x 1 MiB (cudaMalloc, from two
 *                    lines of main: two stacks of one call site) and 512 KiB
 *                    (cudaMallocAsync), pinned_host keeps 4 KiB of pinned
 *                    host memory; cudaDeviceReset(); after_reset takes and
 *                    frees 1 MiB (at an address a leak had: the device
 *                    has it back), then after_leak keeps 8 KiB. Prints the
 *                    device's free bytes before and after the reset,
 *                    whether after_reset got a leak's address, whether the
 *                    driver still knows the pinned memory (destroyed by the
 *                    reset) and the stream-ordered memory (not destroyed),
 *                    and whether the pinned memory's free succeeded.
 *   t_reset clean    frees everything (before the reset what it took then)
 *   t_reset ctx      first makes a context of its own (cuCtxCreate, through
 *                    dlsym of libcuda.so.1) and 1 MiB in it (own_context),
 *                    then before_reset's 1 MiB in the primary context, a
 *                    reset, and frees own_context's memory after it: prints
 *                    whether that free succeeded
 *   t_reset release  driver API: retains device 0's primary context twice,
 *                    takes 1 MiB (before_release), releases once (memory
 *                    still there), takes 2 MiB more, releases the last
 *                    reference (the context resets: all 3 MiB given back),
 *                    releases once more (not retained: fails), retains
 *                    again and keeps 8 KiB (after_leak). Prints the
 *                    device's free bytes and the release results.
 *   t_reset reuse    a library's own context, made and destroyed
 *                    (lib_probe, through dlsym of libcuda.so.1); then a
 *                    test that leaks 4 MiB (leaky_test), a reset; the next
 *                    test (clean_test) takes 4 MiB and frees it, and a
 *                    reset. Prints whether clean_test got the leak's
 *                    address (the device has it back).
 *   t_reset reuse thread   the same, clean_test on a thread of its own
 *   t_reset ctxrt    makes a context of its own (cuCtxCreate) and leaves it
 *                    current: the runtime's 2 MiB is made in it, the
 *                    runtime's reset leaves it, its free after succeeds
 *   t_reset graph    a CUDA graph's allocation node of 4 MiB (graph_alloc),
 *                    launched, a reset, and the program's cudaFree of it
 *                    after the reset: prints each result and what the
 *                    device's graph pool uses before and after the free */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void *before_reset(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) return NULL;   /* before the reset */
    return p;
}

static void *before_reset_async(size_t n) {
    void *p = NULL;
    if (cudaMallocAsync(&p, n, 0) != cudaSuccess) return NULL;
    return p;
}

static void *pinned_host(size_t n) {
    void *p = NULL;
    if (cudaMallocHost(&p, n) != cudaSuccess) return NULL;
    return p;
}

static void *after_reset(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) return NULL;
    return p;
}

static void *after_leak(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) return NULL;   /* kept */
    return p;
}

static int own_context(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 1;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*create)(CUcontext *, unsigned, CUdevice) =
        (CUresult(*)(CUcontext *, unsigned, CUdevice))dlsym(h, "cuCtxCreate_v2");
    CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
    CUresult (*pop)(CUcontext *) = (CUresult(*)(CUcontext *))dlsym(h, "cuCtxPopCurrent_v2");
    CUresult (*mfree)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))dlsym(h, "cuMemFree_v2");
    CUcontext ctx;
    CUdeviceptr own;
    if (!init || !create || !alloc || !pop || !mfree || init(0) || create(&ctx, 0, 0) || alloc(&own, 1 << 20) ||
        pop(NULL))
        return 1;
    if (!before_reset(1 << 20)) return 1;
    if (cudaDeviceReset() != cudaSuccess) return 2;
    printf("own context's memory freed %d\n", mfree(own) == CUDA_SUCCESS);
    return 0;
}

/* A context of the program's own left current: the runtime's calls "operate
 * on that CUcontext", and its cudaDeviceReset "will destroy only the
 * internal CUDA RT state for that CUcontext" (cuda_runtime_api.h): the
 * runtime's allocation (in_own_context) is freed after the reset. */
static int runtime_in_own_context(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 1;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*create)(CUcontext *, unsigned, CUdevice) =
        (CUresult(*)(CUcontext *, unsigned, CUdevice))dlsym(h, "cuCtxCreate_v2");
    CUresult (*attribute)(void *, CUpointer_attribute, CUdeviceptr) =
        (CUresult(*)(void *, CUpointer_attribute, CUdeviceptr))dlsym(h, "cuPointerGetAttribute");
    CUcontext ctx, made_in = NULL;
    if (!init || !create || !attribute || init(0) || create(&ctx, 0, 0)) return 1;
    void *p = NULL;
    if (cudaMalloc(&p, 2 << 20) != cudaSuccess) return 1;   /* in_own_context */
    attribute(&made_in, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)p);
    printf("made in its own context %d\n", made_in == ctx);
    printf("reset %d\n", (int)cudaDeviceReset());
    printf("free after the reset %d\n", (int)cudaFree(p));
    return 0;
}

/* The driver, reached through dlsym of libcuda.so.1 (as own_context). */
static struct {
    CUresult (*init)(unsigned);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*info)(size_t *, size_t *);
} drv;

static CUdeviceptr before_release(size_t n) {
    CUdeviceptr p = 0;
    if (drv.alloc(&p, n) != CUDA_SUCCESS) return 0;   /* before the release */
    return p;
}

static size_t free_bytes(void) {
    size_t f = 0, t = 0;
    drv.info(&f, &t);
    return f;
}

static int release(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 1;
    *(void **)&drv.init = dlsym(h, "cuInit");
    *(void **)&drv.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&drv.release = dlsym(h, "cuDevicePrimaryCtxRelease_v2");
    *(void **)&drv.set = dlsym(h, "cuCtxSetCurrent");
    *(void **)&drv.alloc = dlsym(h, "cuMemAlloc_v2");
    *(void **)&drv.info = dlsym(h, "cuMemGetInfo_v2");
    CUcontext c;
    if (!drv.init || !drv.retain || !drv.release || !drv.set || !drv.alloc || !drv.info || drv.init(0) ||
        drv.retain(&c, 0) || drv.retain(&c, 0) || drv.set(c))
        return 1;
    if (!before_release(1 << 20)) return 1;
    int r = drv.release(0);
    printf("first release %d, free %zu\n", r, free_bytes());
    if (!before_release(2 << 20)) return 1;
    r = drv.release(0);
    printf("last release %d, free %zu\n", r, free_bytes());
    printf("release again %d\n", drv.release(0));
    if (drv.retain(&c, 0) || drv.set(c)) return 1;
    return after_leak(8192) ? 0 : 4;
}

/* A library that briefly uses a context of its own. */
static int lib_probe(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 1;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*create)(CUcontext *, unsigned, CUdevice) =
        (CUresult(*)(CUcontext *, unsigned, CUdevice))dlsym(h, "cuCtxCreate_v2");
    CUresult (*destroy)(CUcontext) = (CUresult(*)(CUcontext))dlsym(h, "cuCtxDestroy_v2");
    CUcontext ctx;
    if (!init || !create || !destroy || init(0) || create(&ctx, 0, 0) || destroy(ctx)) return 1;
    return 0;
}

static void *leaky_test(void) {
    void *p = NULL;
    if (cudaMalloc(&p, 4 << 20) != cudaSuccess) return NULL;   /* never freed */
    return p;
}

static void *clean_test(void *unused) {
    (void)unused;
    void *p = NULL;
    if (cudaMalloc(&p, 4 << 20) != cudaSuccess) return NULL;
    cudaFree(p);
    return p;
}

static int reuse(int on_thread) {
    if (lib_probe()) return 1;
    void *leak = leaky_test();
    if (!leak) return 1;
    if (cudaDeviceReset() != cudaSuccess) return 2;
    void *p = NULL;
    pthread_t t;
    if (!on_thread) p = clean_test(NULL);
    else if (pthread_create(&t, NULL, clean_test, NULL) || pthread_join(t, &p)) return 3;
    if (!p) return 3;
    printf("the leak's address %d\n", p == leak);
    return cudaDeviceReset() == cudaSuccess ? 0 : 2;
}

/* A graph's allocation, freed after a reset (stream-ordered memory, from
 * the device's graph pool: the reset leaves it). */
static int graph_alloc(void) {
    cudaGraph_t g;
    cudaGraphNode_t n;
    cudaGraphExec_t ge;
    struct cudaMemAllocNodeParams np;
    memset(&np, 0, sizeof np);
    np.poolProps.allocType = cudaMemAllocationTypePinned;
    np.poolProps.location.type = cudaMemLocationTypeDevice;
    np.poolProps.location.id = 0;
    np.bytesize = 4 << 20;
    if (cudaFree(0) || cudaGraphCreate(&g, 0) || cudaGraphAddMemAllocNode(&n, g, NULL, 0, &np) ||
        cudaGraphInstantiate(&ge, g, 0) || cudaGraphLaunch(ge, 0) || cudaStreamSynchronize(0))
        return 1;
    size_t used = 0;
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used);
    printf("graph pool used %zu\n", used);
    printf("reset %d\n", (int)cudaDeviceReset());
    printf("free after the reset %d\n", (int)cudaFree(np.dptr));
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used);
    printf("graph pool used %zu\n", used);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "ctx") == 0) return own_context();
    if (argc > 1 && strcmp(argv[1], "graph") == 0) return graph_alloc();
    if (argc > 1 && strcmp(argv[1], "ctxrt") == 0) return runtime_in_own_context();
    if (argc > 1 && strcmp(argv[1], "reuse") == 0) return reuse(argc > 2 && strcmp(argv[2], "thread") == 0);
    if (argc > 1 && strcmp(argv[1], "release") == 0) return release();
    int clean = argc > 1 && strcmp(argv[1], "clean") == 0;
    void *kept[3], *a, *h;
    for (int i = 0; i < 2; i++)
        if (!(kept[i] = before_reset(1 << 20))) return 1;
    if (!(kept[2] = before_reset(1 << 20))) return 1;
    if (!(a = before_reset_async(512 << 10)) || !(h = pinned_host(4096))) return 1;
    if (clean) {
        for (int i = 0; i < 3; i++) cudaFree(kept[i]);
        cudaFreeAsync(a, 0);
        cudaDeviceSynchronize();
        cudaFreeHost(h);
    }
    size_t free_b = 0, total = 0;
    cudaMemGetInfo(&free_b, &total);
    printf("free before %zu\n", free_b);
    if (cudaDeviceReset() != cudaSuccess) return 2;
    cudaMemGetInfo(&free_b, &total);
    printf("free after %zu\n", free_b);
    void *p = after_reset(1 << 20);
    if (!p) return 3;
    printf("a leak's address %d\n", p == kept[0] || p == kept[1] || p == kept[2]);
    cudaFree(p);
    void *k = after_leak(8192);
    if (!k) return 4;
    if (clean) cudaFree(k);
    else {
        /* The reset destroyed the pinned memory ("memory allocations by
         * ... cudaMallocHost"), not the stream-ordered memory ("will not
         * destroy memory allocations by cudaMallocAsync()"): what the
         * driver still knows of each, then the pinned memory's free. */
        struct cudaPointerAttributes pa, aa;
        int pinned_known = cudaPointerGetAttributes(&pa, h) == cudaSuccess && pa.type == cudaMemoryTypeHost;
        int async_known = cudaPointerGetAttributes(&aa, a) == cudaSuccess && aa.type == cudaMemoryTypeDevice;
        printf("after the reset: pinned memory known %d, stream-ordered memory known %d\n", pinned_known, async_known);
        printf("pinned memory freed after the reset %d\n", cudaFreeHost(h) == cudaSuccess);
    }
    return 0;
}
