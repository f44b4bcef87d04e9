/* simcudart.c -- a stand-in CUDA runtime for tests.
 *
 * It reaches the driver the way the real runtime does: dlopen("libcuda.so.1"),
 * dlsym(handle, "cuGetProcAddress_v2"), a self-look-up of "cuGetProcAddress"
 * at version 12000, then every driver function through that pointer. Built
 * three ways: as libcudart_sim.so (its cuda* names exported, like
 * libcudart.so), as a static archive (like libcudart_static.a, where a
 * program's calls bind inside the executable and only the driver level can
 * see them), and as libcudart.so.13 with the real runtime's symbol version,
 * which PyTorch's CUDA libraries load in place of NVIDIA's.
 *
 * Kernels are registered and launched as no-ops that succeed; copies and
 * sets are real (the simulated driver backs device memory with host
 * memory); every call completes before it returns. A function a program may
 * call but the simulation does not model (graphs, stream capture, loaded
 * libraries) answers cudaErrorNotSupported. Without a driver it answers
 * cudaErrorInsufficientDriver, as the real runtime does. */
#include <cuda_runtime_api.h>
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RT_EXPORT __attribute__((visibility("default")))
#define RT_MAX_DEVICES 8

/* Exported by the real runtime, declared only in its internal headers. */
RT_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
RT_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s);
RT_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end);

/* Called by the code nvcc generates (crt/host_runtime.h). */
RT_EXPORT void **__cudaRegisterFatBinary(void *fatCubin);
RT_EXPORT void __cudaRegisterFatBinaryEnd(void **handle);
RT_EXPORT void __cudaUnregisterFatBinary(void **handle);
RT_EXPORT void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
                                 int ext, size_t size, int constant, int global);
RT_EXPORT void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                                      int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
RT_EXPORT char __cudaInitModule(void **handle);
RT_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream);
RT_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
RT_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun);
RT_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream);

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);

/* Every driver function the runtime uses: member, the declaration whose
 * type it has, the name and version it is looked up with, and the look-up
 * flags (the legacy or the per-thread default stream). */
