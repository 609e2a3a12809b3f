//===- Blas.cpp - cuBLASLt matrix multiplication on the host --------------===//
//
// Descriptors hold what cuBLASLt's hold; the heuristic checks the problem as
// cuBLASLt does and returns one "algorithm" that records the alignments it
// may assume; a matmul checks its pointers against them and multiplies each
// batch with OpenBLAS's column-major sgemm (bf16 operands widened to f32,
// a bf16 result rounded once), queued on the stream.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/cuda/emulator/Emulator.h"
#include "runtime/ppcrt/cuda/emulator/include/cublasLt.h"
#include "runtime/ppcrt/cuda/emulator/include/cuda_bf16.h"

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <vector>

struct cublasLtContext {};

struct cublasLtMatmulDescOpaque {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  // The bias epilogue's: D's type, one per row of D; BGRADA's (written):
  // one per row of D, BGRADB's one per column.
  const void *bias = nullptr;
  int64_t biasStride = 0; // between the batch's bias vectors, in elements
};

struct cublasLtMatrixLayoutOpaque {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct cublasLtMatmulPreferenceOpaque {
  size_t workspaceBytes = 0;
  /// A, B, C, D: cuBLASLt assumes 256 bytes unless told less.
  uint32_t alignment[4] = {256, 256, 256, 256};
};

namespace {

constexpr uint64_t kAlgoTag = 0x7070632d656d75ull; // "ppc-emu"

size_t elementBytes(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

bool setScalar(void *field, size_t fieldBytes, const void *value, size_t bytes) {
  if (bytes != fieldBytes)
    return false;
  std::memcpy(field, value, bytes);
  return true;
}

/// The problem's m, n, k when the layouts and operations agree.
struct Shape {
  int64_t m, n, k;
};

bool shapeOf(const cublasLtMatmulDescOpaque &desc, const cublasLtMatrixLayoutOpaque &a,
             const cublasLtMatrixLayoutOpaque &b, const cublasLtMatrixLayoutOpaque &c,
             const cublasLtMatrixLayoutOpaque &d, Shape &shape) {
  if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale != CUDA_R_32F)
    return false;
  if (a.type != b.type || (a.type != CUDA_R_32F && a.type != CUDA_R_16BF))
    return false;
  if (c.type != d.type || (c.type != CUDA_R_32F && c.type != CUDA_R_16BF) ||
      (a.type == CUDA_R_32F && c.type != CUDA_R_32F))
    return false;
  bool ta = desc.transA == CUBLAS_OP_T, tb = desc.transB == CUBLAS_OP_T;
  shape.m = int64_t(ta ? a.cols : a.rows);
  shape.k = int64_t(ta ? a.rows : a.cols);
  int64_t bRows = int64_t(tb ? b.cols : b.rows);
  shape.n = int64_t(tb ? b.rows : b.cols);
  if (bRows != shape.k || int64_t(c.rows) != shape.m || int64_t(c.cols) != shape.n ||
      d.rows != c.rows || d.cols != c.cols)
    return false;
  for (const auto *layout : {&a, &b, &c, &d})
    if (layout->ld < int64_t(layout->rows) || layout->ld < 1 || layout->batch < 1 ||
        layout->stride < 0 || layout->batch != a.batch)
      return false;
  return true;
}

bool aligned(const void *pointer, const cublasLtMatrixLayoutOpaque &layout, uint64_t bytes) {
  if (bytes == 0)
    return true;
  uint64_t stride = uint64_t(layout.stride) * elementBytes(layout.type);
  return reinterpret_cast<uintptr_t>(pointer) % bytes == 0 &&
         (layout.batch == 1 || stride % bytes == 0);
}

/// The `rows` x `cols` (column-major, leading dimension ld) matrix at
/// `data` as f32.
const float *widened(const void *data, const cublasLtMatrixLayoutOpaque &layout,
                     std::vector<float> &storage) {
  if (layout.type == CUDA_R_32F)
    return static_cast<const float *>(data);
  size_t span = size_t(layout.ld) * (layout.cols - 1) + layout.rows;
  storage.resize(span);
  const auto *in = static_cast<const __nv_bfloat16 *>(data);
  for (size_t i = 0; i < span; ++i)
    storage[i] = float(in[i]);
  return storage.data();
}

void multiply(cublasLtMatmulDescOpaque desc, cublasLtMatrixLayoutOpaque a,
              cublasLtMatrixLayoutOpaque b, cublasLtMatrixLayoutOpaque c,
              cublasLtMatrixLayoutOpaque d, Shape shape, float alpha, float beta, const char *aData,
              const char *bData, const char *cData, char *dData) {
  std::vector<float> aWide, bWide, result;
  for (int32_t i = 0; i < a.batch; ++i) {
    const void *aAt = aData + i * a.stride * elementBytes(a.type);
    const void *bAt = bData + i * b.stride * elementBytes(b.type);
    const char *cAt = cData + i * c.stride * elementBytes(c.type);
    char *dAt = dData + i * d.stride * elementBytes(d.type);
    const float *x = widened(aAt, a, aWide), *y = widened(bAt, b, bWide);
    // D starts as C (when beta reads it) in f32, with D's leading dimension.
    result.assign(size_t(d.ld) * shape.n, 0.0f);
    if (beta != 0.0f)
      for (int64_t col = 0; col < shape.n; ++col)
        for (int64_t row = 0; row < shape.m; ++row) {
          size_t from = size_t(col) * c.ld + row;
          result[size_t(col) * d.ld + row] =
              c.type == CUDA_R_32F ? reinterpret_cast<const float *>(cAt)[from]
                                   : float(reinterpret_cast<const __nv_bfloat16 *>(cAt)[from]);
        }
    cblas_sgemm(CblasColMajor, desc.transA == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
                desc.transB == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, shape.m, shape.n, shape.k,
                alpha, x, a.ld, y, b.ld, beta, result.data(), d.ld);
    if (desc.epilogue == CUBLASLT_EPILOGUE_BIAS) {
      const char *biasAt =
          static_cast<const char *>(desc.bias) + i * desc.biasStride * elementBytes(d.type);
      for (int64_t col = 0; col < shape.n; ++col)
        for (int64_t row = 0; row < shape.m; ++row)
          result[size_t(col) * d.ld + row] +=
              d.type == CUDA_R_32F ? reinterpret_cast<const float *>(biasAt)[row]
                                   : float(reinterpret_cast<const __nv_bfloat16 *>(biasAt)[row]);
    }
    if (desc.epilogue == CUBLASLT_EPILOGUE_BGRADA || desc.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
      // The sums over k, in float, as D's type: of each row of op(A)
      // ([m, k]; BGRADA) or each column of op(B) ([k, n]; BGRADB).
      const bool ofA = desc.epilogue == CUBLASLT_EPILOGUE_BGRADA;
      char *sums = static_cast<char *>(const_cast<void *>(desc.bias)) +
                   i * desc.biasStride * elementBytes(d.type);
      for (int64_t j = 0; j < (ofA ? shape.m : shape.n); ++j) {
        float sum = 0.0f;
        for (int64_t kk = 0; kk < shape.k; ++kk)
          sum += ofA ? (desc.transA == CUBLAS_OP_T ? x[size_t(j) * a.ld + kk]
                                                   : x[size_t(kk) * a.ld + j])
                     : (desc.transB == CUBLAS_OP_T ? y[size_t(kk) * b.ld + j]
                                                   : y[size_t(j) * b.ld + kk]);
        if (d.type == CUDA_R_32F)
          reinterpret_cast<float *>(sums)[j] = sum;
        else
          reinterpret_cast<__nv_bfloat16 *>(sums)[j] = __nv_bfloat16(sum);
      }
    }
    for (int64_t col = 0; col < shape.n; ++col)
      for (int64_t row = 0; row < shape.m; ++row) {
        size_t at = size_t(col) * d.ld + row;
        if (d.type == CUDA_R_32F)
          reinterpret_cast<float *>(dAt)[at] = result[at];
        else
          reinterpret_cast<__nv_bfloat16 *>(dAt)[at] = __nv_bfloat16(result[at]);
      }
  }
}

} // namespace

const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  *desc = new cublasLtMatmulDescOpaque{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void *value, size_t bytes) {
  if (attribute == CUBLASLT_MATMUL_DESC_EPILOGUE) {
    if (!setScalar(&desc->epilogue, sizeof(desc->epilogue), value, bytes))
      return CUBLAS_STATUS_INVALID_VALUE;
    return desc->epilogue == CUBLASLT_EPILOGUE_DEFAULT ||
                   desc->epilogue == CUBLASLT_EPILOGUE_BIAS ||
                   desc->epilogue == CUBLASLT_EPILOGUE_BGRADA ||
                   desc->epilogue == CUBLASLT_EPILOGUE_BGRADB
               ? CUBLAS_STATUS_SUCCESS
               : CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (attribute == CUBLASLT_MATMUL_DESC_BIAS_POINTER)
    return setScalar(&desc->bias, sizeof(desc->bias), value, bytes) ? CUBLAS_STATUS_SUCCESS
                                                                    : CUBLAS_STATUS_INVALID_VALUE;
  if (attribute == CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE)
    return setScalar(&desc->biasStride, sizeof(desc->biasStride), value, bytes)
               ? CUBLAS_STATUS_SUCCESS
               : CUBLAS_STATUS_INVALID_VALUE;
  cublasOperation_t *field = attribute == CUBLASLT_MATMUL_DESC_TRANSA   ? &desc->transA
                             : attribute == CUBLASLT_MATMUL_DESC_TRANSB ? &desc->transB
                                                                        : nullptr;
  if (!field || !setScalar(field, sizeof(*field), value, bytes))
    return CUBLAS_STATUS_INVALID_VALUE;
  return *field == CUBLAS_OP_N || *field == CUBLAS_OP_T ? CUBLAS_STATUS_SUCCESS
                                                        : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (type != CUDA_R_32F && type != CUDA_R_16BF)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *layout = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attribute,
                                                const void *value, size_t bytes) {
  bool set = attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT
                 ? setScalar(&layout->batch, sizeof(layout->batch), value, bytes)
             : attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET
                 ? setScalar(&layout->stride, sizeof(layout->stride), value, bytes)
                 : false;
  return set ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference) {
  *preference = new cublasLtMatmulPreferenceOpaque;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void *value, size_t bytes) {
  bool set = false;
  if (attribute == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    set = setScalar(&preference->workspaceBytes, sizeof(size_t), value, bytes);
  else if (attribute >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
           attribute <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES)
    set = setScalar(&preference->alignment[attribute - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
                    sizeof(uint32_t), value, bytes);
  return set ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *found) {
  *found = 0;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  Shape shape;
  if (requested < 1 || !shapeOf(*desc, *a, *b, *c, *d, shape))
    return CUBLAS_STATUS_INVALID_VALUE;
  // A GPU's cuBLASLt may have no algorithm for an epilogue on some shapes,
  // types or layouts; PPCRT_EMULATOR_REFUSE_BGRAD makes the emulator's
  // have none for BGRADA and BGRADB, so that the caller's fallback runs in
  // tests.
  if ((desc->epilogue == CUBLASLT_EPILOGUE_BGRADA || desc->epilogue == CUBLASLT_EPILOGUE_BGRADB) &&
      std::getenv("PPCRT_EMULATOR_REFUSE_BGRAD"))
    return CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulHeuristicResult_t &result = results[0];
  result = cublasLtMatmulHeuristicResult_t{};
  result.algo.data[0] = kAlgoTag;
  for (int i = 0; i < 4; ++i)
    result.algo.data[1 + i] = preference->alignment[i];
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *a, cublasLtMatrixLayout_t aLayout, const void *b,
                              cublasLtMatrixLayout_t bLayout, const void *beta, const void *c,
                              cublasLtMatrixLayout_t cLayout, void *d,
                              cublasLtMatrixLayout_t dLayout, const cublasLtMatmulAlgo_t *algo,
                              void *, size_t, cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  Shape shape;
  if (!shapeOf(*desc, *aLayout, *bLayout, *cLayout, *dLayout, shape))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!algo || algo->data[0] != kAlgoTag)
    return CUBLAS_STATUS_INVALID_VALUE;
  // The algorithm was chosen for pointers this aligned.
  if (!aligned(a, *aLayout, algo->data[1]) || !aligned(b, *bLayout, algo->data[2]) ||
      !aligned(c, *cLayout, algo->data[3]) || !aligned(d, *dLayout, algo->data[4]))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  auto span = [](const cublasLtMatrixLayoutOpaque &l) -> size_t {
    if (l.rows == 0 || l.cols == 0)
      return 0;
    return (size_t(l.ld) * (l.cols - 1) + l.rows + size_t(l.stride) * (l.batch - 1)) *
           elementBytes(l.type);
  };
  if (!ppcrt::emu::isDeviceRange(a, span(*aLayout)) ||
      !ppcrt::emu::isDeviceRange(b, span(*bLayout)) ||
      !ppcrt::emu::isDeviceRange(d, span(*dLayout)))
    return CUBLAS_STATUS_INVALID_VALUE;
  float alphaValue = *static_cast<const float *>(alpha),
        betaValue = *static_cast<const float *>(beta);
  if (betaValue != 0.0f && !ppcrt::emu::isDeviceRange(c, span(*cLayout)))
    return CUBLAS_STATUS_INVALID_VALUE;
  // The bias epilogue reads one vector of D's rows per batch (D's type);
  // BGRADA writes one of its rows, BGRADB one of its columns.
  if (desc->epilogue == CUBLASLT_EPILOGUE_BIAS &&
      (!desc->bias ||
       !ppcrt::emu::isDeviceRange(
           desc->bias, (dLayout->rows + size_t(desc->biasStride) * (dLayout->batch - 1)) *
                           elementBytes(dLayout->type))))
    return CUBLAS_STATUS_INVALID_VALUE;
  if ((desc->epilogue == CUBLASLT_EPILOGUE_BGRADA || desc->epilogue == CUBLASLT_EPILOGUE_BGRADB) &&
      (!desc->bias ||
       !ppcrt::emu::isDeviceRange(
           desc->bias,
           ((desc->epilogue == CUBLASLT_EPILOGUE_BGRADA ? dLayout->rows : dLayout->cols) +
            size_t(desc->biasStride) * (dLayout->batch - 1)) *
               elementBytes(dLayout->type))))
    return CUBLAS_STATUS_INVALID_VALUE;
  ppcrt::emu::enqueue(stream, [=, descValue = *desc, aValue = *aLayout, bValue = *bLayout,
                               cValue = *cLayout, dValue = *dLayout] {
    multiply(descValue, aValue, bValue, cValue, dValue, shape, alphaValue, betaValue,
             static_cast<const char *>(a), static_cast<const char *>(b),
             static_cast<const char *>(c), static_cast<char *>(d));
  });
  return CUBLAS_STATUS_SUCCESS;
}
