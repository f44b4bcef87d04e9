/* driver.c -- wrappers for the CUDA driver's allocation entry points.
 *
 * Each wrapper has the exact prototype of the driver function it stands in
 * for, calls the real one, tells hook.c what happened and returns the real
 * result unchanged. The same wrappers are exported (route 1), handed out by
 * the dlsym override (route 2) and by the cuGetProcAddress hooks (routes 3
 * and 4). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "hook.h"
#include "resolve.h"

#define VT_EXPORT __attribute__((visibility("default")))

/* Exported by the driver, not declared in cuda.h. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                      CUmemoryPool pool, CUstream s);

/* Declare `real` for this wrapper, or fail the way a missing driver would. */
#define REAL_OR_FAIL(sym)                                      \
    __typeof__(&sym) real = VT_REAL(sym);                      \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED

#define IS_OOM(r) ((r) == CUDA_ERROR_OUT_OF_MEMORY)

/* A free of one argument: the record leaves the table before the real call
 * and the free counts if the driver took it. `nothing`: the argument frees
 * nothing (a null pointer). */
#define ONE_FREE(sym, space, arg, nothing)                                         \
    REAL_OR_FAIL(sym);                                                             \
    if (vt_nested() || (nothing)) return real(arg);                                \
    struct vt_free a = vt_tracker_free_begin(space, (uint64_t)(uintptr_t)(arg));   \
    CUresult r = real(arg);                                                        \
    vt_hook_free(&a, r == CUDA_SUCCESS);                                           \
    return r

/* ---------------------------------------------------- cuGetProcAddress */

VT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
                                       int version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status) {
    REAL_OR_FAIL(cuGetProcAddress_v2);
    CUresult r = real(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && pfn) *pfn = vt_swap_proc(symbol, *pfn, version, flags);
    return r;
}

VT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags) {
    REAL_OR_FAIL(cuGetProcAddress);
    CUresult r = real(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && pfn) *pfn = vt_swap_proc(symbol, *pfn, version, flags);
    return r;
}

/* -------------------------------------------------------------- device */

VT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    REAL_OR_FAIL(cuMemAlloc_v2);
    if (vt_nested()) return real(dptr, bytes);
    if (vt_budget_refuse("cuMemAlloc_v2", VT_KIND_DEVICE, VT_DEVICE_CURRENT, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytes);
    vt_hook_alloc("cuMemAlloc_v2", VT_KIND_DEVICE, VT_DEVICE_CURRENT,
                  r == CUDA_SUCCESS, IS_OOM(r), r == CUDA_SUCCESS ? *dptr : 0, bytes);
    return r;
}

VT_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes) {
    REAL_OR_FAIL(cuMemAlloc);
    if (vt_nested()) return real(dptr, bytes);
    if (vt_budget_refuse("cuMemAlloc", VT_KIND_DEVICE, VT_DEVICE_CURRENT, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytes);
    vt_hook_alloc("cuMemAlloc", VT_KIND_DEVICE, VT_DEVICE_CURRENT,
                  r == CUDA_SUCCESS, IS_OOM(r), r == CUDA_SUCCESS ? *dptr : 0, bytes);
    return r;
}

VT_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    ONE_FREE(cuMemFree_v2, VT_SPACE_DEVICE, dptr, dptr == 0);
}

VT_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
    ONE_FREE(cuMemFree, VT_SPACE_DEVICE, dptr, dptr == 0);
}

/* ------------------------------------------------------------- pitched */

VT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch,
                                      size_t width, size_t height,
                                      unsigned int elem) {
    REAL_OR_FAIL(cuMemAllocPitch_v2);
    if (vt_nested()) return real(dptr, pitch, width, height, elem);
    if (vt_budget_refuse("cuMemAllocPitch_v2", VT_KIND_PITCHED, VT_DEVICE_CURRENT, (uint64_t)width * height)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, pitch, width, height, elem);
    int ok = r == CUDA_SUCCESS;
    vt_hook_alloc("cuMemAllocPitch_v2", VT_KIND_PITCHED, VT_DEVICE_CURRENT, ok,
                  IS_OOM(r), ok ? *dptr : 0, ok ? (uint64_t)*pitch * height
                                                : (uint64_t)width * height);
    return r;
}

