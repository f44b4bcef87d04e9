/* simcudart.c -- a stand-in CUDA runtime for tests.
 *
 * It reaches the driver the way the real runtime does: dlopen("libcuda.so.1"),
 * dlsym(handle, "cuGetProcAddress_v2"), a self-look-up of "cuGetProcAddress"
 * at version 12000, then every driver function through that pointer. Built
 * twice: as a shared library (its cuda* names exported, like libcudart.so)
 * and as a static archive (like libcudart_static.a, where a program's calls
 * bind inside the executable and only the driver level can see them).
 *
 * Only the functions the tests and the demo use are here. Without a driver it
 * answers cudaErrorInsufficientDriver, as the real runtime does. */
#include <cuda_runtime_api.h>
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#define RT_EXPORT __attribute__((visibility("default")))

/* Exported by the real runtime, declared only in its internal headers. */
RT_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
RT_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);

static struct {
    int state; /* 0 not tried, 1 ready, -1 no driver */
    gpa_fn gpa;
    CUresult (*init)(unsigned int);
    CUresult (*device_get_count)(int *);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*mem_alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*mem_alloc_managed)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*mem_alloc_host)(void **, size_t);
    CUresult (*mem_host_alloc)(void **, size_t, unsigned int);
    CUresult (*mem_free_host)(void *);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*alloc_async_ptsz)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*free_async_ptsz)(CUdeviceptr, CUstream);
    CUresult (*mem_get_info)(size_t *, size_t *);
    CUresult (*array_create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    CUresult (*array3d_create)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
    CUresult (*mipmapped_create)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
    CUresult (*array_destroy)(CUarray);
    CUresult (*mipmapped_destroy)(CUmipmappedArray);
    CUresult (*ipc_get)(CUipcMemHandle *, CUdeviceptr);
    CUresult (*ipc_open)(CUdeviceptr *, CUipcMemHandle, unsigned int);
    CUresult (*ipc_close)(CUdeviceptr);
} drv;

static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static __thread int rt_device = 0;

static void *rt_get(const char *name, int version, cuuint64_t flags) {
    void *p = NULL;
    if (drv.gpa(name, &p, version, flags, NULL) != CUDA_SUCCESS) return NULL;
    return p;
}

