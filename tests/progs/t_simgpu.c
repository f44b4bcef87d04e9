/* t_simgpu.c -- what the simulated GPU promises PyTorch, through the
 * stand-in runtime: more live allocations than the old fixed table held,
 * copies and sets that really move bytes, pointer attributes of interior
 * pointers, stream-ordered pools that keep freed memory until trimmed,
 * events, the last error, documented error strings and driver entry points
 * of names the driver lacks. Each line it prints is checked exactly. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t used(void) {
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    return t - f;
}

static void many(void) {
    enum { N = 100000 };
    void **p = malloc(N * sizeof *p);
    int ok = 0;
    for (int i = 0; i < N; i++) ok += cudaMalloc(&p[i], 64) == cudaSuccess;
    int freed = 0;
    for (int i = N - 1; i >= 0; i--) freed += cudaFree(p[i]) == cudaSuccess;
    printf("live %d freed %d used %zu\n", ok, freed, used());
    free(p);
}

static void copies(void) {
    unsigned char host[4096], back[4096];
    for (int i = 0; i < 4096; i++) host[i] = (unsigned char)(i * 7);
    unsigned char *d = NULL;
    cudaMalloc((void **)&d, sizeof host);
    cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
    cudaMemset(d + 100, 0xab, 10);
    void *d2 = NULL;
    cudaMalloc(&d2, sizeof host);
    cudaMemcpyAsync(d2, d, sizeof host, cudaMemcpyDeviceToDevice, 0);
    cudaMemcpy(back, d2, sizeof back, cudaMemcpyDeviceToHost);
    memset(host + 100, 0xab, 10);
    printf("copy %s\n", memcmp(host, back, sizeof host) == 0 ? "same" : "differs");
    struct cudaPointerAttributes a;
    cudaPointerGetAttributes(&a, d + 1000);
    printf("interior: type %d device %d\n", (int)a.type, a.device);
    cudaPointerGetAttributes(&a, host);
    printf("stack: type %d device %d\n", (int)a.type, a.device);
    void *pinned = NULL;
    cudaMallocHost(&pinned, 100);
    cudaPointerGetAttributes(&a, (char *)pinned + 10);
    printf("pinned: type %d\n", (int)a.type);
    cudaFreeHost(pinned);
    printf("bad direction -> %d\n", (int)cudaMemcpy(back, d, 1, (enum cudaMemcpyKind)9));
    cudaFree(d);
    cudaFree(d2);
}

static unsigned long long pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr) {
    unsigned long long v = 0;
    cudaMemPoolGetAttribute(pool, attr, &v);
    return v;
}

static void pools(void) {
    cudaMemPool_t pool;
    cudaDeviceGetDefaultMemPool(&pool, 0);
    unsigned long long keep = ~0ull;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    size_t before = used();
    void *p = NULL, *q = NULL;
    cudaMallocAsync(&p, 10 << 20, 0);
    cudaFreeAsync(p, 0);
    cudaStreamSynchronize(0);
    printf("pool after free: reserved %llu used %llu device %zu\n", pool_attr(pool, cudaMemPoolAttrReservedMemCurrent),
           pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), used() - before);
    cudaMallocAsync(&q, 4 << 20, 0);
    printf("pool reuse: reserved %llu used %llu device %zu\n", pool_attr(pool, cudaMemPoolAttrReservedMemCurrent),
           pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), used() - before);
    cudaFreeAsync(q, 0);
    cudaMemPoolTrimTo(pool, 0);
    printf("pool trimmed: reserved %llu high %llu device %zu\n", pool_attr(pool, cudaMemPoolAttrReservedMemCurrent),
           pool_attr(pool, cudaMemPoolAttrReservedMemHigh), used() - before);
    keep = 0;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    cudaMallocAsync(&p, 1 << 20, 0);
    cudaFreeAsync(p, 0);
    size_t held = used() - before;
    cudaStreamSynchronize(0);
    printf("threshold 0: held %zu until the synchronization, then %zu\n", held, used() - before);
    cudaMallocAsync(&p, 1 << 20, 0);
    cudaError_t r = cudaFree(p);
    unsigned long long in_use = pool_attr(pool, cudaMemPoolAttrUsedMemCurrent);
    r = r ? r : cudaFree(p);
    cudaGetLastError();
    cudaDeviceSynchronize();
    printf("cudaFree of pool memory: used %llu; again -> %d; device %zu after a synchronization\n", in_use, (int)r,
           used() - before);
}

static void events(void) {
    cudaEvent_t a, b, c;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventCreateWithFlags(&c, cudaEventDisableTiming);
    float ms = -1;
    printf("unrecorded elapsed -> %d\n", (int)cudaEventElapsedTime(&ms, a, b));
    cudaEventRecord(a, 0);
    cudaEventRecord(b, 0);
    cudaEventRecord(c, 0);
    cudaError_t r = cudaEventElapsedTime(&ms, a, b);
    printf("elapsed -> %d, not negative %d\n", (int)r, ms >= 0);
    printf("no timing -> %d\n", (int)cudaEventElapsedTime(&ms, a, c));
    cudaError_t last = cudaGetLastError();
    printf("last error %d, then %d\n", (int)last, (int)cudaGetLastError());
    r = cudaEventQuery(b);
    printf("query %d synchronize %d\n", (int)r, (int)cudaEventSynchronize(b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaEventDestroy(c);
}

static void strings(void) {
    printf("%s: %s\n", cudaGetErrorName(cudaErrorMemoryAllocation), cudaGetErrorString(cudaErrorMemoryAllocation));
    printf("%s: %s\n", cudaGetErrorName(cudaErrorNotSupported), cudaGetErrorString(cudaErrorNotSupported));
    printf("%s: %s\n", cudaGetErrorName((cudaError_t)12345), cudaGetErrorString((cudaError_t)12345));
    void *fn = (void *)1;
    enum cudaDriverEntryPointQueryResult st;
    cudaError_t r = cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000, cudaEnableDefault, &st);
    cudaError_t last = cudaGetLastError();
    printf("missing entry point -> %d status %d fn %p, last error %d\n", (int)r, (int)st, fn, (int)last);
    r = cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 12000, cudaEnableDefault, &st);
    printf("cuMemCreate -> %d status %d found %d\n", (int)r, (int)st, fn != NULL);
}

static void *entry(const char *name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &st);
    return fn;
}

/* Expandable segments' calls: a mapped range is memory, and the driver
 * finds the handle and the range from an address inside it. */