#define RT_DRIVER(_) \
    _(init, cuInit, "cuInit", 2000, 0) \
    _(driver_version, cuDriverGetVersion, "cuDriverGetVersion", 2020, 0) \
    _(device_get_count, cuDeviceGetCount, "cuDeviceGetCount", 2000, 0) \
    _(device_attribute, cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000, 0) \
    _(device_name, cuDeviceGetName, "cuDeviceGetName", 2000, 0) \
    _(device_uuid, cuDeviceGetUuid_v2, "cuDeviceGetUuid", 11040, 0) \
    _(device_total_mem, cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, 0) \
    _(device_bus_id, cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", 4010, 0) \
    _(device_can_access_peer, cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", 4000, 0) \
    _(primary_retain, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0) \
    _(primary_reset, cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, 0) \
    _(ctx_set, cuCtxSetCurrent, "cuCtxSetCurrent", 4000, 0) \
    _(ctx_get_current, cuCtxGetCurrent, "cuCtxGetCurrent", 4000, 0) \
    _(ctx_get_device, cuCtxGetDevice, "cuCtxGetDevice", 2000, 0) \
    _(ctx_synchronize, cuCtxSynchronize, "cuCtxSynchronize", 2000, 0) \
    _(ctx_priority_range, cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", 5050, 0) \
    _(mem_alloc, cuMemAlloc_v2, "cuMemAlloc", 3020, 0) \
    _(mem_free, cuMemFree_v2, "cuMemFree", 3020, 0) \
    _(mem_alloc_pitch, cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0) \
    _(mem_alloc_managed, cuMemAllocManaged, "cuMemAllocManaged", 6000, 0) \
    _(mem_alloc_host, cuMemAllocHost_v2, "cuMemAllocHost", 3020, 0) \
    _(mem_host_alloc, cuMemHostAlloc, "cuMemHostAlloc", 2020, 0) \
    _(mem_free_host, cuMemFreeHost, "cuMemFreeHost", 2000, 0) \
    _(host_register, cuMemHostRegister_v2, "cuMemHostRegister", 6050, 0) \
    _(host_unregister, cuMemHostUnregister, "cuMemHostUnregister", 4000, 0) \
    _(alloc_async, cuMemAllocAsync, "cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) \
    _(alloc_async_ptsz, cuMemAllocAsync, "cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) \
    _(free_async, cuMemFreeAsync, "cuMemFreeAsync", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) \
    _(free_async_ptsz, cuMemFreeAsync, "cuMemFreeAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) \
    _(mem_get_info, cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0) \
    _(default_pool, cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020, 0) \
    _(get_pool, cuDeviceGetMemPool, "cuDeviceGetMemPool", 11020, 0) \
    _(set_pool, cuDeviceSetMemPool, "cuDeviceSetMemPool", 11020, 0) \
    _(pool_trim, cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020, 0) \
    _(pool_create, cuMemPoolCreate, "cuMemPoolCreate", 11020, 0) \
    _(pool_destroy, cuMemPoolDestroy, "cuMemPoolDestroy", 11020, 0) \
    _(alloc_from_pool, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, CU_GET_PROC_ADDRESS_LEGACY_STREAM) \
    _(alloc_from_pool_ptsz, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) \
    _(pool_set_attribute, cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 11020, 0) \
    _(pool_get_attribute, cuMemPoolGetAttribute, "cuMemPoolGetAttribute", 11020, 0) \
    _(pool_set_access, cuMemPoolSetAccess, "cuMemPoolSetAccess", 11020, 0) \
    _(pointer_attribute, cuPointerGetAttribute, "cuPointerGetAttribute", 4000, 0) \
    _(array_create, cuArrayCreate_v2, "cuArrayCreate", 3020, 0) \
    _(array3d_create, cuArray3DCreate_v2, "cuArray3DCreate", 3020, 0) \
    _(mipmapped_create, cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, 0) \
    _(array_destroy, cuArrayDestroy, "cuArrayDestroy", 2000, 0) \
    _(mipmapped_destroy, cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", 5000, 0) \
    _(ipc_get, cuIpcGetMemHandle, "cuIpcGetMemHandle", 4010, 0) \
    _(ipc_open, cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle", 11000, 0) \
    _(ipc_close, cuIpcCloseMemHandle, "cuIpcCloseMemHandle", 4010, 0) \
    _(stream_create, cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 5050, 0) \
    _(stream_destroy, cuStreamDestroy_v2, "cuStreamDestroy", 4000, 0) \
    _(stream_priority, cuStreamGetPriority, "cuStreamGetPriority", 5050, 0) \
    _(stream_synchronize, cuStreamSynchronize, "cuStreamSynchronize", 2000, 0) \
    _(stream_query, cuStreamQuery, "cuStreamQuery", 2000, 0) \
    _(stream_wait_event, cuStreamWaitEvent, "cuStreamWaitEvent", 3020, 0) \
    _(event_create, cuEventCreate, "cuEventCreate", 2000, 0) \
    _(event_destroy, cuEventDestroy_v2, "cuEventDestroy", 4000, 0) \
    _(event_record, cuEventRecordWithFlags, "cuEventRecordWithFlags", 11010, 0) \
    _(event_query, cuEventQuery, "cuEventQuery", 2000, 0) \
    _(event_synchronize, cuEventSynchronize, "cuEventSynchronize", 2000, 0) \
    _(event_elapsed, cuEventElapsedTime_v2, "cuEventElapsedTime", 12080, 0) \
    _(memcpy, cuMemcpy, "cuMemcpy", 4000, 0) \
    _(memcpy_async, cuMemcpyAsync, "cuMemcpyAsync", 4000, 0) \
    _(memcpy_peer_async, cuMemcpyPeerAsync, "cuMemcpyPeerAsync", 4000, 0) \
    _(memcpy2d_async, cuMemcpy2DAsync_v2, "cuMemcpy2DAsync", 3020, 0) \
    _(memset8, cuMemsetD8_v2, "cuMemsetD8", 3020, 0) \
    _(memset8_async, cuMemsetD8Async, "cuMemsetD8Async", 3020, 0) \
    _(graph_create, cuGraphCreate, "cuGraphCreate", 10000, 0) \
    _(graph_add_alloc, cuGraphAddMemAllocNode, "cuGraphAddMemAllocNode", 11040, 0) \
    _(graph_add_free, cuGraphAddMemFreeNode, "cuGraphAddMemFreeNode", 11040, 0) \
    _(graph_instantiate, cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040, 0) \
    _(graph_launch, cuGraphLaunch, "cuGraphLaunch", 10000, 0) \
    _(graph_destroy, cuGraphDestroy, "cuGraphDestroy", 10000, 0) \
    _(graph_exec_destroy, cuGraphExecDestroy, "cuGraphExecDestroy", 10000, 0) \
    _(graph_mem_attribute, cuDeviceGetGraphMemAttribute, "cuDeviceGetGraphMemAttribute", 11040, 0) \
    _(graph_mem_trim, cuDeviceGraphMemTrim, "cuDeviceGraphMemTrim", 11040, 0)