static void rt_load(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { drv.state = -1; return; }
    gpa_fn first = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!first) { drv.state = -1; return; }
    void *self = NULL;
    if (first("cuGetProcAddress", &self, 12000, 0, NULL) != CUDA_SUCCESS || !self) {
        drv.state = -1;
        return;
    }
    drv.gpa = (gpa_fn)self;
    const int v = 13000;
    *(void **)&drv.init = rt_get("cuInit", 2000, 0);
    *(void **)&drv.device_get_count = rt_get("cuDeviceGetCount", 2000, 0);
    *(void **)&drv.primary_retain = rt_get("cuDevicePrimaryCtxRetain", 7000, 0);
    *(void **)&drv.ctx_set = rt_get("cuCtxSetCurrent", 4000, 0);
    *(void **)&drv.ctx_get_device = rt_get("cuCtxGetDevice", 2000, 0);
    *(void **)&drv.mem_alloc = rt_get("cuMemAlloc", 3020, 0);
    *(void **)&drv.mem_free = rt_get("cuMemFree", 3020, 0);
    *(void **)&drv.mem_alloc_pitch = rt_get("cuMemAllocPitch", 3020, 0);
    *(void **)&drv.mem_alloc_managed = rt_get("cuMemAllocManaged", 6000, 0);
    *(void **)&drv.mem_alloc_host = rt_get("cuMemAllocHost", 3020, 0);
    *(void **)&drv.mem_host_alloc = rt_get("cuMemHostAlloc", 2020, 0);
    *(void **)&drv.mem_free_host = rt_get("cuMemFreeHost", 2000, 0);
    *(void **)&drv.alloc_async = rt_get("cuMemAllocAsync", v, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    *(void **)&drv.alloc_async_ptsz = rt_get("cuMemAllocAsync", v, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    *(void **)&drv.free_async = rt_get("cuMemFreeAsync", v, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    *(void **)&drv.free_async_ptsz = rt_get("cuMemFreeAsync", v, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    *(void **)&drv.mem_get_info = rt_get("cuMemGetInfo", 3020, 0);
    *(void **)&drv.array_create = rt_get("cuArrayCreate", 3020, 0);
    *(void **)&drv.array3d_create = rt_get("cuArray3DCreate", 3020, 0);
    *(void **)&drv.mipmapped_create = rt_get("cuMipmappedArrayCreate", 5000, 0);
    *(void **)&drv.array_destroy = rt_get("cuArrayDestroy", 2000, 0);
    *(void **)&drv.mipmapped_destroy = rt_get("cuMipmappedArrayDestroy", 5000, 0);
    *(void **)&drv.ipc_get = rt_get("cuIpcGetMemHandle", 4010, 0);
    *(void **)&drv.ipc_open = rt_get("cuIpcOpenMemHandle", 11000, 0);
    *(void **)&drv.ipc_close = rt_get("cuIpcCloseMemHandle", 4010, 0);
    if (!drv.init || drv.init(0) != CUDA_SUCCESS) { drv.state = -1; return; }
    drv.state = 1;
}

/* Make sure the driver is loaded and the calling thread has a context. */
static cudaError_t rt_ready(void) {
    pthread_once(&rt_once, rt_load);
    if (drv.state != 1) return cudaErrorInsufficientDriver;
    CUcontext ctx;
    if (drv.primary_retain(&ctx, rt_device) != CUDA_SUCCESS) return cudaErrorInvalidDevice;
    drv.ctx_set(ctx);
    return cudaSuccess;
}

static cudaError_t rt_err(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    default: return cudaErrorUnknown;
    }
}

#define RT_BEGIN() do { cudaError_t e_ = rt_ready(); if (e_) return e_; } while (0)

RT_EXPORT cudaError_t cudaGetDeviceCount(int *n) {
    RT_BEGIN();
    return rt_err(drv.device_get_count(n));
}

RT_EXPORT cudaError_t cudaSetDevice(int d) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e) return e;
    if (d < 0 || d >= n) return cudaErrorInvalidDevice;
    rt_device = d;
    return rt_ready();
}

RT_EXPORT cudaError_t cudaGetDevice(int *d) {
    if (!d) return cudaErrorInvalidValue;
    *d = rt_device;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaMalloc(void **p, size_t n) {
    RT_BEGIN();
    if (!p) return cudaErrorInvalidValue;
    if (n == 0) { *p = NULL; return cudaSuccess; }
    return rt_err(drv.mem_alloc((CUdeviceptr *)p, n));
}

RT_EXPORT cudaError_t cudaFree(void *p) {
    RT_BEGIN();
    return rt_err(drv.mem_free((CUdeviceptr)p));
}

RT_EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h) {
    RT_BEGIN();
    return rt_err(drv.mem_alloc_pitch((CUdeviceptr *)p, pitch, w, h, 4));
}

RT_EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags) {
    RT_BEGIN();
    return rt_err(drv.mem_alloc_managed((CUdeviceptr *)p, n, flags));
}

RT_EXPORT cudaError_t cudaMallocHost(void **p, size_t n) {
    RT_BEGIN();
    return rt_err(drv.mem_alloc_host(p, n));
}

RT_EXPORT cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags) {
    RT_BEGIN();
    return rt_err(drv.mem_host_alloc(p, n, flags));
}

RT_EXPORT cudaError_t cudaFreeHost(void *p) {
    RT_BEGIN();
    return rt_err(drv.mem_free_host(p));
}

RT_EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
    RT_BEGIN();
    return rt_err(drv.alloc_async((CUdeviceptr *)p, n, (CUstream)s));
}

RT_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s) {
    RT_BEGIN();
    return rt_err(drv.alloc_async_ptsz((CUdeviceptr *)p, n, (CUstream)s));
}

RT_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    RT_BEGIN();
    return rt_err(drv.free_async((CUdeviceptr)p, (CUstream)s));
}

RT_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s) {
    RT_BEGIN();
    return rt_err(drv.free_async_ptsz((CUdeviceptr)p, (CUstream)s));
}

