/* t_host.c -- the traced program's own behaviour under vramtrace: signals,
 * fork, errno, file descriptors, re-entry from signal handlers. One mode per
 * run (argv[1]); tests/integration/test_host.py knows the answers. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../../include/vramtrace.h"

/* The simulated driver's call counter (tests/simgpu/simcuda.c). */
int simgpu_calls(const char *name);

#define HUGE_REQUEST ((size_t)1 << 40)

/* ------------------------------------------------------- fork-usr2 */

static volatile sig_atomic_t usr2_seen;

static void on_usr2(int sig) {
    (void)sig;
    usr2_seen++;
}

/* The program installs its own SIGUSR2 handler after its first GPU
 * allocation (vramtrace's on-demand handler is in place by then); a forked
 * child raises SIGUSR2 and must reach the program's handler. */
static int fork_usr2(void) {
    CUdeviceptr p;
    printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p, 4096));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        raise(SIGUSR2);
        printf("child: handler ran %d time(s)\n", (int)usr2_seen);
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(child, &st, 0);
    if (WIFSIGNALED(st)) printf("child: killed by signal %d\n", WTERMSIG(st));
    else printf("child: exited %d\n", WEXITSTATUS(st));
    raise(SIGUSR2);
    printf("parent: handler ran %d time(s)\n", (int)usr2_seen);
    return 0;
}

/* ----------------------------------------------------------- no-cuda */

/* Never touches CUDA: prints its open file descriptors. */
static int no_cuda(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 1;
    int self = dirfd(d);
    int fds[256], n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        if (fd != self) fds[n++] = fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (fds[j] < fds[i]) { int t = fds[i]; fds[i] = fds[j]; fds[j] = t; }
    printf("fds:");
    for (int i = 0; i < n; i++) printf(" %d", fds[i]);
    printf("\n");
    return 0;
}

/* ------------------------------------------------------------- errno */

#define KNOWN_ERRNO 4242
#define SHOW(name, call) do { errno = KNOWN_ERRNO; int r_ = (int)(call); int e_ = errno; \
    printf("%-34s -> %3d errno %d\n", name, r_, e_); } while (0)

/* Every hooked call with errno set to a known value before it: what errno
 * is after it must not depend on vramtrace. */