VT_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch,
                                   unsigned int width, unsigned int height,
                                   unsigned int elem) {
    REAL_OR_FAIL(cuMemAllocPitch);
    if (vt_nested()) return real(dptr, pitch, width, height, elem);
    if (vt_budget_refuse("cuMemAllocPitch", VT_KIND_PITCHED, VT_DEVICE_CURRENT, (uint64_t)width * height)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, pitch, width, height, elem);
    int ok = r == CUDA_SUCCESS;
    vt_hook_alloc("cuMemAllocPitch", VT_KIND_PITCHED, VT_DEVICE_CURRENT, ok,
                  IS_OOM(r), ok ? *dptr : 0, ok ? (uint64_t)*pitch * height
                                                : (uint64_t)width * height);
    return r;
}

/* ------------------------------------------------------------- managed */

VT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes,
                                     unsigned int flags) {
    REAL_OR_FAIL(cuMemAllocManaged);
    if (vt_nested()) return real(dptr, bytes, flags);
    if (vt_budget_refuse("cuMemAllocManaged", VT_KIND_MANAGED, VT_DEVICE_CURRENT, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytes, flags);
    vt_hook_alloc("cuMemAllocManaged", VT_KIND_MANAGED, VT_DEVICE_CURRENT,
                  r == CUDA_SUCCESS, IS_OOM(r), r == CUDA_SUCCESS ? *dptr : 0, bytes);
    return r;
}

/* ------------------------------------------------------ stream-ordered */

#define ASYNC_ALLOC(sym, ...)                                                 \
    REAL_OR_FAIL(sym);                                                        \
    if (vt_nested()) return real(dptr, bytes, __VA_ARGS__);                   \
    if (vt_budget_refuse(#sym, VT_KIND_ASYNC, VT_DEVICE_CURRENT, bytes))      \
        return CUDA_ERROR_OUT_OF_MEMORY;                                      \
    CUresult r = real(dptr, bytes, __VA_ARGS__);                              \
    vt_hook_alloc(#sym, VT_KIND_ASYNC, VT_DEVICE_CURRENT, r == CUDA_SUCCESS,  \
                  IS_OOM(r), r == CUDA_SUCCESS ? *dptr : 0, bytes);           \
    return r

VT_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    ASYNC_ALLOC(cuMemAllocAsync, s);
}

VT_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    ASYNC_ALLOC(cuMemAllocAsync_ptsz, s);
}

VT_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
                                           CUmemoryPool pool, CUstream s) {
    ASYNC_ALLOC(cuMemAllocFromPoolAsync, pool, s);
}

VT_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                CUmemoryPool pool, CUstream s) {
    ASYNC_ALLOC(cuMemAllocFromPoolAsync_ptsz, pool, s);
}

#define ASYNC_FREE(sym)                                                       \
    REAL_OR_FAIL(sym);                                                        \
    if (vt_nested() || dptr == 0) return real(dptr, s);                       \
    struct vt_free a = vt_tracker_free_begin(VT_SPACE_DEVICE, dptr);              \
    CUresult r = real(dptr, s);                                               \
    vt_hook_free(&a, r == CUDA_SUCCESS);                                       \
    return r

VT_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    ASYNC_FREE(cuMemFreeAsync);
}

VT_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
    ASYNC_FREE(cuMemFreeAsync_ptsz);
}

/* ------------------------------------------------- virtual memory (VMM) */

VT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop,
                               unsigned long long flags) {
    REAL_OR_FAIL(cuMemCreate);
    if (vt_nested()) return real(handle, size, prop, flags);
    int device = VT_DEVICE_CURRENT;
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) device = prop->location.id;
    if (vt_budget_refuse("cuMemCreate", VT_KIND_VMM, device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(handle, size, prop, flags);
    vt_hook_alloc("cuMemCreate", VT_KIND_VMM, device, r == CUDA_SUCCESS, IS_OOM(r),
                  r == CUDA_SUCCESS ? *handle : 0, size);
    return r;
}

VT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    ONE_FREE(cuMemRelease, VT_SPACE_HANDLE, handle, 0);
}

