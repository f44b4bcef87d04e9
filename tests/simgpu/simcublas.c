/* simcublas.c -- a stand-in cuBLAS (libcublas.so.13) for PyTorch on the
 * simulated GPU.
 *
 * Handles keep their stream, workspace, math and pointer modes as set. The
 * matrix products PyTorch's nn.Linear, mm, addmm, matmul and their backward
 * passes call (GEMM, batched and strided GEMM, GEMV) check their arguments
 * as cuBLAS documents and compute nothing: the simulated GPU runs no
 * kernels, so the output keeps what it held. Memory is never allocated
 * here: PyTorch hands each handle a workspace from its own allocator. Every
 * other entry point PyTorch (or the cuSOLVER it loads) imports answers
 * CUBLAS_STATUS_NOT_SUPPORTED (simcublas_stubs.c). */
#include <cublas_api.h>

#include <stdlib.h>

#define BLAS_EXPORT __attribute__((visibility("default")))

struct cublasContext {
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
    cublasMath_t math;
    cublasPointerMode_t pointer;
    cublasAtomicsMode_t atomics;
    int sm_target;
};

BLAS_EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasContext *h = calloc(1, sizeof *h);
    if (h) *h = (struct cublasContext){.math = CUBLAS_DEFAULT_MATH, .pointer = CUBLAS_POINTER_MODE_HOST};
    *handle = h;
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

BLAS_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

/* A setting of the handle: cublasSetNAME stores a value that `valid`
 * accepts (CUBLAS_STATUS_INVALID_VALUE else), cublasGetNAME hands it back.
 * A NULL handle is CUBLAS_STATUS_NOT_INITIALIZED. */
#define ANY(v) 1
#define HANDLE_SET(fn, type, field, valid)                                   \
    BLAS_EXPORT cublasStatus_t fn(cublasHandle_t handle, type value) {       \
        if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;                   \
        if (!valid(value)) return CUBLAS_STATUS_INVALID_VALUE;               \
        handle->field = value;                                               \
        return CUBLAS_STATUS_SUCCESS;                                        \
    }
#define HANDLE_GET(fn, type, field)                                          \
    BLAS_EXPORT cublasStatus_t fn(cublasHandle_t handle, type *value) {      \
        if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;                   \
        if (!value) return CUBLAS_STATUS_INVALID_VALUE;                      \
        *value = handle->field;                                              \
        return CUBLAS_STATUS_SUCCESS;                                        \
    }
#define POINTER_MODE_OK(m) ((m) == CUBLAS_POINTER_MODE_HOST || (m) == CUBLAS_POINTER_MODE_DEVICE)
#define NOT_NEGATIVE(v) ((v) >= 0)

HANDLE_SET(cublasSetStream_v2, cudaStream_t, stream, ANY)
HANDLE_GET(cublasGetStream_v2, cudaStream_t, stream)
HANDLE_SET(cublasSetMathMode, cublasMath_t, math, ANY)
HANDLE_GET(cublasGetMathMode, cublasMath_t, math)
HANDLE_SET(cublasSetPointerMode_v2, cublasPointerMode_t, pointer, POINTER_MODE_OK)
HANDLE_GET(cublasGetPointerMode_v2, cublasPointerMode_t, pointer)
HANDLE_SET(cublasSetAtomicsMode, cublasAtomicsMode_t, atomics, ANY)
HANDLE_SET(cublasSetSmCountTarget, int, sm_target, NOT_NEGATIVE)

BLAS_EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && !workspace) return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspace;
    handle->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