static int errno_kept(void) {
    CUdeviceptr a, b, pitched;
    size_t pitch;
    void *host, *rt;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUDA_ARRAY_DESCRIPTOR ad = {64, 64, CU_AD_FORMAT_FLOAT, 1};
    CUDA_ARRAY3D_DESCRIPTOR md = {64, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CUarray arr;
    CUmipmappedArray mip;
    SHOW("cuMemAlloc_v2 (first)", cuMemAlloc_v2(&a, 1 << 20));
    SHOW("cuMemAlloc_v2 (out of memory)", cuMemAlloc_v2(&b, HUGE_REQUEST));
    SHOW("cuMemAlloc_v2 (zero bytes)", cuMemAlloc_v2(&b, 0));
    SHOW("cuMemAllocPitch_v2", cuMemAllocPitch_v2(&pitched, &pitch, 1000, 10, 4));
    SHOW("cuMemFree_v2", cuMemFree_v2(pitched));
    SHOW("cuMemFree_v2 (unknown)", cuMemFree_v2(0x1234));
    SHOW("cuMemAllocManaged", cuMemAllocManaged(&b, 4096, CU_MEM_ATTACH_GLOBAL));
    SHOW("cuMemAllocAsync", cuMemAllocAsync(&b, 4096, 0));
    SHOW("cuMemFreeAsync", cuMemFreeAsync(b, 0));
    SHOW("cuMemAllocHost_v2", cuMemAllocHost_v2(&host, 4096));
    SHOW("cuMemFreeHost", cuMemFreeHost(host));
    SHOW("cuMemHostAlloc (out of memory)", cuMemHostAlloc(&host, HUGE_REQUEST << 10, 0));
    SHOW("cuMemCreate", cuMemCreate(&h, 2 << 20, &prop, 0));
    SHOW("cuMemMap", cuMemMap(0x7e0000000000ull, 2 << 20, 0, h, 0));
    SHOW("cuMemRelease", cuMemRelease(h));
    SHOW("cuMemRelease (unknown)", cuMemRelease(0x99999));
    SHOW("cuArrayCreate_v2", cuArrayCreate_v2(&arr, &ad));
    SHOW("cuArrayDestroy", cuArrayDestroy(arr));
    SHOW("cuMipmappedArrayCreate", cuMipmappedArrayCreate(&mip, &md, 3));
    SHOW("cuMipmappedArrayDestroy", cuMipmappedArrayDestroy(mip));
    SHOW("cudaMalloc", cudaMalloc(&rt, 4096));
    SHOW("cudaMalloc (out of memory)", cudaMalloc(&rt, HUGE_REQUEST));
    SHOW("cudaFree (unknown)", cudaFree((void *)0x4321));
    SHOW("cudaMallocHost", cudaMallocHost(&rt, 4096));
    SHOW("cudaFreeHost", cudaFreeHost(rt));
    SHOW("cudaHostAlloc", cudaHostAlloc(&rt, 4096, 0));
    SHOW("cudaMallocManaged", cudaMallocManaged(&rt, 4096, cudaMemAttachGlobal));
    SHOW("cudaMallocPitch", cudaMallocPitch(&rt, &pitch, 1000, 10));
    SHOW("cudaMallocAsync", cudaMallocAsync(&rt, 4096, 0));
    SHOW("cudaFreeAsync", cudaFreeAsync(rt, 0));
    struct cudaChannelFormatDesc f = {32, 0, 0, 0, cudaChannelFormatKindFloat};
    cudaArray_t ra;
    SHOW("cudaMallocArray", cudaMallocArray(&ra, &f, 64, 64, 0));
    SHOW("cudaFreeArray", cudaFreeArray(ra));
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CUmemoryPool pool;
    SHOW("cuMemPoolCreate", cuMemPoolCreate(&pool, &pp));
    SHOW("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync(&b, 4096, pool, 0));
    SHOW("cuMemFreeAsync (pool)", cuMemFreeAsync(b, 0));
    SHOW("cuMemPoolDestroy", cuMemPoolDestroy(pool));
    CUipcMemHandle ih;
    cuIpcGetMemHandle(&ih, a);
    SHOW("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle(&b, ih, 0));
    SHOW("cuIpcCloseMemHandle", cuIpcCloseMemHandle(b));
    return 0;
}

/* ---------------------------------------------- signals inside hooks */

static void say(const char *what, int rc) {
    char buf[96];
    int n = snprintf(buf, sizeof buf, "%s -> %d\n", what, rc);
    ssize_t w = write(1, buf, (size_t)n);
    (void)w;
}

static void on_term_exit(int sig) {
    (void)sig;
    exit(3);
}

static void on_term_exit0(int sig) {
    (void)sig;
    exit(0);
}

static void on_usr1_huge(int sig) {
    (void)sig;
    CUdeviceptr p;
    say("handler: huge cuMemAlloc_v2", (int)cuMemAlloc_v2(&p, HUGE_REQUEST));
}

static CUdeviceptr handler_ptr[2];
static int handler_calls;

static void on_usr1_small(int sig) {
    (void)sig;
    int k = handler_calls++;
    say(k ? "handler (no hook running): cuMemAlloc_v2" : "handler (inside a hook): cuMemAlloc_v2",
        (int)cuMemAlloc_v2(&handler_ptr[k], 8192));
}

static void handle(int sig, void (*fn)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

/* An allocation that fails for lack of memory: the post-mortem is written
 * to VRAMTRACE_REPORT, which the test makes a FIFO nobody reads yet, so the
 * hook stays inside its output (holding vramtrace's output lock) until the
 * test sends its signal and then opens the FIFO. */
static int oom_then(const char *mode) {
    CUdeviceptr p, q;
    if (strcmp(mode, "exit-in-hook") == 0) handle(SIGTERM, on_term_exit);
    else if (strcmp(mode, "exit0-in-hook") == 0) handle(SIGTERM, on_term_exit0);
    else handle(SIGUSR1, on_usr1_huge);
    say("main: cuMemAlloc_v2", (int)cuMemAlloc_v2(&p, 1 << 20));
    say("main: huge cuMemAlloc_v2", (int)cuMemAlloc_v2(&q, HUGE_REQUEST));
    return 0;
}

/* SIMGPU_BLOCK=cuMemAllocAsync: the SIGTERM handler's exit() comes while
 * the hook is inside the real driver call, where vramtrace holds nothing:
 * the exit dump is written. */
static int exit_in_driver(void) {
    CUdeviceptr p, q;
    handle(SIGTERM, on_term_exit);
    say("main: cuMemAlloc_v2", (int)cuMemAlloc_v2(&p, 1 << 20));
    say("main: cuMemAllocAsync", (int)cuMemAllocAsync(&q, 4096, 0));
    return 0;
}

/* Run with stderr a pipe nobody reads: an out-of-memory failure, then the
 * exit. The program itself never writes to stderr. */
static int oom_closed_stderr(void) {
    CUdeviceptr p, q;
    printf("cuMemAlloc_v2 -> %d\n", (int)cuMemAlloc_v2(&p, 1 << 20));
    printf("huge cuMemAlloc_v2 -> %d\n", (int)cuMemAlloc_v2(&q, HUGE_REQUEST));
    return 0;
}

/* SIMGPU_RAISE=10:cuMemAlloc_v2 raises SIGUSR1 inside the first
 * cuMemAlloc_v2; its handler allocates. Then the program raises SIGUSR1
 * itself, outside any CUDA call, and the handler allocates again. */
static int signal_allocs(void) {
    CUdeviceptr p;
    handle(SIGUSR1, on_usr1_small);
    say("main: cuMemAlloc_v2", (int)cuMemAlloc_v2(&p, 1 << 20));
    raise(SIGUSR1);
    return 0;
}

/* ------------------------------------------------------------ arrays */

/* Arrays made through every driver entry point; then how often the driver
 * was asked about a NULL array handle (never, with or without vramtrace). */
static int arrays_null(void) {
    CUDA_ARRAY_DESCRIPTOR ad = {64, 64, CU_AD_FORMAT_FLOAT, 1};
    CUDA_ARRAY3D_DESCRIPTOR d3 = {16, 16, 4, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
    CUDA_ARRAY3D_DESCRIPTOR md = {64, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CUarray a, b;
    CUmipmappedArray m;
    printf("cuArrayCreate_v2 -> %d\n", (int)cuArrayCreate_v2(&a, &ad));
    printf("cuArray3DCreate_v2 -> %d\n", (int)cuArray3DCreate_v2(&b, &d3));
    printf("cuMipmappedArrayCreate -> %d\n", (int)cuMipmappedArrayCreate(&m, &md, 3));
    printf("asked about a NULL array: %d, a NULL mipmapped array: %d\n",
           simgpu_calls("cuArrayGetMemoryRequirements(NULL)"),
           simgpu_calls("cuMipmappedArrayGetMemoryRequirements(NULL)"));
    return 0;
}

/* --------------------------------------------------------- host VMM */

static CUresult create_at(CUmemGenericAllocationHandle *h, CUmemLocationType type, int id, size_t bytes) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = type;
    prop.location.id = id;
    return cuMemCreate(h, bytes, &prop, 0);
}

static CUresult pool_at(CUmemoryPool *pool, CUmemLocationType type, int id) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = type;
    props.location.id = id;
    return cuMemPoolCreate(pool, &props);
}

/* Physical memory and pools on the host, beside one of each on the device
 * (run with a 4 MiB device and VRAMTRACE_LIMIT=3M: the host ones do not
 * fit either, and succeed). */
static int host_vmm(void) {
    CUmemGenericAllocationHandle host, numa, current, dev;
    CUmemoryPool hpool, dpool;
    CUdeviceptr hp, dp;
    printf("cuMemCreate HOST 8M -> %d\n", (int)create_at(&host, CU_MEM_LOCATION_TYPE_HOST, 0, 8 << 20));
    printf("cuMemCreate HOST_NUMA 4M -> %d\n", (int)create_at(&numa, CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, 4 << 20));
    printf("cuMemCreate HOST_NUMA_CURRENT 2M -> %d\n",
           (int)create_at(&current, CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0, 2 << 20));
    printf("cuMemCreate DEVICE 2M -> %d\n", (int)create_at(&dev, CU_MEM_LOCATION_TYPE_DEVICE, 0, 2 << 20));
    printf("cuMemMap HOST -> %d\n", (int)cuMemMap(0x7e0000000000ull, 8 << 20, 0, host, 0));
    printf("cuMemRelease HOST_NUMA -> %d\n", (int)cuMemRelease(numa));
    printf("cuMemPoolCreate HOST -> %d\n", (int)pool_at(&hpool, CU_MEM_LOCATION_TYPE_HOST, 0));
    printf("cuMemPoolCreate DEVICE -> %d\n", (int)pool_at(&dpool, CU_MEM_LOCATION_TYPE_DEVICE, 0));
    printf("cuMemAllocFromPoolAsync host pool 16M -> %d\n", (int)cuMemAllocFromPoolAsync(&hp, 16 << 20, hpool, 0));
    printf("cuMemAllocFromPoolAsync device pool 512K -> %d\n",
           (int)cuMemAllocFromPoolAsync(&dp, 512 << 10, dpool, 0));
    printf("cuMemAllocFromPoolAsync device pool 4M -> %d\n",
           (int)cuMemAllocFromPoolAsync(&dp, 4 << 20, dpool, 0));
    CUmemLocation at_host = {CU_MEM_LOCATION_TYPE_HOST, 0};
    CUmemoryPool dflt;
    printf("cuMemGetDefaultMemPool HOST -> %d\n", (int)cuMemGetDefaultMemPool(&dflt, &at_host, CU_MEM_ALLOCATION_TYPE_PINNED));
    printf("cuMemAllocFromPoolAsync host default pool 1M -> %d\n",
           (int)cuMemAllocFromPoolAsync(&hp, 1 << 20, dflt, 0));
    return 0;
}

/* ------------------------------------------------------- mixed-site-oom */

/* One call site that allocates on each device in turn (a model split over
 * two GPUs allocating its layers), another on device 0 alone, and three
 * failures on device 1: with the site's 6 MiB of device 1 live, with none
 * of it live (device 0's memory still is), and with device 0 holding
 * nothing. Run on two devices with VRAMTRACE_LIMIT=8M. */
__attribute__((noinline)) static CUresult layer(CUdeviceptr *p, size_t bytes) {
    CUresult r = cuMemAlloc(p, bytes);
    __asm__ volatile("" : : : "memory");
    return r;
}

static int mixed_site_oom(void) {
    CUcontext c[2];
    CUdeviceptr a[2][3], big, x;
    cuInit(0);
    for (int d = 0; d < 2; d++) cuDevicePrimaryCtxRetain(&c[d], d);
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < 2; d++) {
            cuCtxSetCurrent(c[d]);
            printf("layer %d on device %d -> %d\n", k, d, (int)layer(&a[d][k], (size_t)(d + 1) << 20));
        }
    cuCtxSetCurrent(c[0]);
    printf("4M on device 0 -> %d\n", (int)cuMemAlloc(&big, 4 << 20));
    cuCtxSetCurrent(c[1]);
    printf("3M on device 1 -> %d\n", (int)cuMemAlloc(&x, 3 << 20));
    for (int k = 0; k < 3; k++) cuMemFree(a[1][k]);
    printf("9M on device 1 -> %d\n", (int)cuMemAlloc(&x, 9 << 20));
    cuCtxSetCurrent(c[0]);
    for (int k = 0; k < 3; k++) cuMemFree(a[0][k]);
    cuMemFree(big);
    cuCtxSetCurrent(c[1]);
    printf("layer on device 1 -> %d\n", (int)layer(&a[1][0], 2 << 20));
    printf("7M on device 1 -> %d\n", (int)cuMemAlloc(&x, 7 << 20));
    return 0;
}

/* ------------------------------------------------------- mixed-site-growth */

/* A call site that leaks on both devices, 4 MiB a step on device 0 and
 * 1 MiB on device 1, over eight steps, beside 40 MiB that device 1 holds
 * from the start; then device 1 fails. Run on two devices with
 * VRAMTRACE_LIMIT=64M: device 1's failure grew from its 8 MiB, not the
 * site's 40 MiB over both devices. */
__attribute__((noinline)) static CUresult leaky(CUdeviceptr *p, size_t bytes) {
    CUresult got = cuMemAlloc(p, bytes);
    __asm__ volatile("" : : : "memory");
    return got;
}

static int mixed_site_growth(void) {
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    CUcontext c[2];
    CUdeviceptr p;
    cuInit(0);
    for (int d = 0; d < 2; d++) cuDevicePrimaryCtxRetain(&c[d], d);
    cuCtxSetCurrent(c[1]);
    printf("40M on device 1 -> %d\n", (int)cuMemAlloc(&p, 40 << 20));
    for (int k = 0; k < 8; k++) {
        for (int d = 0; d < 2; d++) {
            cuCtxSetCurrent(c[d]);
            if (leaky(&p, d ? 1 << 20 : 4 << 20) != CUDA_SUCCESS) printf("step %d device %d failed\n", k, d);
        }
        vt.step();
    }
    printf("20M on device 1 -> %d\n", (int)cuMemAlloc(&p, 20 << 20));
    return 0;
}

/* ------------------------------------------------------- fork-many-live */

/* The parent holds N allocations, then forks; the child prints the page
 * faults it took before its first line of its own (vramtrace's reset of
 * the parent's records in it among them) and exits. */
static int fork_many_live(long n) {
    CUdeviceptr p;
    cuInit(0);
    CUcontext c;
    cuDevicePrimaryCtxRetain(&c, 0);
    cuCtxSetCurrent(c);
    for (long i = 0; i < n; i++)
        if (cuMemAlloc(&p, 256) != CUDA_SUCCESS) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        struct rusage u;
        getrusage(RUSAGE_SELF, &u);
        printf("child minor faults %ld\n", u.ru_minflt);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* ------------------------------------------------------- chdir-leak */

/* 1 MiB kept for ever, then the working directory changed to `dir`: the
 * dump, the report and the suppressions named by relative paths are still
 * those of the directory the program started in. */
static int chdir_leak(const char *dir, int first) {
    void *p = NULL;
    if (first) printf("chdir -> %d\n", chdir(dir));
    printf("cudaMalloc 1M -> %d\n", (int)cudaMalloc(&p, 1 << 20));
    if (!first) printf("chdir -> %d\n", chdir(dir));
    return 0;
}

/* ------------------------------------------------------- oom-maps */

/* An out-of-memory failure, then whether elfutils' libdw (which vramtrace
 * loads to name frames for a report) is mapped into the process. */
static int oom_maps(void) {
    void *p = NULL;
    printf("cudaMalloc 1P -> %d\n", (int)cudaMalloc(&p, 1ull << 50));
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int dw = 0;
    while (f && fgets(line, sizeof line, f)) dw |= strstr(line, "/libdw") != NULL;
    if (f) fclose(f);
    printf("libdw mapped %d\n", dw);
    return 0;
}

/* ------------------------------------------------------- host-oom */

/* 100 MiB of device memory and 64 MiB of pinned host memory, then a pinned
 * host request the driver refuses. */
static int host_oom(void) {
    void *d = NULL, *h = NULL, *big = NULL;
    printf("cudaMalloc 100M -> %d\n", (int)cudaMalloc(&d, 100 << 20));
    printf("cudaMallocHost 64M -> %d\n", (int)cudaMallocHost(&h, 64 << 20));
    printf("cudaMallocHost 1P -> %d\n", (int)cudaMallocHost(&big, 1ull << 50));
    return 0;
}

/* ------------------------------------------------------- host-ooms */

/* A pinned host request refused five times from one call site, then a
 * device request refused: the failures by request name the host memory,
 * the device request its device. */
static int host_ooms(void) {
    void *h = NULL, *big = NULL, *d = NULL;
    printf("cudaMallocHost 64M -> %d\n", (int)cudaMallocHost(&h, 64 << 20));
    for (int i = 0; i < 5; i++) printf("cudaMallocHost 1P -> %d\n", (int)cudaMallocHost(&big, 1ull << 50));
    printf("cudaMalloc 1P -> %d\n", (int)cudaMalloc(&d, 1ull << 50));
    return 0;
}

/* ------------------------------------------------------- pool-devices */

/* Stream-ordered memory that lands on device 1 while device 0 is current:
 * from a pool made on device 1, from device 1's default pool, from the
 * current pool of a stream of device 1, and (through the runtime) from a
 * pool on the host made by cudaMemPoolCreate; then 70 pools on the host at
 * once. Run on two devices with VRAMTRACE_LIMIT=6M: device 1's 6 MiB fit. */
static int pool_devices(void) {
    CUcontext c0, c1;
    CUmemoryPool p1, d1, hp[70];
    CUstream s1;
    CUdeviceptr a;
    cuInit(0);
    cuDevicePrimaryCtxRetain(&c0, 0);
    cuDevicePrimaryCtxRetain(&c1, 1);
    cuCtxSetCurrent(c1);
    printf("cuStreamCreate on device 1 -> %d\n", (int)cuStreamCreate(&s1, 0));
    cuCtxSetCurrent(c0);
    printf("cuMemAllocAsync 4M, default stream -> %d\n", (int)cuMemAllocAsync(&a, 4 << 20, 0));
    printf("cuMemPoolCreate device 1 -> %d\n", (int)pool_at(&p1, CU_MEM_LOCATION_TYPE_DEVICE, 1));
    printf("cuMemAllocFromPoolAsync 1M, device 1's pool -> %d\n", (int)cuMemAllocFromPoolAsync(&a, 1 << 20, p1, 0));
    printf("cuDeviceGetDefaultMemPool 1 -> %d\n", (int)cuDeviceGetDefaultMemPool(&d1, 1));
    printf("cuMemAllocFromPoolAsync 2M, device 1's default pool -> %d\n",
           (int)cuMemAllocFromPoolAsync(&a, 2 << 20, d1, 0));
    printf("cuMemAllocAsync 3M, device 1's stream -> %d\n", (int)cuMemAllocAsync(&a, 3 << 20, s1));
    printf("cuMemAllocAsync 1, device 1's stream -> %d\n", (int)cuMemAllocAsync(&a, 1, s1));
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeHost;
    cudaMemPool_t rp;
    void *rpa;
    printf("cudaMemPoolCreate host -> %d\n", (int)cudaMemPoolCreate(&rp, &props));
    printf("cudaMallocFromPoolAsync 512K, host pool -> %d\n", (int)cudaMallocFromPoolAsync(&rpa, 512 << 10, rp, 0));
    int made = 0;
    for (int i = 0; i < 70; i++) made += pool_at(&hp[i], CU_MEM_LOCATION_TYPE_HOST, 0) == CUDA_SUCCESS;
    printf("cuMemPoolCreate host x70 -> %d made\n", made);
    printf("cuMemAllocFromPoolAsync 4K, the 70th host pool -> %d\n",
           (int)cuMemAllocFromPoolAsync(&a, 4096, hp[69], 0));
    return 0;
}

/* ----------------------------------------------------- pitched-budget */

/* Rows the driver pads (the simulated driver's pitch is a multiple of 512):
 * 513 bytes wide, 1000 rows, take 1,024,000 bytes, not 513,000. Run with
 * VRAMTRACE_LIMIT=1M: after 500,000 bytes, neither padded allocation fits,
 * and the third (512 wide, unpadded) does. */
static int pitched_budget(void) {
    CUdeviceptr a, b;
    size_t pitch = 0;
    void *c;
    printf("cuMemAlloc_v2 500000 -> %d\n", (int)cuMemAlloc_v2(&a, 500000));
    printf("cuMemAllocPitch_v2 513x1000 -> %d\n", (int)cuMemAllocPitch_v2(&b, &pitch, 513, 1000, 4));
    printf("cudaMallocPitch 513x1000 -> %d\n", (int)cudaMallocPitch(&c, &pitch, 513, 1000));
    CUresult r = cuMemAllocPitch_v2(&b, &pitch, 512, 1000, 4);
    printf("cuMemAllocPitch_v2 512x1000 -> %d, pitch %zu\n", (int)r, pitch);
    size_t f, t;
    cuMemGetInfo_v2(&f, &t);
    printf("device used %zu\n", (size_t)(t - f));
    return 0;
}

/* ----------------------------------------------------------- graph-gpa */

/* A graph instantiated through cuGraphInstantiate as cuGetProcAddress
 * hands it out at CUDA 12.0 (cuGraphInstantiateWithFlags, under the older
 * name), launched twice, its 1M freed after each launch. */
static int graph_gpa(void) {
    CUstream s;
    CUdeviceptr b;
    CUgraph g;
    CUgraphExec e;
    CUresult (*inst)(CUgraphExec *, CUgraph, unsigned long long) = NULL;
    CUdriverProcAddressQueryResult q;
    cuInit(0);
    cuStreamCreate(&s, 0);
    printf("cuGetProcAddress cuGraphInstantiate 12000 -> %d\n",
           (int)cuGetProcAddress("cuGraphInstantiate", (void **)&inst, 12000, 0, &q));
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("cuMemAllocAsync 1M, captured -> %d\n", (int)cuMemAllocAsync(&b, 1 << 20, s));
    cuStreamEndCapture(s, &g);
    printf("instantiate -> %d\n", inst ? (int)inst(&e, g, 0) : -1);
    for (int i = 0; i < 2; i++) {
        printf("cuGraphLaunch -> %d\n", (int)cuGraphLaunch(e, s));
        printf("cuMemFree_v2 1M -> %d\n", (int)cuMemFree_v2(b));
    }
    return 0;
}

/* ------------------------------------------------- runtime-array-size */

/* A runtime array whose size the driver's memory requirements say: one
 * float channel of 64 bits, 100 x 10, which the simulated driver stores
 * in the format it maps that to. */
static int runtime_array_size(void) {
    struct cudaChannelFormatDesc e = {64, 0, 0, 0, cudaChannelFormatKindFloat};
    cudaArray_t a;
    printf("cudaMallocArray -> %d\n", (int)cudaMallocArray(&a, &e, 100, 10, 0));
    CUDA_ARRAY_MEMORY_REQUIREMENTS r;
    memset(&r, 0, sizeof r);
    printf("cuArrayGetMemoryRequirements -> %d\n", (int)cuArrayGetMemoryRequirements(&r, (CUarray)a, 0));
    printf("driver says %zu bytes\n", (size_t)r.size);
    return 0;
}

/* ----------------------------------------------------- devices-growth */

__attribute__((noinline)) static CUresult grow_on_0(CUdeviceptr *p, size_t n) { return cuMemAlloc_v2(p, n); }
__attribute__((noinline)) static CUresult step_on_1(CUdeviceptr *p, size_t n) { return cuMemAlloc_v2(p, n); }
__attribute__((noinline)) static CUresult fail_on_1(CUdeviceptr *p, size_t n) { return cuMemAlloc_v2(p, n); }

/* Device 0's memory grows step by step (40M a step, never freed) while
 * device 1 allocates and frees 30M; then device 1 keeps 100M and fails
 * 950M (run with two 1G devices). With "empty", device 1 holds nothing
 * when its first request fails. */
static int devices_growth(int empty) {
    CUcontext c0, c1;
    CUdeviceptr p, q;
    cuInit(0);
    cuDevicePrimaryCtxRetain(&c0, 0);
    cuDevicePrimaryCtxRetain(&c1, 1);
    for (int i = 0; i < 16; i++) {
        cuCtxSetCurrent(c0);
        grow_on_0(&p, 40 << 20);
        cuCtxSetCurrent(c1);
        if (!empty) {
            step_on_1(&q, 30 << 20);
            cuMemFree_v2(q);
        }
        usleep(2000);
    }
    cuCtxSetCurrent(c1);
    if (!empty) step_on_1(&q, 100 << 20);
    printf("fail_on_1 -> %d\n", (int)fail_on_1(&q, empty ? 2000u << 20 : 950u << 20));
    return 0;
}

/* ------------------------------------------------------- budget-churn */

/* Four threads that allocate (plain, or pitched with padded rows: 513
 * bytes wide) and free at random, 2,000 steps each, up to eight blocks
 * of 1 to 12 MiB each at once: run with VRAMTRACE_LIMIT=48M, many
 * requests are refused while others are in flight or being freed. */
static CUcontext churn_ctx;

static void *churn(void *arg) {
    unsigned seed = 1234 + (unsigned)(uintptr_t)arg;
    CUdeviceptr held[8] = {0};
    cuCtxSetCurrent(churn_ctx);
    for (int i = 0; i < 2000; i++) {
        int k = rand_r(&seed) % 8;
        if (held[k]) {
            cuMemFree_v2(held[k]);
            held[k] = 0;
            continue;
        }
        size_t n = (1 + rand_r(&seed) % 12) * (1u << 20) + 1, pitch;
        CUresult r = rand_r(&seed) % 2 ? cuMemAllocPitch_v2(&held[k], &pitch, 513, n / 513, 4)
                                       : cuMemAlloc_v2(&held[k], n);
        if (r != CUDA_SUCCESS) held[k] = 0;
    }
    for (int k = 0; k < 8; k++)
        if (held[k]) cuMemFree_v2(held[k]);
    return NULL;
}

static int budget_churn(void) {
    cuInit(0);
    cuDevicePrimaryCtxRetain(&churn_ctx, 0);
    cuCtxSetCurrent(churn_ctx);
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    printf("done\n");
    return 0;
}

/* -------------------------------------------------------------- graph */

static void graph_pool(const char *when) {
    cuuint64_t used = 0, reserved = 0;
    cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
    cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved);
    printf("graph pool %s: used %lluM, reserved %lluM\n", when, (unsigned long long)used >> 20,
           (unsigned long long)reserved >> 20);
}

/* A captured graph with two allocation nodes (8M freed by the graph, 4M
 * freed after the launch), launched twice (a third launch, while the 4M
 * of the second is in use, fails); then a 56M request that the pool's
 * 12M reserve leaves no room for on a 64M device, the pool trimmed, and
 * the request again. */
static int graph(void) {
    CUstream s;
    CUdeviceptr a, b, c;
    CUgraph g;
    CUgraphExec e;
    cuInit(0);
    printf("cuStreamCreate -> %d\n", (int)cuStreamCreate(&s, 0));
    printf("cuStreamBeginCapture -> %d\n", (int)cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    printf("cuMemAllocAsync 8M, captured -> %d\n", (int)cuMemAllocAsync(&a, 8 << 20, s));
    printf("cuMemAllocAsync 4M, captured -> %d\n", (int)cuMemAllocAsync(&b, 4 << 20, s));
    printf("cuMemFreeAsync 8M, captured -> %d\n", (int)cuMemFreeAsync(a, s));
    printf("cuStreamEndCapture -> %d\n", (int)cuStreamEndCapture(s, &g));
    graph_pool("before the launch");
    printf("cuGraphInstantiate -> %d\n", (int)cuGraphInstantiate(&e, g, 0));
    printf("cuGraphLaunch -> %d\n", (int)cuGraphLaunch(e, s));
    graph_pool("after the launch");
    printf("cuMemFreeAsync 4M -> %d\n", (int)cuMemFreeAsync(b, s));
    graph_pool("after the free");
    printf("cuGraphLaunch again -> %d\n", (int)cuGraphLaunch(e, s));
    printf("cuGraphLaunch while its 4M is in use -> %d\n", (int)cuGraphLaunch(e, s));
    printf("cuMemFree_v2 4M -> %d\n", (int)cuMemFree_v2(b));
    graph_pool("after the second launch's free");
    printf("cuMemAlloc_v2 56M -> %d\n", (int)cuMemAlloc_v2(&c, 56 << 20));
    printf("cuDeviceGraphMemTrim -> %d\n", (int)cuDeviceGraphMemTrim(0));
    graph_pool("trimmed");
    printf("cuMemAlloc_v2 56M -> %d\n", (int)cuMemAlloc_v2(&c, 56 << 20));
    return 0;
}

/* -------------------------------------------------------- graph-built */

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(int device, size_t bytes) {
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = device;
    p.bytesize = bytes;
    return p;
}

/* Graphs built node by node (SIMGPU_DEVICES=2). g1: an 8M node on device
 * 0 (cuGraphAddMemAllocNode) and a 2M node on device 1 (cuGraphAddNode),
 * both freed by g1 (cuGraphAddMemFreeNode, cuGraphAddNode), and a 4M node
 * that outlives it (cuGraphAddNode); g2 frees g1's 4M (cuGraphAddNode of
 * CUDA 12.2, without edge data, through cuGetProcAddress); g3, captured,
 * frees it too (cuMemFreeAsync on the captured stream). Launches: g1, g2,
 * g1, a 1M cuMemAlloc_v2, g3, g2 again (refused: nothing of g1's is in
 * use), then the 1M freed; then a child graph moved into its parent. */
static int graph_built(void) {
    CUgraph g1, g2, g3;
    CUgraphExec e1, e2, e3;
    CUgraphNode n;
    CUstream s;
    CUdeviceptr m;
    CUresult (*add_v1)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraphNodeParams *) = NULL;
    CUdriverProcAddressQueryResult q;
    cuInit(0);
    cuStreamCreate(&s, 0);
    printf("cuGetProcAddress cuGraphAddNode 12020 -> %d\n",
           (int)cuGetProcAddress("cuGraphAddNode", (void **)&add_v1, 12020, 0, &q));
    printf("cuGraphCreate -> %d\n", (int)cuGraphCreate(&g1, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(0, 8 << 20);
    printf("cuGraphAddMemAllocNode 8M on 0 -> %d\n", (int)cuGraphAddMemAllocNode(&n, g1, NULL, 0, &a));
    CUgraphNodeParams c, b, f;
    memset(&c, 0, sizeof c);
    c.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    CUDA_MEM_ALLOC_NODE_PARAMS p1 = alloc_params(1, 2 << 20), p0 = alloc_params(0, 4 << 20);
    _Static_assert(sizeof p1 == sizeof c.alloc, "the two versions' parameters are laid out alike");
    memcpy(&c.alloc, &p1, sizeof p1);
    printf("cuGraphAddNode 2M on 1 -> %d\n", (int)cuGraphAddNode(&n, g1, NULL, NULL, 0, &c));
    b = c;
    memcpy(&b.alloc, &p0, sizeof p0);
    printf("cuGraphAddNode 4M on 0 -> %d\n", (int)cuGraphAddNode(&n, g1, NULL, NULL, 0, &b));
    printf("cuGraphAddMemFreeNode 8M -> %d\n", (int)cuGraphAddMemFreeNode(&n, g1, NULL, 0, a.dptr));
    memset(&f, 0, sizeof f);
    f.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    f.free.dptr = c.alloc.dptr;
    printf("cuGraphAddNode free 2M -> %d\n", (int)cuGraphAddNode(&n, g1, NULL, NULL, 0, &f));
    printf("cuGraphAddMemFreeNode 2M twice -> %d\n", (int)cuGraphAddMemFreeNode(&n, g1, NULL, 0, c.alloc.dptr));
    printf("cuGraphInstantiate g1 -> %d\n", (int)cuGraphInstantiate(&e1, g1, 0));
    printf("cuGraphCreate -> %d\n", (int)cuGraphCreate(&g2, 0));
    f.free.dptr = b.alloc.dptr;
    printf("cuGraphAddNode (12.2) free g1's 4M -> %d\n", add_v1 ? (int)add_v1(&n, g2, NULL, 0, &f) : -1);
    printf("cuGraphInstantiate g2 -> %d\n", (int)cuGraphInstantiate(&e2, g2, 0));
    printf("cuGraphLaunch g1 -> %d\n", (int)cuGraphLaunch(e1, s));
    printf("cuGraphLaunch g2 -> %d\n", (int)cuGraphLaunch(e2, s));
    printf("cuGraphLaunch g1 -> %d\n", (int)cuGraphLaunch(e1, s));
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("cuMemFreeAsync g1's 4M, captured -> %d\n", (int)cuMemFreeAsync(b.alloc.dptr, s));
    cuStreamEndCapture(s, &g3);
    printf("cuGraphInstantiate g3 -> %d\n", (int)cuGraphInstantiate(&e3, g3, 0));
    printf("cuMemAlloc_v2 1M -> %d\n", (int)cuMemAlloc_v2(&m, 1 << 20));
    printf("cuGraphLaunch g3 -> %d\n", (int)cuGraphLaunch(e3, s));
    printf("cuGraphLaunch g2 with nothing to free -> %d\n", (int)cuGraphLaunch(e2, s));
    printf("cuMemFree_v2 1M -> %d\n", (int)cuMemFree_v2(m));
    /* A child graph with a 2M node it frees, cloned (refused: it has
     * memory nodes) then moved into its parent, which is launched. */
    CUgraph gc, gp;
    CUgraphExec ep;
    CUgraphNodeParams k;
    printf("cuGraphCreate child, parent -> %d %d\n", (int)cuGraphCreate(&gc, 0), (int)cuGraphCreate(&gp, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS ka = alloc_params(0, 2 << 20);
    printf("cuGraphAddMemAllocNode 2M to the child -> %d\n", (int)cuGraphAddMemAllocNode(&n, gc, NULL, 0, &ka));
    printf("cuGraphAddMemFreeNode 2M to the child -> %d\n", (int)cuGraphAddMemFreeNode(&n, gc, NULL, 0, ka.dptr));
    memset(&k, 0, sizeof k);
    k.type = CU_GRAPH_NODE_TYPE_GRAPH;
    k.graph.graph = gc;
    k.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
    printf("cuGraphAddNode child cloned -> %d\n", (int)cuGraphAddNode(&n, gp, NULL, NULL, 0, &k));
    k.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    printf("cuGraphAddNode child moved -> %d\n", (int)cuGraphAddNode(&n, gp, NULL, NULL, 0, &k));
    printf("cuGraphInstantiate parent -> %d\n", (int)cuGraphInstantiate(&ep, gp, 0));
    printf("cuGraphLaunch parent -> %d\n", (int)cuGraphLaunch(ep, s));
    for (int d = 0; d < 2; d++) {
        cuuint64_t used = 0, reserved = 0;
        cuDeviceGetGraphMemAttribute(d, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
        cuDeviceGetGraphMemAttribute(d, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved);
        printf("device %d graph pool: used %lluM, reserved %lluM\n", d, (unsigned long long)used >> 20,
               (unsigned long long)reserved >> 20);
    }
    return 0;
}

/* ------------------------------------------------ graph-built-runtime */

static struct cudaMemAllocNodeParams rt_alloc_params(size_t bytes) {
    struct cudaMemAllocNodeParams p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = cudaMemAllocationTypePinned;
    p.poolProps.location.type = cudaMemLocationTypeDevice;
    p.poolProps.location.id = 0;
    p.bytesize = bytes;
    return p;
}

static void rt_graph_pool(const char *when) {
    unsigned long long used = 0, reserved = 0;
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used);
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved);
    printf("graph pool %s: used %lluM, reserved %lluM\n", when, used >> 20, reserved >> 20);
}

/* The same through the runtime (which reaches the driver through
 * cuGetProcAddress): g1 with an 8M node it frees and a 4M node g2 frees;
 * g1 launched, then g2; the pool trimmed. */
static int graph_built_runtime(void) {
    cudaGraph_t g1, g2;
    cudaGraphExec_t e1, e2;
    cudaGraphNode_t n;
    struct cudaMemAllocNodeParams a = rt_alloc_params(8 << 20), b = rt_alloc_params(4 << 20);
    printf("cudaGraphCreate -> %d\n", (int)cudaGraphCreate(&g1, 0));
    printf("cudaGraphAddMemAllocNode 8M -> %d\n", (int)cudaGraphAddMemAllocNode(&n, g1, NULL, 0, &a));
    printf("cudaGraphAddMemAllocNode 4M -> %d\n", (int)cudaGraphAddMemAllocNode(&n, g1, NULL, 0, &b));
    printf("cudaGraphAddMemFreeNode 8M -> %d\n", (int)cudaGraphAddMemFreeNode(&n, g1, NULL, 0, a.dptr));
    printf("cudaGraphInstantiate g1 -> %d\n", (int)cudaGraphInstantiate(&e1, g1, 0));
    printf("cudaGraphCreate -> %d\n", (int)cudaGraphCreate(&g2, 0));
    printf("cudaGraphAddMemFreeNode g1's 4M -> %d\n", (int)cudaGraphAddMemFreeNode(&n, g2, NULL, 0, b.dptr));
    printf("cudaGraphInstantiate g2 -> %d\n", (int)cudaGraphInstantiate(&e2, g2, 0));
    printf("cudaGraphLaunch g1 -> %d\n", (int)cudaGraphLaunch(e1, 0));
    rt_graph_pool("after g1");
    printf("cudaGraphLaunch g2 -> %d\n", (int)cudaGraphLaunch(e2, 0));
    rt_graph_pool("after g2");
    printf("cudaDeviceGraphMemTrim -> %d\n", (int)cudaDeviceGraphMemTrim(0));
    rt_graph_pool("trimmed");
    printf("cudaGraphExecDestroy, cudaGraphDestroy -> %d %d %d %d\n", (int)cudaGraphExecDestroy(e1),
           (int)cudaGraphExecDestroy(e2), (int)cudaGraphDestroy(g1), (int)cudaGraphDestroy(g2));
    return 0;
}

/* ------------------------------------------------------- graph-foreign */

/* Graph A (captured) allocates 8M and leaves it in use. B, captured, frees
 * it through the runtime's cudaFreeAsync: nothing freed until B runs. C,
 * captured after A's memory was freed by cuMemFree_v2, frees it too (a
 * graph allocation's address, though nothing is in use there then).
 * Launches: A, B, A, C; then D (an 8M node captured, instantiated, never
 * launched, destroyed) and E (a 4M node added by hand, its graph
 * destroyed) hold nothing. */
static int graph_foreign(void) {
    CUstream s;
    CUdeviceptr a, d8;
    CUgraph ga, gb, gc, gd, ge;
    CUgraphExec ea, eb, ec, ed;
    CUgraphNode n;
    cuInit(0);
    cuStreamCreate(&s, 0);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("A: cuMemAllocAsync 8M, captured -> %d\n", (int)cuMemAllocAsync(&a, 8 << 20, s));
    cuStreamEndCapture(s, &ga);
    cuGraphInstantiate(&ea, ga, 0);
    printf("cuGraphLaunch A -> %d\n", (int)cuGraphLaunch(ea, s));
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("B: cudaFreeAsync A's 8M, captured -> %d\n", (int)cudaFreeAsync((void *)(uintptr_t)a, (cudaStream_t)s));
    cuStreamEndCapture(s, &gb);
    cuGraphInstantiate(&eb, gb, 0);
    printf("cuGraphLaunch B -> %d\n", (int)cuGraphLaunch(eb, s));
    printf("cuGraphLaunch A -> %d\n", (int)cuGraphLaunch(ea, s));
    printf("cuMemFree_v2 A's 8M -> %d\n", (int)cuMemFree_v2(a));
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("C: cuMemFreeAsync A's 8M, captured -> %d\n", (int)cuMemFreeAsync(a, s));
    cuStreamEndCapture(s, &gc);
    cuGraphInstantiate(&ec, gc, 0);
    printf("cuGraphLaunch A -> %d\n", (int)cuGraphLaunch(ea, s));
    printf("cuGraphLaunch C -> %d\n", (int)cuGraphLaunch(ec, s));
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("D: cuMemAllocAsync 8M, captured -> %d\n", (int)cuMemAllocAsync(&d8, 8 << 20, s));
    cuStreamEndCapture(s, &gd);
    cuGraphInstantiate(&ed, gd, 0);
    printf("D destroyed unlaunched -> %d %d\n", (int)cuGraphExecDestroy(ed), (int)cuGraphDestroy(gd));
    cuGraphCreate(&ge, 0);
    CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(0, 4 << 20);
    printf("E: cuGraphAddMemAllocNode 4M -> %d\n", (int)cuGraphAddMemAllocNode(&n, ge, NULL, 0, &p));
    printf("E destroyed -> %d\n", (int)cuGraphDestroy(ge));
    printf("cuMemFree_v2 D's address -> %d\n", (int)cuMemFree_v2(d8));
    return 0;
}

/* ------------------------------------------------------ graph-auto-free */

/* A captured 4M node the graph does not free, instantiated with
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH: each launch frees the
 * last one's 4M first; the last launch's is freed by cuMemFree_v2. The same
 * graph instantiated without the flag cannot be launched twice. */
static int graph_auto_free(void) {
    CUstream s;
    CUdeviceptr b;
    CUgraph g;
    CUgraphExec e;
    cuInit(0);
    cuStreamCreate(&s, 0);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("cuMemAllocAsync 4M, captured -> %d\n", (int)cuMemAllocAsync(&b, 4 << 20, s));
    cuStreamEndCapture(s, &g);
    printf("cuGraphInstantiateWithFlags AUTO_FREE_ON_LAUNCH -> %d\n",
           (int)cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    for (int i = 0; i < 3; i++) printf("cuGraphLaunch -> %d\n", (int)cuGraphLaunch(e, s));
    printf("cuMemFree_v2 4M -> %d\n", (int)cuMemFree_v2(b));
    return 0;
}

/* -------------------------------------------------------- graph-budget */

static CUresult hold_8m(CUdeviceptr *p) { return cuMemAlloc_v2(p, 8 << 20); }

/* Under a 16M budget: a 12M node captured (no memory yet) leaves room for
 * 8M; its launch, 12M more with 8M held, is refused; with the 8M freed it
 * runs. */
static int graph_budget(void) {
    CUstream s;
    CUdeviceptr b, h;
    CUgraph g;
    CUgraphExec e;
    cuInit(0);
    cuStreamCreate(&s, 0);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("cuMemAllocAsync 12M, captured -> %d\n", (int)cuMemAllocAsync(&b, 12 << 20, s));
    printf("cuMemFreeAsync 12M, captured -> %d\n", (int)cuMemFreeAsync(b, s));
    cuStreamEndCapture(s, &g);
    cuGraphInstantiate(&e, g, 0);
    printf("cuMemAlloc_v2 8M -> %d\n", (int)hold_8m(&h));
    printf("cuGraphLaunch with 8M held -> %d\n", (int)cuGraphLaunch(e, s));
    printf("cuMemFree_v2 8M -> %d\n", (int)cuMemFree_v2(h));
    printf("cuGraphLaunch -> %d\n", (int)cuGraphLaunch(e, s));
    return 0;
}

/* -------------------------------------------------------- graph-joined */

/* A capture that forks onto a second stream and joins back (events): the
 * second stream's 4M (which the graph leaves in use) and 2M (freed on the
 * first stream) are the graph's nodes as much as the first stream's 1M;
 * three launches, each followed by frees of the 1M and the 4M. Then a
 * capture invalidated by cuStreamSynchronize: its 16M node holds nothing. */
static int graph_joined(void) {
    CUstream s1, s2;
    CUevent fork_, join;
    CUdeviceptr a, b, t, x;
    CUgraph g, bad;
    CUgraphExec e;
    cuInit(0);
    cuStreamCreate(&s1, 0);
    cuStreamCreate(&s2, 0);
    cuEventCreate(&fork_, 0);
    cuEventCreate(&join, 0);
    cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cuEventRecord(fork_, s1);
    cuStreamWaitEvent(s2, fork_, 0);
    printf("cuMemAllocAsync 4M on the joined stream -> %d\n", (int)cuMemAllocAsync(&b, 4 << 20, s2));
    printf("cuMemAllocAsync 2M on the joined stream -> %d\n", (int)cuMemAllocAsync(&t, 2 << 20, s2));
    cuEventRecord(join, s2);
    cuStreamWaitEvent(s1, join, 0);
    printf("cuMemAllocAsync 1M -> %d\n", (int)cuMemAllocAsync(&a, 1 << 20, s1));
    printf("cuMemFreeAsync the 2M -> %d\n", (int)cuMemFreeAsync(t, s1));
    printf("cuStreamEndCapture -> %d\n", (int)cuStreamEndCapture(s1, &g));
    cuGraphInstantiate(&e, g, 0);
    for (int i = 0; i < 3; i++) {
        int l = (int)cuGraphLaunch(e, s1), fa = (int)cuMemFree_v2(a), fb = (int)cuMemFree_v2(b);
        printf("cuGraphLaunch, cuMemFree_v2 1M, 4M -> %d %d %d\n", l, fa, fb);
    }
    cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("cuMemAllocAsync 16M, captured -> %d\n", (int)cuMemAllocAsync(&x, 16 << 20, s1));
    printf("cuStreamSynchronize while captured -> %d\n", (int)cuStreamSynchronize(s1));
    printf("cuStreamEndCapture of the invalidated capture -> %d\n", (int)cuStreamEndCapture(s1, &bad));
    return 0;
}

/* ---------------------------------------------------------- graph-ptds */

static CUdeviceptr ptds_mem[2];
static pthread_barrier_t ptds_bar;
static int ptds_said[2][5];

/* Two threads capture their own per-thread default streams at once (the
 * second's capture ends first), 1M and 2M; each launches its graph twice
 * and frees what the launch left. */
static void *ptds_thread(void *arg) {
    long i = (long)arg;
    CUcontext c;
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    cuDevicePrimaryCtxRetain(&c, 0);
    cuCtxSetCurrent(c);
    CUstream s = CU_STREAM_PER_THREAD;
    int *said = ptds_said[i];
    said[0] = (int)cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    pthread_barrier_wait(&ptds_bar);
    said[1] = (int)cuMemAllocAsync(&ptds_mem[i], (size_t)(i + 1) << 20, s);
    pthread_barrier_wait(&ptds_bar);
    if (i == 0) pthread_barrier_wait(&ptds_bar); /* the second thread's capture ends first */
    said[2] = (int)cuStreamEndCapture(s, &g);
    if (i == 1) pthread_barrier_wait(&ptds_bar);
    pthread_barrier_wait(&ptds_bar);
    said[3] = (int)cuGraphInstantiate(&e, g, 0);
    for (int k = 0; k < 2; k++) said[4] += cuGraphLaunch(e, s) != CUDA_SUCCESS || cuMemFree_v2(ptds_mem[i]) != CUDA_SUCCESS;
    return NULL;
}

static int graph_ptds(void) {
    pthread_t t[2];
    cuInit(0);
    pthread_barrier_init(&ptds_bar, NULL, 2);
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, ptds_thread, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        printf("thread %d: begin %d alloc %d end %d instantiate %d, launches and frees failed %d\n", i, ptds_said[i][0],
               ptds_said[i][1], ptds_said[i][2], ptds_said[i][3], ptds_said[i][4]);
    return 0;
}

/* ------------------------------------------------------ graph-end-fails */

/* An end of a capture the driver refuses while the capture goes on (no
 * graph to return it in): the capture's 8M node stays its node; 4M more,
 * the end, a launch, both freed after it. */
static int graph_end_fails(void) {
    CUstream s;
    CUdeviceptr a, b;
    CUgraph g;
    CUgraphExec e;
    cuInit(0);
    cuStreamCreate(&s, 0);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("cuMemAllocAsync 8M, captured -> %d\n", (int)cuMemAllocAsync(&a, 8 << 20, s));
    printf("cuStreamEndCapture with no graph -> %d\n", (int)cuStreamEndCapture(s, NULL));
    printf("cuMemAllocAsync 4M, still captured -> %d\n", (int)cuMemAllocAsync(&b, 4 << 20, s));
    printf("cuStreamEndCapture -> %d\n", (int)cuStreamEndCapture(s, &g));
    cuGraphInstantiate(&e, g, 0);
    printf("cuGraphLaunch -> %d\n", (int)cuGraphLaunch(e, s));
    printf("cuMemFree_v2 8M, 4M -> %d", (int)cuMemFree_v2(a));
    printf(" %d\n", (int)cuMemFree_v2(b));
    return 0;
}

/* ----------------------------------------------------- graph-owner-gone */

/* A's launch leaves 8M in use; A's exec and graph are destroyed; B,
 * captured, frees the 8M (the memory of a graph that is gone is still a
 * graph allocation): it is freed when B runs, after a 1M cuMemAlloc_v2. */
static int graph_owner_gone(void) {
    CUstream s;
    CUdeviceptr a, m;
    CUgraph ga, gb;
    CUgraphExec ea, eb;
    cuInit(0);
    cuStreamCreate(&s, 0);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cuMemAllocAsync(&a, 8 << 20, s);
    cuStreamEndCapture(s, &ga);
    cuGraphInstantiate(&ea, ga, 0);
    printf("cuGraphLaunch A -> %d\n", (int)cuGraphLaunch(ea, s));
    printf("A destroyed -> %d", (int)cuGraphExecDestroy(ea));
    printf(" %d\n", (int)cuGraphDestroy(ga));
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("B: cuMemFreeAsync A's 8M, captured -> %d\n", (int)cuMemFreeAsync(a, s));
    cuStreamEndCapture(s, &gb);
    cuGraphInstantiate(&eb, gb, 0);
    printf("cuMemAlloc_v2 1M -> %d\n", (int)cuMemAlloc_v2(&m, 1 << 20));
    printf("cuGraphLaunch B -> %d\n", (int)cuGraphLaunch(eb, s));
    printf("cuMemFree_v2 1M -> %d\n", (int)cuMemFree_v2(m));
    return 0;
}

/* ---------------------------------------------- graph-invalidated-reuse */

/* Four captures of a 16M node each, invalidated by cuStreamSynchronize
 * (their ends fail and the driver destroys their graphs, whose handles it
 * may hand out again); then a captured graph and a graph built by hand,
 * each of 1M, launched and freed. */
static int graph_invalidated_reuse(void) {
    CUstream s;
    CUdeviceptr x, a, b;
    CUgraph bad, g1, g2;
    CUgraphExec e1, e2;
    CUgraphNode n;
    int fails = 0, reused = 0;
    CUgraph seen[5] = {NULL};
    CUstreamCaptureStatus st;
    cuInit(0);
    cuStreamCreate(&s, 0);
    for (int i = 0; i < 4; i++) {
        cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        cuStreamGetCaptureInfo(s, &st, NULL, &seen[i], NULL, NULL, NULL);
        fails += cuMemAllocAsync(&x, 16 << 20, s) != CUDA_SUCCESS;
        fails += cuStreamSynchronize(s) != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        fails += cuStreamEndCapture(s, &bad) != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    printf("four invalidated captures, unexpected results %d\n", fails);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cuStreamGetCaptureInfo(s, &st, NULL, &seen[4], NULL, NULL, NULL);
    for (int i = 1; i < 5; i++) reused += seen[i] == seen[0];
    printf("graph handles handed out again: %d\n", reused);
    cuMemAllocAsync(&a, 1 << 20, s);
    cuStreamEndCapture(s, &g1);
    cuGraphInstantiate(&e1, g1, 0);
    cuGraphCreate(&g2, 0);
    CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(0, 1 << 20);
    cuGraphAddMemAllocNode(&n, g2, NULL, 0, &p);
    b = p.dptr;
    cuGraphInstantiate(&e2, g2, 0);
    printf("launches and frees -> %d", (int)cuGraphLaunch(e1, s));
    printf(" %d", (int)cuMemFree_v2(a));
    printf(" %d", (int)cuGraphLaunch(e2, s));
    printf(" %d\n", (int)cuMemFree_v2(b));
    return 0;
}

/* ------------------------------------------------ graph-two-device-oom */

static CUresult hold_50m_on_1(CUdeviceptr *p) {
    CUcontext c;
    cuDevicePrimaryCtxRetain(&c, 1);
    cuCtxPushCurrent(c);
    CUresult r = cuMemAlloc_v2(p, 50 << 20);
    cuCtxPopCurrent(&c);
    return r;
}

/* Two 64M devices: a graph built by hand with 40M on device 0 and 20M on
 * device 1, where 50M are held: the launch fails for want of device 1's
 * memory, though device 0's need is the larger. */
static int graph_two_device_oom(void) {
    CUstream s;
    CUdeviceptr h;
    CUgraph g;
    CUgraphExec e;
    CUgraphNode n;
    cuInit(0);
    cuStreamCreate(&s, 0);
    cuGraphCreate(&g, 0);
    CUDA_MEM_ALLOC_NODE_PARAMS p0 = alloc_params(0, 40 << 20), p1 = alloc_params(1, 20 << 20);
    cuGraphAddMemAllocNode(&n, g, NULL, 0, &p0);
    cuGraphAddMemAllocNode(&n, g, NULL, 0, &p1);
    cuGraphAddMemFreeNode(&n, g, NULL, 0, p0.dptr);
    cuGraphAddMemFreeNode(&n, g, NULL, 0, p1.dptr);
    cuGraphInstantiate(&e, g, 0);
    printf("cuMemAlloc_v2 50M on device 1 -> %d\n", (int)hold_50m_on_1(&h));
    printf("cuGraphLaunch -> %d\n", (int)cuGraphLaunch(e, s));
    printf("cuMemFree_v2 50M -> %d\n", (int)cuMemFree_v2(h));
    return 0;
}

/* ---------------------------------------------------- graph-launch-oom */

static CUresult hold_48m(CUdeviceptr *p) { return cuMemAlloc_v2(p, 48 << 20); }

/* On a 64M device: a graph built by hand with a 24M allocation node that
 * it frees; 48M held by cuMemAlloc_v2 leave its launch no room (the
 * launch fails with CUDA_ERROR_OUT_OF_MEMORY); once they are freed it
 * runs. */
static int graph_launch_oom(void) {
    CUgraph g;
    CUgraphExec e;
    CUgraphNode n;
    CUstream s;
    CUdeviceptr h;
    cuInit(0);
    cuStreamCreate(&s, 0);
    cuGraphCreate(&g, 0);
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(0, 24 << 20);
    printf("cuGraphAddMemAllocNode 24M -> %d\n", (int)cuGraphAddMemAllocNode(&n, g, NULL, 0, &a));
    printf("cuGraphAddMemFreeNode 24M -> %d\n", (int)cuGraphAddMemFreeNode(&n, g, NULL, 0, a.dptr));
    printf("cuGraphInstantiate -> %d\n", (int)cuGraphInstantiate(&e, g, 0));
    printf("cuMemAlloc_v2 48M -> %d\n", (int)hold_48m(&h));
    printf("cuGraphLaunch with 48M held -> %d\n", (int)cuGraphLaunch(e, s));
    printf("cuMemFree_v2 48M -> %d\n", (int)cuMemFree_v2(h));
    printf("cuGraphLaunch -> %d\n", (int)cuGraphLaunch(e, s));
    return 0;
}

/* ------------------------------------------------------ host-register */

/* CUDA 4.0's cuMemHostRegister, before cuda.h names the _v2 so. */
CUresult cuMemHostRegister(void *p, size_t bytes, unsigned int flags) __asm__("cuMemHostRegister");

/* The program's own memory page-locked through each door: the driver's
 * two versions and the runtime's; an overlap, a non-base address and a
 * cuMemFreeHost of registered memory refused by the driver; one range left
 * registered at exit. */
static int host_register(void) {
    char *a = aligned_alloc(4096, 1 << 20), *b = aligned_alloc(4096, 2 << 20), *c = aligned_alloc(4096, 64 << 10);
    void *h;
    printf("cuMemHostRegister_v2 1M -> %d\n", (int)cuMemHostRegister_v2(a, 1 << 20, CU_MEMHOSTREGISTER_PORTABLE));
    printf("cuMemHostRegister_v2 overlapping -> %d\n", (int)cuMemHostRegister_v2(a + 4096, 4096, 0));
    printf("cuMemHostRegister_v2 0 bytes -> %d\n", (int)cuMemHostRegister_v2(c, 0, 0));
    printf("cuMemHostRegister 64K -> %d\n", (int)cuMemHostRegister(c, 64 << 10, 0));
    printf("cudaHostRegister 2M -> %d\n", (int)cudaHostRegister(b, 2 << 20, cudaHostRegisterDefault));
    printf("cuMemHostAlloc 8K -> %d\n", (int)cuMemHostAlloc(&h, 8192, 0));
    printf("cuMemHostRegister_v2 over pinned -> %d\n", (int)cuMemHostRegister_v2(h, 4096, 0));
    printf("cuMemHostUnregister inside -> %d\n", (int)cuMemHostUnregister(a + 4096));
    printf("cuMemFreeHost registered -> %d\n", (int)cuMemFreeHost(a));
    printf("cuMemHostUnregister pinned -> %d\n", (int)cuMemHostUnregister(h));
    printf("cuMemHostUnregister 1M -> %d\n", (int)cuMemHostUnregister(a));
    printf("cuMemHostUnregister 1M again -> %d\n", (int)cuMemHostUnregister(a));
    printf("cudaHostUnregister 64K -> %d\n", (int)cudaHostUnregister(c));
    printf("cuMemFreeHost 8K -> %d\n", (int)cuMemFreeHost(h));
    return 0; /* b stays registered */
}

/* ------------------------------------------------------- mangled-leak */

/* C++ code in a process without a C++ runtime (a library built with
 * -static-libstdc++): here a C function under the mangled name of
 * mylib::Pool::grab(unsigned long), which keeps 5000 bytes. */
__attribute__((noinline)) CUresult pool_grab(size_t bytes) __asm__("_ZN5mylib4Pool4grabEm");
__attribute__((noinline)) CUresult pool_grab(size_t bytes) {
    CUdeviceptr p;
    CUresult r = cuMemAlloc_v2(&p, bytes);
    __asm__ volatile("" : : : "memory");
    return r;
}

static int mangled_leak(void) {
    printf("grab -> %d\n", (int)pool_grab(5000));
    return 0;
}

/* -------------------------------------------------------- mark-reset */

static void mark_said(struct vramtrace_api *vt, const char *name, int m) {
    struct vramtrace_usage u;
    memset(&u, 0, sizeof u);
    vt->usage(m, -1, &u);
    char buf[16384];
    long n = vt->leaks(m, buf, sizeof buf);
    const char *sum = n > 0 ? strstr(buf, "SUMMARY") : NULL;
    printf("%s: live %llu in %llu; %s", name, (unsigned long long)u.live_bytes, (unsigned long long)u.live_count,
           sum ? sum : "no leaks\n");
    vt->mark_end(m);
}

/* Per-test marks around a primary context's reset: the first test's
 * allocation is released by the reset without a free (its leak, reported
 * for it); the tests after it report their own leaks only. `own`: a
 * context of the program's own was made and destroyed first (the reset
 * then releases nothing at once), the second test takes as much as the
 * first (and so its address: the first's memory is released then), and
 * a mark over all the tests ("all") is read at the end. */
static int mark_reset(int own) {
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    CUcontext c;
    CUdeviceptr p, first;
    cuInit(0);
    int all = 0;
    if (own) {
        all = vt.mark();
        if (cuCtxCreate(&c, NULL, 0, 0) != CUDA_SUCCESS || cuCtxDestroy(c) != CUDA_SUCCESS) return 1;
    }
    cuDevicePrimaryCtxRetain(&c, 0);
    cuCtxSetCurrent(c);
    int m = vt.mark();
    printf("alloc -> %d\n", (int)cuMemAlloc_v2(&first, 3333));
    printf("reset -> %d\n", (int)cuDevicePrimaryCtxReset(0));
    cuDevicePrimaryCtxRetain(&c, 0);
    cuCtxSetCurrent(c);
    mark_said(&vt, "reset", m);
    m = vt.mark();
    printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p, own ? 3333 : 1234));
    if (own) printf("the first's address %d\n", p == first);
    mark_said(&vt, "leak", m);
    m = vt.mark();
    mark_said(&vt, "nothing", m);
    if (own) mark_said(&vt, "all", all);
    return 0;
}

/* ------------------------------------------------------ long-growth N */

/* N steps; from the 1001st on, each keeps 128 KiB from one call site (a
 * leak of 128 KiB a step over N - 1000 steps, past the 4096 step
 * boundaries kept when N passes them). */
static int long_growth(long n) {
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    CUdeviceptr p;
    for (long k = 0; k < n; k++) {
        if (k >= 1000 && leaky(&p, 128 << 10) != CUDA_SUCCESS) printf("step %ld failed\n", k);
        vt.step();
    }
    printf("%ld steps\n", n);
    return 0;
}

/* ---------------------------------------------- term-wait, term-closefrom, term-query, term-fork */

/* Three 1 MiB allocations, the second freed, then waiting for signals:
 * a SIGTERM from outside ends the process. */
static int term_wait(void) {
    CUdeviceptr p[3];
    for (int i = 0; i < 3; i++) printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p[i], 1 << 20));
    printf("free -> %d\n", (int)cuMemFree_v2(p[1]));
    printf("ready\n");
    for (;;) pause();
    return 0;
}

/* f<name> in the current folder, "a\n" written to it, at the lowest number
 * free from `from` up; its number, or -1. */
static int open_at(const char *name, int from) {
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "a\n", 2) != 2) return -1;
    if (fd >= from) return fd;
    int moved = fcntl(fd, F_DUPFD, from);
    close(fd);
    return moved;
}

/* term-wait's allocations, then every descriptor from 3 up closed, as a
 * daemon does after its start (close_range(3, ~0U, 0), else close of 3 to
 * 1023); with "reopen", files opened at the numbers freed: low0..low9 at
 * the lowest (from 3), high0..high15 at 700 and up (where vramtrace keeps
 * its own); then waiting for signals. */
static int term_closefrom(int reopen) {
    CUdeviceptr p[3];
    for (int i = 0; i < 3; i++) printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p[i], 1 << 20));
    printf("free -> %d\n", (int)cuMemFree_v2(p[1]));
    fflush(stdout);
    if (syscall(SYS_close_range, 3, ~0U, 0) != 0)
        for (int fd = 3; fd < 1024; fd++) close(fd);
    if (reopen) {
        char name[16];
        int low[10], high[16];
        for (int i = 0; i < 10; i++) {
            snprintf(name, sizeof name, "low%d", i);
            low[i] = open_at(name, 3);
        }
        for (int i = 0; i < 16; i++) {
            snprintf(name, sizeof name, "high%d", i);
            high[i] = open_at(name, 700);
        }
        /* Where each lands among the free numbers is the kernel's to say
         * (vramtrace's own threads may hold one of 700 and up, or a low one
         * on its way there, for a moment): each opened, at or above its
         * floor. */
        int nlow = 0, nhigh = 0;
        for (int i = 0; i < 10; i++) nlow += low[i] >= 3;
        for (int i = 0; i < 16; i++) nhigh += high[i] >= 700;
        printf("files %d at 3 and up, %d at 700 and up\n", nlow, nhigh);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
    return 0;
}

static volatile sig_atomic_t term_got;
static void on_term_flag(int sig) {
    (void)sig;
    term_got = 1;
}

/* After its first GPU allocation the program asks what SIGTERM does, then
 * puts its own handler in: that one runs, and the program exits 7. */
static int term_query(void) {
    CUdeviceptr p;
    printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p, 1 << 20));
    struct sigaction old, sa;
    sigaction(SIGTERM, NULL, &old);
    printf("SIGTERM: %s\n", old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO) ? "default" : "handler");
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term_flag;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old);
    printf("replaced: %s\n", old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO) ? "default" : "handler");
    printf("ready\n");
    while (!term_got) pause();
    printf("handler ran\n");
    return 7;
}