VT_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle,
                            unsigned long long flags) {
    REAL_OR_FAIL(cuMemMap);
    CUresult r = real(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS && !vt_nested()) vt_tracker_map(handle, ptr);
    return r;
}

/* --------------------------------------------------------- pinned host */

VT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytes) {
    REAL_OR_FAIL(cuMemAllocHost_v2);
    if (vt_nested()) return real(pp, bytes);
    CUresult r = real(pp, bytes);
    vt_hook_alloc("cuMemAllocHost_v2", VT_KIND_HOST, VT_HOST_DEVICE, r == CUDA_SUCCESS,
                  IS_OOM(r), r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, bytes);
    return r;
}

VT_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytes) {
    REAL_OR_FAIL(cuMemAllocHost);
    if (vt_nested()) return real(pp, bytes);
    CUresult r = real(pp, bytes);
    vt_hook_alloc("cuMemAllocHost", VT_KIND_HOST, VT_HOST_DEVICE, r == CUDA_SUCCESS,
                  IS_OOM(r), r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, bytes);
    return r;
}

VT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    REAL_OR_FAIL(cuMemHostAlloc);
    if (vt_nested()) return real(pp, bytes, flags);
    CUresult r = real(pp, bytes, flags);
    vt_hook_alloc("cuMemHostAlloc", VT_KIND_HOST, VT_HOST_DEVICE, r == CUDA_SUCCESS,
                  IS_OOM(r), r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, bytes);
    return r;
}

VT_EXPORT CUresult cuMemFreeHost(void *p) {
    ONE_FREE(cuMemFreeHost, VT_SPACE_HOST, p, p == NULL);
}

/* ------------------------------------------------------------- arrays */

/* Bytes an array element channel takes, by format; 1 for the block and
 * planar formats, whose size the memory requirements (when the driver has
 * cuArrayGetMemoryRequirements) give instead. */
static size_t format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 1;
    }
}

static uint64_t dim(size_t v) { return v ? v : 1; }

/* The size of an array: the driver's memory requirements when it has the
 * call, else what the descriptor says (levels summed for mipmaps). */
static uint64_t array_bytes(void *array, int mipmapped, size_t w, size_t h, size_t d, CUarray_format f,
                            unsigned ch, unsigned levels) {
    static CUresult (*req)(CUDA_ARRAY_MEMORY_REQUIREMENTS *, CUarray, CUdevice);
    static CUresult (*mreq)(CUDA_ARRAY_MEMORY_REQUIREMENTS *, CUmipmappedArray, CUdevice);
    static CUresult (*get_dev)(CUdevice *);
    if (!get_dev) *(void **)&get_dev = vt_driver_fn("cuCtxGetDevice");
    if (!req) *(void **)&req = vt_driver_fn("cuArrayGetMemoryRequirements");
    if (!mreq) *(void **)&mreq = vt_driver_fn("cuMipmappedArrayGetMemoryRequirements");
    CUDA_ARRAY_MEMORY_REQUIREMENTS r;
    CUdevice dev = 0;
    if (get_dev) get_dev(&dev);
    if (!mipmapped && req && req(&r, (CUarray)array, dev) == CUDA_SUCCESS && r.size) return r.size;
    if (mipmapped && mreq && mreq(&r, (CUmipmappedArray)array, dev) == CUDA_SUCCESS && r.size) return r.size;
    uint64_t bytes = 0;
    for (unsigned l = 0; l < (levels ? levels : 1); l++)
        bytes += dim(w >> l) * dim(h >> l) * dim(d >> l) * (ch ? ch : 1) * format_bytes(f);
    return bytes;
}

