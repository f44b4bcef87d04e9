/* t_vmm.c -- when a virtual-memory handle's memory ends: at the release of
 * its last reference or the unmap of its last mapping, whichever comes
 * last (cuda.h, cuMemRelease). Prints, after each step, the device's used
 * bytes as the driver says them and vramtrace's live bytes since a mark
 * (the caller compares them and the expected values):
 *
 *   STEP driver=BYTES vramtrace=BYTES
 *
 * and each call's result as "CALL -> CODE". Leaves one handle released but
 * mapped at exit (a leak of one granule), and makes one last handle that it
 * releases without ever mapping it.
 *
 * "race N": N times each, two threads end one handle at once, by an unmap
 * each of its two mappings, then by a release and an unmap; nothing may
 * stay counted ("race-unmaps", "race-release-and-unmap"). */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/vramtrace.h"

static struct vramtrace_api vt;
static int mark;
static size_t used0;

#define C(call) printf("%s -> %d\n", #call, (int)(call))

static void step(const char *name) {
    size_t free_b = 0, total = 0;
    cuMemGetInfo(&free_b, &total);
    struct vramtrace_usage u;
    vt.usage(mark, 0, &u);
    printf("%s driver=%zu vramtrace=%llu\n", name, total - free_b - used0, (unsigned long long)u.live_bytes);
}

static CUmemGenericAllocationHandle create(size_t n) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    C(cuMemCreate(&h, n, &prop, 0));
    return h;
}

static pthread_barrier_t bar;
static CUdeviceptr race_va;
static CUmemGenericAllocationHandle race_h;
static int race_mode, race_n;
static CUcontext race_ctx;

static void *racer(void *arg) {
    long id = (long)arg;
    const size_t g = 2 << 20;
    cuCtxSetCurrent(race_ctx);
    for (int i = 0; i < race_n; i++) {
        pthread_barrier_wait(&bar);
        CUresult r = race_mode == 0 ? cuMemUnmap(race_va + id * g, g)
                     : id == 0      ? cuMemRelease(race_h)
                                    : cuMemUnmap(race_va, g);
        if (r) printf("race call %ld -> %d\n", id, (int)r);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static void race(int mode, const char *name) {
    const size_t g = 2 << 20;
    race_mode = mode;
    pthread_t t[2];
    pthread_barrier_init(&bar, NULL, 3);
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, racer, (void *)i);
    for (int i = 0; i < race_n; i++) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        cuMemCreate(&race_h, g, &prop, 0);
        cuMemMap(race_va, g, 0, race_h, 0);
        if (mode == 0) {
            cuMemMap(race_va + g, g, 0, race_h, 0);
            cuMemRelease(race_h);
        }
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    step(name);
}

int main(int argc, char **argv) {
    CUcontext ctx;
    CUdevice dev;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 1;
    if (argc > 2 && strcmp(argv[1], "race") == 0) {
        vramtrace_load(&vt);
        mark = vt.mark();
        race_n = atoi(argv[2]);
        race_ctx = ctx;
        cuMemAddressReserve(&race_va, 4 << 20, 0, 0, 0);
        race(0, "race-unmaps");
        race(1, "race-release-and-unmap");
        return 0;
    }
    vramtrace_load(&vt);
    mark = vt.mark();
    size_t f0, t0;
    cuMemGetInfo(&f0, &t0);
    used0 = t0 - f0;
    const size_t g = 2 << 20;
    CUdeviceptr va = 0;
    C(cuMemAddressReserve(&va, 32 * g, 0, 0, 0));

    /* The CUDA samples' way: released as soon as mapped, used until unmapped. */
    CUmemGenericAllocationHandle h1 = create(g);
    C(cuMemMap(va, g, 0, h1, 0));
    C(cuMemRelease(h1));
    step("released-while-mapped");
    C(cuMemUnmap(va, g));
    step("then-unmapped");

    /* Mapped twice, released: the memory lasts until the second unmap. */
    CUmemGenericAllocationHandle h2 = create(2 * g);
    C(cuMemMap(va + 2 * g, 2 * g, 0, h2, 0));
    C(cuMemMap(va + 6 * g, 2 * g, 0, h2, 0));
    C(cuMemRelease(h2));
    step("two-maps-released");
    C(cuMemUnmap(va + 2 * g, 2 * g));
    step("one-map-left");
    C(cuMemUnmap(va + 6 * g, 2 * g));
    step("no-map-left");

    /* NCCL's free: a reference retained from the address, released, the
     * mapping unmapped, then the creator's reference released. */
    CUmemGenericAllocationHandle h3 = create(g), hr = 0;
    C(cuMemMap(va + 10 * g, g, 0, h3, 0));
    C(cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)(va + 10 * g)));
    printf("retained the same handle: %d\n", hr == h3);
    C(cuMemRelease(hr));
    step("retained-released");
    C(cuMemUnmap(va + 10 * g, g));
    step("retained-unmapped");
    C(cuMemRelease(h3));
    step("creator-released");

    /* One unmap of two mappings side by side, of two released handles. */
    CUmemGenericAllocationHandle h4 = create(g), h5 = create(g);
    C(cuMemMap(va + 12 * g, g, 0, h4, 0));
    C(cuMemMap(va + 13 * g, g, 0, h5, 0));
    C(cuMemRelease(h4));
    C(cuMemRelease(h5));
    step("two-handles-released");
    C(cuMemUnmap(va + 12 * g, 2 * g));
    step("both-unmapped-at-once");

    /* Refused calls change nothing: an unmap where nothing is mapped, a
     * second release of a released handle that is still mapped. */
    CUmemGenericAllocationHandle h6 = create(g);
    C(cuMemMap(va + 20 * g, g, 0, h6, 0));
    C(cuMemRelease(h6));
    C(cuMemUnmap(va + 24 * g, g));
    C(cuMemRelease(h6));
    step("refused-calls");

    /* Unmapped, released in the usual order (PyTorch's expandable segments). */
    CUmemGenericAllocationHandle h7 = create(4 * g);
    C(cuMemMap(va + 26 * g, 4 * g, 0, h7, 0));
    step("usual-mapped");
    C(cuMemUnmap(va + 26 * g, 4 * g));
    step("usual-unmapped");
    C(cuMemRelease(h7));
    step("usual-released");

    /* Made and released, never mapped: memory with no address. */
    CUmemGenericAllocationHandle h8 = create(g);
    C(cuMemRelease(h8));
    return 0;   /* h6: released, still mapped: live at exit */
}