static struct {
    int state; /* 0 not tried, 1 ready, -1 no driver */
    gpa_fn gpa;
#define RT_MEMBER(member, decl, name, version, flags) __typeof__(&decl) member;
    RT_DRIVER(RT_MEMBER)
#undef RT_MEMBER
} drv;

static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static __thread int rt_device = 0;
static __thread cudaError_t rt_last = cudaSuccess;
static __thread enum cudaStreamCaptureMode rt_capture_mode = cudaStreamCaptureModeGlobal;
static pthread_mutex_t rt_peer_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char rt_peer[RT_MAX_DEVICES][RT_MAX_DEVICES];

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
#define RT_LOOKUP(member, decl, name, version, flags) *(void **)&drv.member = rt_get(name, version, flags);
    RT_DRIVER(RT_LOOKUP)
#undef RT_LOOKUP
    if (!drv.init || drv.init(0) != CUDA_SUCCESS) { drv.state = -1; return; }
    drv.state = 1;
}

/* Every failing call leaves its error for cudaGetLastError, as the real
 * runtime does. */
static cudaError_t rt_ret(cudaError_t e) {
    if (e != cudaSuccess) rt_last = e;
    return e;
}

/* Make sure the driver is loaded and the calling thread has a context. */
/* Whether the thread's current context is one the program made with the
 * driver API (cuCtxCreate), not a device's primary context: "If a
 * non-primary CUcontext created by the CUDA Driver API is current to a
 * thread then the CUDA Runtime API calls to that thread will operate on
 * that CUcontext" (cuda_runtime_api.h, Context Interoperability). */
static int rt_own_context_current(void) {
    CUcontext cur = NULL, primary;
    CUdevice d;
    if (drv.ctx_get_current(&cur) != CUDA_SUCCESS || !cur) return 0;
    if (drv.ctx_get_device(&d) != CUDA_SUCCESS || drv.primary_retain(&primary, d) != CUDA_SUCCESS) return 0;
    return cur != primary;
}

static cudaError_t rt_ready(void) {
    pthread_once(&rt_once, rt_load);
    if (drv.state != 1) return cudaErrorInsufficientDriver;
    CUcontext ctx;
    if (drv.primary_retain(&ctx, rt_device) != CUDA_SUCCESS) return cudaErrorInvalidDevice;
    if (!rt_own_context_current()) drv.ctx_set(ctx);
    return cudaSuccess;
}

/* The runtime's code for a driver result: the two enumerations share their
 * numbers for the codes the simulated driver returns. */
static cudaError_t rt_err(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return rt_ret(cudaErrorInvalidValue);
    case CUDA_ERROR_OUT_OF_MEMORY: return rt_ret(cudaErrorMemoryAllocation);
    case CUDA_ERROR_INVALID_DEVICE: return rt_ret(cudaErrorInvalidDevice);
    case CUDA_ERROR_INVALID_HANDLE: return rt_ret(cudaErrorInvalidResourceHandle);
    case CUDA_ERROR_NOT_FOUND: return rt_ret(cudaErrorSymbolNotFound);
    case CUDA_ERROR_NOT_READY: return rt_ret(cudaErrorNotReady);
    case CUDA_ERROR_ALREADY_MAPPED: return rt_ret(cudaErrorAlreadyMapped);
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return rt_ret(cudaErrorPeerAccessAlreadyEnabled);
    case CUDA_ERROR_NOT_SUPPORTED: return rt_ret(cudaErrorNotSupported);
    case CUDA_ERROR_INVALID_CONTEXT: return rt_ret(cudaErrorDeviceUninitialized);
    default: return rt_ret(cudaErrorUnknown);
    }
}

