//===- cublasLt.h - cuBLASLt matrix multiplication, emulated -----*- C++ -*-===//
//
// The cuBLASLt calls ppc makes, with the library's names and semantics:
// D = alpha op(A) op(B) + beta C (+ a bias vector per row of D, the bias
// epilogue) on column-major layouts with leading dimensions and strided
// batches, f32 or bf16 operands, f32 compute, D rounded once. The
// emulator checks what cuBLASLt checks (that the layouts agree with the
// operations and with each other, and that pointers have the alignment the
// chosen algorithm was asked to assume) and multiplies with OpenBLAS's sgemm.
//
//===----------------------------------------------------------------------===//

#ifndef PPCRT_EMULATOR_CUBLASLT_H
#define PPCRT_EMULATOR_CUBLASLT_H

#include "cuda_runtime_api.h"
#include "library_types.h"

#include <cstddef>
#include <cstdint>

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };

enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,
};

enum cublasLtEpilogue_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_BGRADA = 256,
  CUBLASLT_EPILOGUE_BGRADB = 512,
};

enum cublasLtMatrixLayoutAttribute_t {
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
};

enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

struct cublasLtContext;
struct cublasLtMatmulDescOpaque;
struct cublasLtMatrixLayoutOpaque;
struct cublasLtMatmulPreferenceOpaque;
typedef cublasLtContext *cublasLtHandle_t;
typedef cublasLtMatmulDescOpaque *cublasLtMatmulDesc_t;
typedef cublasLtMatrixLayoutOpaque *cublasLtMatrixLayout_t;
typedef cublasLtMatmulPreferenceOpaque *cublasLtMatmulPreference_t;

struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};

struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

const char *cublasLtGetStatusString(cublasStatus_t status);
cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void *value, size_t bytes);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attribute,
                                                const void *value, size_t bytes);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void *value, size_t bytes);

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *found);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *a, cublasLtMatrixLayout_t aLayout, const void *b,
                              cublasLtMatrixLayout_t bLayout, const void *beta, const void *c,
                              cublasLtMatrixLayout_t cLayout, void *d,
                              cublasLtMatrixLayout_t dLayout, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceBytes, cudaStream_t stream);

#endif // PPCRT_EMULATOR_CUBLASLT_H