static int blas_op_ok(cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

/* The checks cuBLAS documents for C = alpha op(A) op(B) + beta C, column
 * major: sizes not negative, leading dimensions at least the rows stored. */
static cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                int lda, int ldb, int ldc, int batch) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!blas_op_ok(ta) || !blas_op_ok(tb) || m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
    if (lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t blas_gemv(cublasHandle_t h, cublasOperation_t t, int m, int n, int lda, int incx, int incy) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!blas_op_ok(t) || m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx == 0 || incy == 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

#define GEMM(name, T) \
BLAS_EXPORT cublasStatus_t name(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, \
                                const T *alpha, const T *A, int lda, const T *B, int ldb, const T *beta, T *C, int ldc) { \
    (void)alpha; (void)A; (void)B; (void)beta; (void)C; \
    return blas_gemm(h, ta, tb, m, n, k, lda, ldb, ldc, 1); \
}
GEMM(cublasSgemm_v2, float)
GEMM(cublasDgemm_v2, double)
GEMM(cublasCgemm_v2, cuComplex)
GEMM(cublasZgemm_v2, cuDoubleComplex)

#define GEMM_STRIDED(name, T) \
BLAS_EXPORT cublasStatus_t name(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, \
                                const T *alpha, const T *A, int lda, long long sa, const T *B, int ldb, long long sb, \
                                const T *beta, T *C, int ldc, long long sc, int batch) { \
    (void)alpha; (void)A; (void)sa; (void)B; (void)sb; (void)beta; (void)C; (void)sc; \
    return blas_gemm(h, ta, tb, m, n, k, lda, ldb, ldc, batch); \
}
GEMM_STRIDED(cublasSgemmStridedBatched, float)
GEMM_STRIDED(cublasDgemmStridedBatched, double)
GEMM_STRIDED(cublasCgemmStridedBatched, cuComplex)
GEMM_STRIDED(cublasZgemmStridedBatched, cuDoubleComplex)

#define GEMM_BATCHED(name, T) \
BLAS_EXPORT cublasStatus_t name(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, \
                                const T *alpha, const T *const A[], int lda, const T *const B[], int ldb, \
                                const T *beta, T *const C[], int ldc, int batch) { \
    (void)alpha; (void)A; (void)B; (void)beta; (void)C; \
    return blas_gemm(h, ta, tb, m, n, k, lda, ldb, ldc, batch); \
}
GEMM_BATCHED(cublasSgemmBatched, float)
GEMM_BATCHED(cublasDgemmBatched, double)
GEMM_BATCHED(cublasCgemmBatched, cuComplex)
GEMM_BATCHED(cublasZgemmBatched, cuDoubleComplex)

#define GEMV(name, T) \
BLAS_EXPORT cublasStatus_t name(cublasHandle_t h, cublasOperation_t t, int m, int n, const T *alpha, const T *A, \
                                int lda, const T *x, int incx, const T *beta, T *y, int incy) { \
    (void)alpha; (void)A; (void)x; (void)beta; (void)y; \
    return blas_gemv(h, t, m, n, lda, incx, incy); \
}
GEMV(cublasSgemv_v2, float)
GEMV(cublasDgemv_v2, double)
GEMV(cublasCgemv_v2, cuComplex)
GEMV(cublasZgemv_v2, cuDoubleComplex)

BLAS_EXPORT cublasStatus_t cublasSgemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const void *A, cudaDataType at, int lda,
                                         const void *B, cudaDataType bt, int ldb, const float *beta, void *C,
                                         cudaDataType ct, int ldc) {
    (void)alpha; (void)A; (void)at; (void)B; (void)bt; (void)beta; (void)C; (void)ct;
    return blas_gemm(h, ta, tb, m, n, k, lda, ldb, ldc, 1);
}

BLAS_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                        int k, const void *alpha, const void *A, cudaDataType at, int lda,
                                        const void *B, cudaDataType bt, int ldb, const void *beta, void *C,
                                        cudaDataType ct, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)alpha; (void)A; (void)at; (void)B; (void)bt; (void)beta; (void)C; (void)ct; (void)compute; (void)algo;
    return blas_gemm(h, ta, tb, m, n, k, lda, ldb, ldc, 1);
}

BLAS_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                                      int m, int n, int k, const void *alpha, const void *A,
                                                      cudaDataType at, int lda, long long sa, const void *B,
                                                      cudaDataType bt, int ldb, long long sb, const void *beta,
                                                      void *C, cudaDataType ct, int ldc, long long sc, int batch,
                                                      cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)alpha; (void)A; (void)at; (void)sa; (void)B; (void)bt; (void)sb; (void)beta; (void)C; (void)ct; (void)sc;
    (void)compute; (void)algo;
    return blas_gemm(h, ta, tb, m, n, k, lda, ldb, ldc, batch);
}

/* The stubs' status, named where the header can be included. */
_Static_assert(CUBLAS_STATUS_NOT_SUPPORTED == 15, "simcublas_stubs.c returns 15");