#define RT_BEGIN() do { cudaError_t e_ = rt_ready(); if (e_) return rt_ret(e_); } while (0)

/* ------------------------------------------------------------- devices */

RT_EXPORT cudaError_t cudaGetDeviceCount(int *n) {
    RT_BEGIN();
    if (!n) return rt_ret(cudaErrorInvalidValue);
    return rt_err(drv.device_get_count(n));
}

RT_EXPORT cudaError_t cudaSetDevice(int d) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e) return e;
    if (d < 0 || d >= n) return rt_ret(cudaErrorInvalidDevice);
    rt_device = d;
    return rt_ret(rt_ready());
}

RT_EXPORT cudaError_t cudaGetDevice(int *d) {
    if (!d) return rt_ret(cudaErrorInvalidValue);
    *d = rt_device;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaDriverGetVersion(int *v) {
    if (!v) return rt_ret(cudaErrorInvalidValue);
    pthread_once(&rt_once, rt_load);
    *v = 0;
    if (drv.state != 1) return cudaSuccess;
    return rt_err(drv.driver_version(v));
}

RT_EXPORT cudaError_t cudaRuntimeGetVersion(int *v) {
    if (!v) return rt_ret(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

/* The calls that only pass their arguments on to the driver (one line
 * each in rt_forward.def): RT_FORWARD(NAME, (PARAMS), CALL) is
 * cudaError_t NAME(PARAMS) returning rt_err(drv.CALL). */
#define RT_FORWARD(name, params, call) \
    RT_EXPORT cudaError_t name params {  \
        RT_BEGIN();                      \
        return rt_err(drv.call);         \
    }
#include "rt_forward.def"
#undef RT_FORWARD

/* "Destroy all allocations and reset all state on the current device";
 * "If a non-primary CUcontext is current to the thread, cudaDeviceReset()
 * will destroy only the internal CUDA RT state for that CUcontext": the
 * stand-in keeps none, so then nothing is reset. */
RT_EXPORT cudaError_t cudaDeviceReset(void) {
    RT_BEGIN();
    if (rt_own_context_current()) return cudaSuccess;
    return rt_err(drv.primary_reset(rt_device));
}

static int rt_attr(CUdevice_attribute a, int d) {
    int v = 0;
    drv.device_attribute(&v, a, d);
    return v;
}

/* The properties the real runtime assembles from the driver's attributes;
 * texture and surface limits are left 0. */
RT_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
    RT_BEGIN();
    if (!p) return rt_ret(cudaErrorInvalidValue);
    int n = 0;
    drv.device_get_count(&n);
    if (d < 0 || d >= n) return rt_ret(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    drv.device_name(p->name, sizeof p->name, d);
    drv.device_uuid((CUuuid *)&p->uuid, d);
    drv.device_total_mem(&p->totalGlobalMem, d);
#define PROP(field, attr) p->field = (__typeof__(p->field))rt_attr(CU_DEVICE_ATTRIBUTE_##attr, d);
#include "device_props.def"
#undef PROP
    p->deviceNumaId = -1;
    p->hostNumaId = -1;
    return cudaSuccess;
}

/* Peer access is a per-device flag: enabling it twice is the documented
 * cudaErrorPeerAccessAlreadyEnabled. */
RT_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
    RT_BEGIN();
    int can = 0;
    if (flags != 0) return rt_ret(cudaErrorInvalidValue);
    if (peer < 0 || peer >= RT_MAX_DEVICES || drv.device_can_access_peer(&can, rt_device, peer) != CUDA_SUCCESS)
        return rt_ret(cudaErrorInvalidDevice);
    if (!can) return rt_ret(cudaErrorInvalidDevice);
    cudaError_t e = cudaSuccess;
    pthread_mutex_lock(&rt_peer_lock);
    if (rt_peer[rt_device][peer]) e = cudaErrorPeerAccessAlreadyEnabled;
    rt_peer[rt_device][peer] = 1;
    pthread_mutex_unlock(&rt_peer_lock);
    return rt_ret(e);
}

/* CUDA graphs as far as the driver models them (memory nodes; graphs
 * built by hand, not captured: no stream of this runtime is ever
 * capturing). */
RT_EXPORT cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *node, cudaGraph_t g, const cudaGraphNode_t *deps,
                                               size_t n, struct cudaMemAllocNodeParams *p) {
    RT_BEGIN();
    if (!p) return rt_ret(cudaErrorInvalidValue);
    CUDA_MEM_ALLOC_NODE_PARAMS q;
    _Static_assert(sizeof q.poolProps == sizeof p->poolProps, "the runtime's pool properties are the driver's");
    memcpy(&q.poolProps, &p->poolProps, sizeof q.poolProps);
    q.accessDescs = (const CUmemAccessDesc *)p->accessDescs;
    q.accessDescCount = p->accessDescCount;
    q.bytesize = p->bytesize;
    q.dptr = 0;
    CUresult r = drv.graph_add_alloc((CUgraphNode *)node, (CUgraph)g, (const CUgraphNode *)deps, n, &q);
    if (r == CUDA_SUCCESS) p->dptr = (void *)(uintptr_t)q.dptr;
    return rt_err(r);
}

RT_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags) {
    RT_BEGIN();
    return rt_err(drv.graph_instantiate((CUgraphExec *)e, (CUgraph)g, flags));
}