VT_EXPORT CUresult cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d) {
    REAL_OR_FAIL(cuArrayCreate_v2);
    if (vt_nested() || !d) return real(h, d);
    uint64_t want = dim(d->Width) * dim(d->Height) * (d->NumChannels ? d->NumChannels : 1) * format_bytes(d->Format);
    if (vt_budget_refuse("cuArrayCreate_v2", VT_KIND_ARRAY, VT_DEVICE_CURRENT, want)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(h, d);
    int ok = r == CUDA_SUCCESS;
    vt_hook_alloc("cuArrayCreate_v2", VT_KIND_ARRAY, VT_DEVICE_CURRENT, ok, IS_OOM(r), ok ? (uint64_t)(uintptr_t)*h : 0,
                  ok ? array_bytes(*h, 0, d->Width, d->Height, 0, d->Format, d->NumChannels, 1) : want);
    return r;
}

VT_EXPORT CUresult cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    REAL_OR_FAIL(cuArray3DCreate_v2);
    if (vt_nested() || !d) return real(h, d);
    uint64_t want = dim(d->Width) * dim(d->Height) * dim(d->Depth) * (d->NumChannels ? d->NumChannels : 1) *
                    format_bytes(d->Format);
    if (vt_budget_refuse("cuArray3DCreate_v2", VT_KIND_ARRAY, VT_DEVICE_CURRENT, want)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(h, d);
    int ok = r == CUDA_SUCCESS;
    vt_hook_alloc("cuArray3DCreate_v2", VT_KIND_ARRAY, VT_DEVICE_CURRENT, ok, IS_OOM(r),
                  ok ? (uint64_t)(uintptr_t)*h : 0,
                  ok ? array_bytes(*h, 0, d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1) : want);
    return r;
}

VT_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                          unsigned int levels) {
    REAL_OR_FAIL(cuMipmappedArrayCreate);
    if (vt_nested() || !d) return real(h, d, levels);
    uint64_t want = array_bytes(NULL, 2, d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels);
    if (vt_budget_refuse("cuMipmappedArrayCreate", VT_KIND_ARRAY, VT_DEVICE_CURRENT, want))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(h, d, levels);
    int ok = r == CUDA_SUCCESS;
    vt_hook_alloc("cuMipmappedArrayCreate", VT_KIND_ARRAY, VT_DEVICE_CURRENT, ok, IS_OOM(r),
                  ok ? (uint64_t)(uintptr_t)*h : 0,
                  ok ? array_bytes(*h, 1, d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels) : want);
    return r;
}

VT_EXPORT CUresult cuArrayDestroy(CUarray h) {
    ONE_FREE(cuArrayDestroy, VT_SPACE_ARRAY, h, 0);
}

VT_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) {
    ONE_FREE(cuMipmappedArrayDestroy, VT_SPACE_ARRAY, h, 0);
}

/* --------------------------------------------- memory of other processes */

/* The size of an opened IPC mapping, from the driver. */
static uint64_t mapping_bytes(CUdeviceptr p) {
    static CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr);
    if (!range) *(void **)&range = vt_driver_fn("cuMemGetAddressRange_v2");
    CUdeviceptr base = 0;
    size_t size = 0;
    if (range && range(&base, &size, p) == CUDA_SUCCESS) return size;
    return 0;
}

#define IPC_OPEN(sym)                                                                   \
    REAL_OR_FAIL(sym);                                                                  \
    if (vt_nested()) return real(p, h, flags);                                          \
    CUresult r = real(p, h, flags);                                                     \
    int ok = r == CUDA_SUCCESS;                                                         \
    vt_hook_alloc(#sym, VT_KIND_IMPORTED, VT_DEVICE_CURRENT, ok, IS_OOM(r), ok ? *p : 0, \
                  ok ? mapping_bytes(*p) : 0);                                          \
    return r

VT_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
    IPC_OPEN(cuIpcOpenMemHandle_v2);
}

VT_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
    IPC_OPEN(cuIpcOpenMemHandle);
}

VT_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    ONE_FREE(cuIpcCloseMemHandle, VT_SPACE_IMPORTED, p, 0);
}