/* A SIGTERM while the program sleeps: its sleep must not return (the
 * program would go on, and exit 0, as if it had not been signalled). */
static int term_sleep(void) {
    CUdeviceptr p;
    printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p, 1 << 20));
    printf("ready\n");
    unsigned left = sleep(30);
    printf("sleep returned, %u s left\n", left);
    return 0;
}

static sighandler_t term_old;
static void on_term_chain(int sig) {
    if (term_old != SIG_DFL && term_old != SIG_IGN && term_old != SIG_ERR) term_old(sig);
    signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
}

/* After its first GPU call the program puts its handler in with signal(),
 * keeping the old one, which it calls, then dies of SIGTERM by its
 * default (a cleanup handler's usual shape). */
static int term_chain(void) {
    CUdeviceptr p;
    printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p, 1 << 20));
    term_old = signal(SIGTERM, on_term_chain);
    printf("old: %s\n", term_old == SIG_DFL ? "default" : "a handler");
    printf("ready\n");
    for (;;) pause();
    return 0;
}

/* A handler of the program's own for a while, then SIGTERM's default put
 * back: with signal(), the old handler it returned; with sigaction, an
 * explicit SIG_DFL. */
static int term_restore(int with_sigaction) {
    CUdeviceptr p;
    printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p, 1 << 20));
    sighandler_t old = signal(SIGTERM, on_term_flag);
    if (with_sigaction) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGTERM, &dfl, NULL);
    } else {
        signal(SIGTERM, old);
    }
    struct sigaction now;
    sigaction(SIGTERM, NULL, &now);
    printf("restored: %s\n", now.sa_handler == SIG_DFL && !(now.sa_flags & SA_SIGINFO) ? "default" : "handler");
    printf("ready\n");
    for (;;) pause();
    return 0;
}