RT_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags) {
    return cudaGraphInstantiate(e, g, flags);
}

RT_EXPORT cudaError_t cudaDeviceSetGraphMemAttribute(int d, enum cudaGraphMemAttributeType attr, void *value) {
    (void)d; (void)attr;
    RT_BEGIN();
    return value ? cudaSuccess : rt_ret(cudaErrorInvalidValue);
}

RT_EXPORT cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
RT_EXPORT cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

/* ------------------------------------------------------------- errors */

RT_EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t e = rt_last;
    rt_last = cudaSuccess;
    return e;
}

RT_EXPORT cudaError_t cudaPeekAtLastError(void) { return rt_last; }

/* ------------------------------------------------------------- memory */

RT_EXPORT cudaError_t cudaMalloc(void **p, size_t n) {
    RT_BEGIN();
    if (!p) return rt_ret(cudaErrorInvalidValue);
    if (n == 0) { *p = NULL; return cudaSuccess; }
    return rt_err(drv.mem_alloc((CUdeviceptr *)p, n));
}

/* Device memory, pinned host memory, or memory CUDA does not know
 * (cudaMemoryTypeUnregistered, a success since CUDA 11). */
RT_EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr) {
    RT_BEGIN();
    if (!a) return rt_ret(cudaErrorInvalidValue);
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    unsigned type = 0;
    int device = -2;
    memset(a, 0, sizeof *a);
    if (drv.pointer_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS) {
        a->type = cudaMemoryTypeUnregistered;
        a->device = -2;
        a->hostPointer = (void *)ptr;
        return cudaSuccess;
    }
    drv.pointer_attribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
    a->device = device;
    a->devicePointer = (void *)ptr;
    if (type == CU_MEMORYTYPE_HOST) {
        a->type = cudaMemoryTypeHost;
        a->hostPointer = (void *)ptr;
    } else {
        a->type = cudaMemoryTypeDevice;
    }
    return cudaSuccess;
}

static int rt_kind_ok(enum cudaMemcpyKind k) {
    return k >= cudaMemcpyHostToHost && k <= cudaMemcpyDefault;
}

RT_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k) {
    RT_BEGIN();
    if (!rt_kind_ok(k)) return rt_ret(cudaErrorInvalidMemcpyDirection);
    return rt_err(drv.memcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n));
}