static void vmm(void) {
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) = entry("cuMemAddressReserve");
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long) =
        entry("cuMemCreate");
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = entry("cuMemMap");
    CUresult (*retain)(CUmemGenericAllocationHandle *, void *) = entry("cuMemRetainAllocationHandle");
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) = entry("cuMemGetAddressRange");
    CUresult (*unmap)(CUdeviceptr, size_t) = entry("cuMemUnmap");
    CUresult (*release)(CUmemGenericAllocationHandle) = entry("cuMemRelease");
    CUresult (*addr_free)(CUdeviceptr, size_t) = entry("cuMemAddressFree");
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUdeviceptr va = 0, base = 0;
    CUmemGenericAllocationHandle h = 0, again = 0;
    size_t seg = 2 << 20, size = 0;
    CUresult r1 = reserve(&va, 4 * seg, 0, 0, 0), r2 = create(&h, seg, &prop, 0), r3 = map(va + seg, seg, 0, h, 0);
    printf("vmm: reserve %d create %d map %d aligned %d used %zu\n", (int)r1, (int)r2, (int)r3,
           (int)(va % seg == 0), used());
    cudaMemset((void *)(va + seg), 7, seg);
    unsigned char last = 0;
    cudaMemcpy(&last, (void *)(va + 2 * seg - 1), 1, cudaMemcpyDeviceToHost);
    r1 = retain(&again, (void *)(va + seg + 100));
    r2 = range(&base, &size, va + seg + 100);
    printf("vmm: byte %d retain %d same %d range %d at +%llu size %zu\n", last, (int)r1, (int)(again == h), (int)r2,
           (unsigned long long)(base - va), size);
    printf("vmm: unmapped range %d\n", (int)range(&base, &size, va + 100));
    r1 = unmap(va + seg, seg);
    r2 = release(again);   /* the retained reference: the creator's still holds the memory */
    size_t held = used();
    CUresult r4 = release(h);
    r3 = addr_free(va, 4 * seg);
    printf("vmm: unmap %d release %d (used %zu) release %d free %d used %zu\n", (int)r1, (int)r2, held, (int)r4,
           (int)r3, used());
}

static void properties(void) {
    struct cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    char bus[32];
    cudaDeviceGetPCIBusId(bus, sizeof bus, 0);
    printf("%s %d.%d sms %d/%d total %zu bus %s\n", p.name, p.major, p.minor, p.multiProcessorCount, sms,
           p.totalGlobalMem, bus);
}

int main(void) {
    if (cudaSetDevice(0) != cudaSuccess) return 1;
    properties();
    many();
    copies();
    pools();
    vmm();
    events();
    strings();
    return 0;
}