/* n small allocations kept (an exit dump that takes a while), then
 * "exiting" and the exit. */
static int term_at_exit(long n) {
    CUdeviceptr p;
    for (long i = 0; i < n; i++)
        if (cuMemAlloc_v2(&p, 512) != CUDA_SUCCESS) return 1;
    printf("ready\n");
    fflush(stdout);
    return 0;
}

/* A forked child that never uses the GPU is ended by a SIGTERM: it dies of
 * it with no output of vramtrace's and the parent goes on; then the parent
 * waits for its own SIGTERM. */
static int term_fork(void) {
    CUdeviceptr p;
    printf("alloc -> %d\n", (int)cuMemAlloc_v2(&p, 1 << 20));
    pid_t c = fork();
    if (c == 0) {
        for (;;) pause();
    }
    printf("child %d\n", (int)c);
    printf("ready\n");
    int st;
    while (waitpid(c, &st, 0) < 0 && errno == EINTR) {}
    printf("child: %s %d\n", WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    printf("waiting\n");
    for (;;) pause();
    return 0;
}

/* ------------------------------------------------------------ untold */

/* Failures one post-mortem a second cannot all tell: 600 MiB twice (a
 * retry), 700 MiB twice, a pause, 800 MiB, then 900 and 950 MiB. */
__attribute__((noinline)) static CUresult untold_try(size_t mib) {
    CUdeviceptr p;
    CUresult r = cuMemAlloc_v2(&p, mib << 20);
    __asm__ volatile("" : : : "memory");
    return r;
}

static int untold(void) {
    static const size_t first[] = {600, 600, 700, 700}, then[] = {800, 900, 950};
    for (size_t i = 0; i < 4; i++) printf("%zu -> %d\n", first[i], (int)untold_try(first[i]));
    struct timespec t = {1, 300000000};
    nanosleep(&t, NULL);
    for (size_t i = 0; i < 3; i++) printf("%zu -> %d\n", then[i], (int)untold_try(then[i]));
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "fork-usr2") == 0) return fork_usr2();
    if (strcmp(mode, "no-cuda") == 0) return no_cuda();
    if (strcmp(mode, "errno") == 0) return errno_kept();
    if (strcmp(mode, "exit-in-hook") == 0 || strcmp(mode, "exit0-in-hook") == 0 || strcmp(mode, "alloc-in-hook") == 0)
        return oom_then(mode);
    if (strcmp(mode, "signal-allocs") == 0) return signal_allocs();
    if (strcmp(mode, "exit-in-driver") == 0) return exit_in_driver();
    if (strcmp(mode, "oom-closed-stderr") == 0) return oom_closed_stderr();
    if (strcmp(mode, "arrays-null") == 0) return arrays_null();
    if (strcmp(mode, "host-ooms") == 0) return host_ooms();
    if (strcmp(mode, "host-vmm") == 0) return host_vmm();
    if (strcmp(mode, "host-register") == 0) return host_register();
    if (strcmp(mode, "pool-devices") == 0) return pool_devices();
    if (strcmp(mode, "mixed-site-oom") == 0) return mixed_site_oom();
    if (strcmp(mode, "mixed-site-growth") == 0) return mixed_site_growth();
    if (strcmp(mode, "chdir-leak") == 0) return chdir_leak(argc > 2 ? argv[2] : "/", 0);
    if (strcmp(mode, "chdir-then-leak") == 0) return chdir_leak(argc > 2 ? argv[2] : "/", 1);
    if (strcmp(mode, "oom-maps") == 0) return oom_maps();
    if (strcmp(mode, "host-oom") == 0) return host_oom();
    if (strcmp(mode, "fork-many-live") == 0) return fork_many_live(argc > 2 ? atol(argv[2]) : 0);
    if (strcmp(mode, "pitched-budget") == 0) return pitched_budget();
    if (strcmp(mode, "graph") == 0) return graph();
    if (strcmp(mode, "graph-gpa") == 0) return graph_gpa();
    if (strcmp(mode, "graph-built") == 0) return graph_built();
    if (strcmp(mode, "graph-built-runtime") == 0) return graph_built_runtime();
    if (strcmp(mode, "graph-launch-oom") == 0) return graph_launch_oom();
    if (strcmp(mode, "graph-foreign") == 0) return graph_foreign();
    if (strcmp(mode, "graph-end-fails") == 0) return graph_end_fails();
    if (strcmp(mode, "graph-owner-gone") == 0) return graph_owner_gone();
    if (strcmp(mode, "graph-invalidated-reuse") == 0) return graph_invalidated_reuse();
    if (strcmp(mode, "graph-two-device-oom") == 0) return graph_two_device_oom();
    if (strcmp(mode, "graph-joined") == 0) return graph_joined();
    if (strcmp(mode, "graph-ptds") == 0) return graph_ptds();
    if (strcmp(mode, "graph-auto-free") == 0) return graph_auto_free();
    if (strcmp(mode, "graph-budget") == 0) return graph_budget();
    if (strcmp(mode, "budget-churn") == 0) return budget_churn();
    if (strcmp(mode, "devices-growth") == 0) return devices_growth(0);
    if (strcmp(mode, "devices-growth-empty") == 0) return devices_growth(1);
    if (strcmp(mode, "runtime-array-size") == 0) return runtime_array_size();
    if (strcmp(mode, "mangled-leak") == 0) return mangled_leak();
    if (strcmp(mode, "untold") == 0) return untold();
    if (strcmp(mode, "term-restore") == 0) return term_restore(0);
    if (strcmp(mode, "term-restore-sigaction") == 0) return term_restore(1);
    if (strcmp(mode, "mark-reset") == 0) return mark_reset(argc > 2 && strcmp(argv[2], "own") == 0);
    if (strcmp(mode, "long-growth") == 0) return long_growth(argc > 2 ? atol(argv[2]) : 0);
    if (strcmp(mode, "term-wait") == 0) return term_wait();
    if (strcmp(mode, "term-closefrom") == 0) return term_closefrom(argc > 2 && strcmp(argv[2], "reopen") == 0);
    if (strcmp(mode, "term-query") == 0) return term_query();
    if (strcmp(mode, "term-fork") == 0) return term_fork();
    if (strcmp(mode, "term-sleep") == 0) return term_sleep();
    if (strcmp(mode, "term-chain") == 0) return term_chain();
    if (strcmp(mode, "term-at-exit") == 0) return term_at_exit(argc > 2 ? atol(argv[2]) : 0);
    fprintf(stderr, "usage: t_host MODE\n");
    return 2;
}