RT_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s) {
    RT_BEGIN();
    if (!rt_kind_ok(k)) return rt_ret(cudaErrorInvalidMemcpyDirection);
    return rt_err(drv.memcpy_async((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n, (CUstream)s));
}

RT_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind k, cudaStream_t s) {
    RT_BEGIN();
    if (!rt_kind_ok(k)) return rt_ret(cudaErrorInvalidMemcpyDirection);
    if (width > dpitch || width > spitch) return rt_ret(cudaErrorInvalidPitchValue);
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    c.srcPitch = spitch;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.dstPitch = dpitch;
    c.WidthInBytes = width;
    c.Height = height;
    return rt_err(drv.memcpy2d_async(&c, (CUstream)s));
}

RT_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t s) {
    RT_BEGIN();
    CUcontext dc, sc;
    if (drv.primary_retain(&dc, dd) != CUDA_SUCCESS || drv.primary_retain(&sc, sd) != CUDA_SUCCESS)
        return rt_ret(cudaErrorInvalidDevice);
    return rt_err(drv.memcpy_peer_async((CUdeviceptr)(uintptr_t)dst, dc, (CUdeviceptr)(uintptr_t)src, sc, n,
                                        (CUstream)s));
}

/* A __device__ variable's storage is its host shadow, which nvcc's
 * registration code names: the simulated device reads host memory. */
RT_EXPORT cudaError_t cudaGetSymbolAddress(void **p, const void *symbol) {
    RT_BEGIN();
    if (!p || !symbol) return rt_ret(cudaErrorInvalidSymbol);
    *p = (void *)symbol;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t n, size_t offset,
                                         enum cudaMemcpyKind k) {
    RT_BEGIN();
    if (!symbol) return rt_ret(cudaErrorInvalidSymbol);
    if (!rt_kind_ok(k) || k == cudaMemcpyDeviceToHost) return rt_ret(cudaErrorInvalidMemcpyDirection);
    return rt_err(drv.memcpy((CUdeviceptr)(uintptr_t)symbol + offset, (CUdeviceptr)(uintptr_t)src, n));
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

RT_EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags) {
    RT_BEGIN();
    CUipcMemHandle ch;
    memcpy(&ch, &h, sizeof ch);
    return rt_err(drv.ipc_open((CUdeviceptr *)p, ch, flags));
}

RT_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol,
        void **fn, unsigned int version, unsigned long long flags,
        enum cudaDriverEntryPointQueryResult *status) {
    RT_BEGIN();
    if (!symbol || !fn) return rt_ret(cudaErrorInvalidValue);
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = drv.gpa(symbol, fn, (int)version, flags, &st);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_FOUND) return rt_err(r);
    /* A name the driver lacks is a success whose status says so. */
    if (status) *status = (enum cudaDriverEntryPointQueryResult)st;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn,
        unsigned long long flags, enum cudaDriverEntryPointQueryResult *status) {
    return cudaGetDriverEntryPointByVersion(symbol, fn, 13000, flags, status);
}

/* ------------------------------------------------------------- streams */

RT_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
    RT_BEGIN();
    if (!s) return rt_ret(cudaErrorInvalidValue);
    return rt_err(drv.stream_create((CUstream *)s, flags, priority));
}

RT_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    return cudaStreamCreateWithPriority(s, flags, 0);
}

RT_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s) {
    return cudaStreamCreateWithPriority(s, cudaStreamDefault, 0);
}

/* Work queued on a stream has always finished: a host callback runs at
 * once, in the calling thread. */
RT_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data) {
    (void)s;
    RT_BEGIN();
    if (!fn) return rt_ret(cudaErrorInvalidValue);
    fn(data);
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *data, unsigned int flags) {
    RT_BEGIN();
    if (!cb || flags != 0) return rt_ret(cudaErrorInvalidValue);
    cb(s, cudaSuccess, data);
    return cudaSuccess;
}

