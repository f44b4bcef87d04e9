/* simcublaslt.c -- a stand-in cuBLASLt (libcublasLt.so.13) for PyTorch on
 * the simulated GPU.
 *
 * Descriptors, layouts and preferences are real objects that accept their
 * attributes; the heuristic offers one algorithm that needs no workspace;
 * cublasLtMatmul checks its arguments and computes nothing (the simulated
 * GPU runs no kernels). PyTorch passes its cuBLAS handle as the cuBLASLt
 * handle, so any non-null handle is accepted. */
#include <cublasLt.h>

#include <stdlib.h>
#include <string.h>

#define LT_EXPORT __attribute__((visibility("default")))

static int lt_handle_tag;

LT_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = (cublasLtHandle_t)&lt_handle_tag;
    return CUBLAS_STATUS_SUCCESS;
}

LT_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

LT_EXPORT size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; } /* cuBLASLt ships with cuBLAS, under its version */

LT_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                                  cudaDataType_t scale) {
    (void)compute; (void)scale;
    if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
    *desc = calloc(1, sizeof **desc);
    return *desc ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

LT_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    free(desc);
    return CUBLAS_STATUS_SUCCESS;
}

LT_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                                        const void *buf, size_t size) {
    (void)attr;
    return desc && buf && size ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

LT_EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                                    uint64_t cols, int64_t ld) {
    (void)type; (void)cols;
    if (!layout || ld < 0 || (rows > 0 && (uint64_t)ld < rows && ld != 0)) return CUBLAS_STATUS_INVALID_VALUE;
    *layout = calloc(1, sizeof **layout);
    return *layout ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

LT_EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    free(layout);
    return CUBLAS_STATUS_SUCCESS;
}

LT_EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                          cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                                                          size_t size) {
    (void)attr;
    return layout && buf && size ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

LT_EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    *pref = calloc(1, sizeof **pref);
    return *pref ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

LT_EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    free(pref);
    return CUBLAS_STATUS_SUCCESS;
}

LT_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                              cublasLtMatmulPreferenceAttributes_t attr,
                                                              const void *buf, size_t size) {
    (void)attr;
    return pref && buf && size ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

/* The one algorithm: id 0, no workspace, one wave. */
static void lt_result(cublasLtMatmulHeuristicResult_t *r) {
    memset(r, 0, sizeof *r);
    r->workspaceSize = 0;
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = 1.0f;
}

LT_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                        cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                        cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                        cublasLtMatmulPreference_t pref, int requested,
                                                        cublasLtMatmulHeuristicResult_t results[], int *returned) {
    (void)pref;
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc || !a || !b || !c || !d || requested <= 0 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
    lt_result(&results[0]);
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

LT_EXPORT cublasStatus_t cublasLtMatmulAlgoInit(cublasLtHandle_t handle, cublasComputeType_t compute,
                                                cudaDataType_t scale, cudaDataType_t at, cudaDataType_t bt,
                                                cudaDataType_t ct, cudaDataType_t dt, int id,
                                                cublasLtMatmulAlgo_t *algo) {
    (void)compute; (void)scale; (void)at; (void)bt; (void)ct; (void)dt;
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!algo || id != 0) return CUBLAS_STATUS_INVALID_VALUE;
    memset(algo, 0, sizeof *algo);
    return CUBLAS_STATUS_SUCCESS;
}

LT_EXPORT cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                 cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                 cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                 const cublasLtMatmulAlgo_t *algo,
                                                 cublasLtMatmulHeuristicResult_t *result) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc || !a || !b || !c || !d || !algo || !result) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulAlgo_t copy = *algo;
    lt_result(result);
    result->algo = copy;
    return CUBLAS_STATUS_SUCCESS;
}

LT_EXPORT cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t *algo,
                                                              cublasLtMatmulAlgoConfigAttributes_t attr,
                                                              const void *buf, size_t size) {
    (void)attr;
    return algo && buf && size ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

/* Every configuration attribute of the one algorithm reads 0. */
LT_EXPORT cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                              cublasLtMatmulAlgoConfigAttributes_t attr, void *buf,
                                                              size_t size, size_t *written) {
    (void)attr;
    if (!algo || (size && !buf) || (!size && !written)) return CUBLAS_STATUS_INVALID_VALUE;
    if (written) *written = size ? size : sizeof(uint32_t);
    if (buf) memset(buf, 0, size);
    return CUBLAS_STATUS_SUCCESS;
}

LT_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                                        const void *A, cublasLtMatrixLayout_t a, const void *B,
                                        cublasLtMatrixLayout_t b, const void *beta, const void *C,
                                        cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                                        const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                                        cudaStream_t stream) {
    (void)alpha; (void)A; (void)B; (void)beta; (void)C; (void)D; (void)algo; (void)stream;
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc || !a || !b || !c || !d || (workspace_bytes && !workspace)) return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}