RT_EXPORT cudaError_t cudaMemGetInfo(size_t *f, size_t *t) {
    RT_BEGIN();
    return rt_err(drv.mem_get_info(f, t));
}

/* A channel description as the driver's array format (32-bit float, or
 * unsigned ints of the description's width) and channel count. */
static void rt_format(const struct cudaChannelFormatDesc *c, CUarray_format *f, unsigned *n) {
    int bits = c->x > 0 ? c->x : 8;
    *n = (unsigned)((c->x > 0) + (c->y > 0) + (c->z > 0) + (c->w > 0));
    if (*n == 0) *n = 1;
    if (c->f == cudaChannelFormatKindFloat) *f = bits == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
    else *f = bits == 8 ? CU_AD_FORMAT_UNSIGNED_INT8 : bits == 16 ? CU_AD_FORMAT_UNSIGNED_INT16 : CU_AD_FORMAT_UNSIGNED_INT32;
}

RT_EXPORT cudaError_t cudaMallocArray(cudaArray_t *a, const struct cudaChannelFormatDesc *desc, size_t w,
                                      size_t h, unsigned int flags) {
    (void)flags;
    RT_BEGIN();
    if (!desc) return cudaErrorInvalidValue;
    CUDA_ARRAY_DESCRIPTOR d = {w, h, CU_AD_FORMAT_FLOAT, 1};
    rt_format(desc, &d.Format, &d.NumChannels);
    return rt_err(drv.array_create((CUarray *)a, &d));
}

RT_EXPORT cudaError_t cudaMalloc3DArray(cudaArray_t *a, const struct cudaChannelFormatDesc *desc,
                                        struct cudaExtent e, unsigned int flags) {
    RT_BEGIN();
    if (!desc) return cudaErrorInvalidValue;
    CUDA_ARRAY3D_DESCRIPTOR d = {e.width, e.height, e.depth, CU_AD_FORMAT_FLOAT, 1, flags};
    rt_format(desc, &d.Format, &d.NumChannels);
    return rt_err(drv.array3d_create((CUarray *)a, &d));
}

RT_EXPORT cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t *a, const struct cudaChannelFormatDesc *desc,
                                               struct cudaExtent e, unsigned int levels, unsigned int flags) {
    RT_BEGIN();
    if (!desc) return cudaErrorInvalidValue;
    CUDA_ARRAY3D_DESCRIPTOR d = {e.width, e.height, e.depth, CU_AD_FORMAT_FLOAT, 1, flags};
    rt_format(desc, &d.Format, &d.NumChannels);
    return rt_err(drv.mipmapped_create((CUmipmappedArray *)a, &d, levels));
}

RT_EXPORT cudaError_t cudaFreeArray(cudaArray_t a) {
    RT_BEGIN();
    return rt_err(drv.array_destroy((CUarray)a));
}

RT_EXPORT cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t a) {
    RT_BEGIN();
    return rt_err(drv.mipmapped_destroy((CUmipmappedArray)a));
}

RT_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p) {
    RT_BEGIN();
    return rt_err(drv.ipc_get((CUipcMemHandle *)h, (CUdeviceptr)p));
}

RT_EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags) {
    RT_BEGIN();
    CUipcMemHandle ch;
    memcpy(&ch, &h, sizeof ch);
    return rt_err(drv.ipc_open((CUdeviceptr *)p, ch, flags));
}

RT_EXPORT cudaError_t cudaIpcCloseMemHandle(void *p) {
    RT_BEGIN();
    return rt_err(drv.ipc_close((CUdeviceptr)p));
}

RT_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol,
        void **fn, unsigned int version, unsigned long long flags,
        enum cudaDriverEntryPointQueryResult *status) {
    RT_BEGIN();
    CUdriverProcAddressQueryResult st;
    CUresult r = drv.gpa(symbol, fn, (int)version, flags, &st);
    if (status) *status = (enum cudaDriverEntryPointQueryResult)st;
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorSymbolNotFound;
}

RT_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn,
        unsigned long long flags, enum cudaDriverEntryPointQueryResult *status) {
    return cudaGetDriverEntryPointByVersion(symbol, fn, 13000, flags, status);
}

RT_EXPORT const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    default: return "unknown error";
    }
}