/* No stream is ever capturing. */
RT_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status) {
    (void)s;
    RT_BEGIN();
    if (!status) return rt_ret(cudaErrorInvalidValue);
    *status = cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *status,
                                               unsigned long long *id, cudaGraph_t *graph,
                                               const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                               size_t *ndeps) {
    (void)s;
    RT_BEGIN();
    if (!status) return rt_ret(cudaErrorInvalidValue);
    *status = cudaStreamCaptureStatusNone;
    if (id) *id = 0;
    if (graph) *graph = NULL;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
    if (!mode) return rt_ret(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode old = rt_capture_mode;
    rt_capture_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

/* -------------------------------------------------------------- events */

RT_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    RT_BEGIN();
    if (!e) return rt_ret(cudaErrorInvalidValue);
    return rt_err(drv.event_create((CUevent *)e, flags)); /* the flags share the driver's values */
}

RT_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

RT_EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { return cudaEventRecordWithFlags(e, s, 0); }

/* ------------------------------------------------------------- kernels */

/* A fat binary's handle: registration keeps nothing, for no kernel runs. */
static void *rt_module_tag;

RT_EXPORT void **__cudaRegisterFatBinary(void *fatCubin) {
    (void)fatCubin;
    return &rt_module_tag;
}

RT_EXPORT void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
RT_EXPORT void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

RT_EXPORT void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
                                 int ext, size_t size, int constant, int global) {
    (void)handle; (void)hostVar; (void)deviceAddress; (void)deviceName;
    (void)ext; (void)size; (void)constant; (void)global;
}

RT_EXPORT void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                                      int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize) {
    (void)handle; (void)hostFun; (void)deviceFun; (void)deviceName;
    (void)thread_limit; (void)tid; (void)bid; (void)bDim; (void)gDim; (void)wSize;
}

RT_EXPORT char __cudaInitModule(void **handle) {
    (void)handle;
    return 1;
}

/* The launch configuration a <<<...>>> pushes and the stub it calls pops. */
static __thread struct { dim3 grid, block; size_t shared; void *stream; } rt_config;

RT_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream) {
    rt_config.grid = gridDim;
    rt_config.block = blockDim;
    rt_config.shared = sharedMem;
    rt_config.stream = stream;
    return 0;
}

RT_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream) {
    if (gridDim) *gridDim = rt_config.grid;
    if (blockDim) *blockDim = rt_config.block;
    if (sharedMem) *sharedMem = rt_config.shared;
    if (stream) *(void **)stream = rt_config.stream;
    return cudaSuccess;
}

RT_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun) {
    if (!kernel) return rt_ret(cudaErrorInvalidValue);
    *kernel = (cudaKernel_t)fun;
    return cudaSuccess;
}

/* A launch checks that there is a device and does nothing: the memory a
 * kernel would write keeps what it held. */
static cudaError_t rt_launch(const void *fn, dim3 grid, dim3 block) {
    RT_BEGIN();
    if (!fn) return rt_ret(cudaErrorInvalidDeviceFunction);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
        (unsigned long long)block.x * block.y * block.z > 1024)
        return rt_ret(cudaErrorInvalidConfiguration);
    return cudaSuccess;
}

RT_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream) {
    (void)args; (void)sharedMem; (void)stream;
    return rt_launch(kernel, gridDim, blockDim);
}

RT_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                       size_t sharedMem, cudaStream_t stream) {
    (void)args; (void)sharedMem; (void)stream;
    return rt_launch(func, gridDim, blockDim);
}

RT_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
    (void)args;
    if (!config) return rt_ret(cudaErrorInvalidValue);
    return rt_launch(func, config->gridDim, config->blockDim);
}

RT_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                                  size_t sharedMem, cudaStream_t stream) {
    (void)args; (void)sharedMem; (void)stream;
    return rt_launch(func, gridDim, blockDim);
}

RT_EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
    RT_BEGIN();
    if (!attr) return rt_ret(cudaErrorInvalidValue);
    if (!func) return rt_ret(cudaErrorInvalidDeviceFunction);
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    attr->maxDynamicSharedSizeBytes = 49152;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    (void)attr; (void)value;
    RT_BEGIN();
    return func ? cudaSuccess : rt_ret(cudaErrorInvalidDeviceFunction);
}

RT_EXPORT cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, enum cudaFuncAttribute attr, int value,
                                                      int device) {
    (void)attr; (void)value; (void)device;
    RT_BEGIN();
    return kernel ? cudaSuccess : rt_ret(cudaErrorInvalidDeviceFunction);
}

/* Occupancy as threads per multiprocessor allow (2048), at most 32 blocks. */
RT_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func, int block,
                                                                             size_t shared, unsigned int flags) {
    (void)shared; (void)flags;
    RT_BEGIN();
    if (!n || block <= 0) return rt_ret(cudaErrorInvalidValue);
    if (!func) return rt_ret(cudaErrorInvalidDeviceFunction);
    *n = 2048 / block > 32 ? 32 : 2048 / block;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t shared) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, block, shared, 0);
}

/* -------------------------------------------------- not modelled (801) */

RT_EXPORT cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies, const cudaGraphEdgeData *dependencyData, size_t numDependencies, struct cudaGraphNodeParams *nodeParams) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *pHandle_out, cudaGraph_t graph, unsigned int defaultLaunchValue , unsigned int flags) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *pDependencies, cudaGraphEdgeData *edgeData, size_t *pNumDependencies) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count , unsigned int flags) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaUserObjectCreate(cudaUserObject_t *object_out, void *ptr, cudaHostFn_t destroy, unsigned int initialRefcount, unsigned int flags) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies, const cudaGraphEdgeData *dependencyData, size_t numDependencies, enum cudaStreamCaptureMode mode) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *dependencies, const cudaGraphEdgeData *dependencyData, size_t numDependencies, unsigned int flags) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code, enum cudaJitOption *jitOptions, void **jitOptionsValues, unsigned int numJitOptions, enum cudaLibraryOption *libraryOptions, void** libraryOptionValues, unsigned int numLibraryOptions) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaLibraryGetKernel(cudaKernel_t *pKernel, cudaLibrary_t library, const char *name) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaLibraryUnload(cudaLibrary_t library) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event) { return rt_ret(cudaErrorNotSupported); }
RT_EXPORT cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle) { return rt_ret(cudaErrorNotSupported); }

/* ------------------------------------------------------- error strings */

/* The runtime's documented names and descriptions of its error codes. */
static const struct { cudaError_t code; const char *name, *text; } rt_errors[] = {
#define E(c, s) {c, #c, s}
    E(cudaSuccess, "no error"),
    E(cudaErrorInvalidValue, "invalid argument"),
    E(cudaErrorMemoryAllocation, "out of memory"),
    E(cudaErrorInitializationError, "initialization error"),
    E(cudaErrorCudartUnloading, "driver shutting down"),
    E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    E(cudaErrorInvalidSymbol, "invalid device symbol"),
    E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
    E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    E(cudaErrorInvalidDevice, "invalid device ordinal"),
    E(cudaErrorDeviceUninitialized, "invalid device context"),
    E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    E(cudaErrorSymbolNotFound, "named symbol not found"),
    E(cudaErrorNotReady, "device not ready"),
    E(cudaErrorAlreadyMapped, "resource already mapped"),
    E(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
    E(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled"),
    E(cudaErrorNotPermitted, "operation not permitted"),
    E(cudaErrorNotSupported, "operation not supported"),
    E(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing"),
    E(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    E(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device"),
    E(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable"),
    E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    E(cudaErrorLaunchFailure, "unspecified launch failure"),
    E(cudaErrorContextIsDestroyed, "context is destroyed"),
    E(cudaErrorUnknown, "unknown error"),
#undef E
};

RT_EXPORT const char *cudaGetErrorName(cudaError_t e) {
    for (size_t i = 0; i < sizeof rt_errors / sizeof rt_errors[0]; i++)
        if (rt_errors[i].code == e) return rt_errors[i].name;
    return "unrecognized error code";
}

RT_EXPORT const char *cudaGetErrorString(cudaError_t e) {
    for (size_t i = 0; i < sizeof rt_errors / sizeof rt_errors[0]; i++)
        if (rt_errors[i].code == e) return rt_errors[i].text;
    return "unrecognized error code";
}
