//===- Gemm.cpp - batched GEMMs through cuBLASLt --------------------------===//
//
// Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ, so cuBLASLt
// is given B as its first operand and A as its second. Broadcast batch
// dimensions are collapsed into as few strided batches as the strides
// allow; the innermost run is one strided-batched call, outer ones loop.
// Layouts, descriptors and the heuristic's algorithm are cached per shape.
// A bias is cuBLASLt's bias epilogue (one element per row of its column-
// major D: per column of ours), an addend its C with beta 1.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/Rank.h"
#include "runtime/ppcrt/cuda/Cuda.h"

#include <cublasLt.h>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ppcrt::cuda {
namespace {

void checkBlas(cublasStatus_t status, const char *what, const char *node) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  std::string message = std::string("cuBLASLt: ") + cublasLtGetStatusString(status) + " in " +
                        what + " for node '" + node + "'";
  fatal(message.c_str());
}

/// Sets one attribute of a matmul descriptor.
template <typename T>
void setAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                  const T &value, const char *what, const char *node) {
  checkBlas(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)), what, node);
}

cudaDataType_t dataType(GemmType type) { return type == GemmType::F32 ? CUDA_R_32F : CUDA_R_16BF; }

constexpr size_t kWorkspaceBytes = 32 << 20;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  /// Whether the GEMM writes the sums it was asked for (BGRADA or BGRADB).
  bool sums = false;
};

using Key = std::tuple<int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       uint32_t, uint32_t, uint32_t, uint32_t, bool, uint32_t, uint32_t>;

/// The largest power of two (at most 256, cuBLASLt's default assumption)
/// dividing every address `base + i * step` a call reads or writes.
uint32_t alignmentOf(const void *base, int64_t step) {
  uint64_t bits = reinterpret_cast<uintptr_t>(base) | uint64_t(step) | 256;
  return uint32_t(bits & (~bits + 1));
}

struct Gemms {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  std::map<Key, Plan> plans;

  ~Gemms() {
    for (auto &[key, plan] : plans) {
      cublasLtMatrixLayoutDestroy(plan.a);
      cublasLtMatrixLayoutDestroy(plan.b);
      cublasLtMatrixLayoutDestroy(plan.c);
      cublasLtMatmulDescDestroy(plan.op);
    }
    if (handle)
      cublasLtDestroy(handle);
    cudaFree(workspace);
  }

  /// The plan of one strided batch of `count` products (cuBLASLt's view:
  /// first operand B, second A, both column-major).
  Plan &plan(GemmType inputs, GemmType output, bool transA, bool transB, int64_t m, int64_t n,
             int64_t k, int64_t count, int64_t aStride, int64_t bStride, uint32_t alignA,
             uint32_t alignB, uint32_t alignC, uint32_t alignD, const void *bias,
             uint32_t alignBias, void *sums, bool sumsOfA, uint32_t alignSums, const char *node) {
    if (!handle) {
      checkBlas(cublasLtCreate(&handle), "creating the cuBLASLt handle", node);
      check(cudaMalloc(&workspace, kWorkspaceBytes), "allocating the cuBLASLt workspace");
    }
    Key key{int(inputs),
            int(output),
            transA,
            transB,
            m,
            n,
            k,
            count,
            aStride,
            bStride,
            alignA,
            alignB,
            alignC,
            alignD,
            bias != nullptr,
            alignBias,
            sums ? alignSums * 2 + sumsOfA : 0};
    auto it = plans.find(key);
    if (it != plans.end())
      return it->second;
    Plan p;
    const char *what = "planning a GEMM";
    checkBlas(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), what, node);
    cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                      opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    setAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, opFirst, what, node);
    setAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, opSecond, what, node);
    if (bias) {
      // The heuristic reads the pointer for its alignment; each call sets its own.
      setAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS), what,
                   node);
      setAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, what, node);
    } else if (sums) {
      // cuBLASLt's B is our a (BGRADB: its sums over k, one per column of
      // its D, our rows), its A our b (BGRADA: one per row of its D).
      setAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                   uint32_t(sumsOfA ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BGRADA), what,
                   node);
      setAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void *>(sums), what,
                   node);
      p.sums = true;
    }
    // B stored [k, n] (or [n, k] when transposed), row-major.
    int64_t bRows = transB ? k : n, bCols = transB ? n : k;
    int64_t aRows = transA ? m : k, aCols = transA ? k : m;
    checkBlas(cublasLtMatrixLayoutCreate(&p.b, dataType(inputs), bRows, bCols, bRows), what, node);
    checkBlas(cublasLtMatrixLayoutCreate(&p.a, dataType(inputs), aRows, aCols, aRows), what, node);
    checkBlas(cublasLtMatrixLayoutCreate(&p.c, dataType(output), n, m, n), what, node);
    if (count > 1) {
      int32_t batch = int32_t(count);
      int64_t strides[3] = {bStride * k * n, aStride * m * k, m * n};
      cublasLtMatrixLayout_t layouts[3] = {p.b, p.a, p.c};
      for (int i = 0; i < 3; ++i) {
        checkBlas(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                   &batch, sizeof(batch)),
                  what, node);
        checkBlas(cublasLtMatrixLayoutSetAttribute(layouts[i],
                                                   CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                   &strides[i], sizeof(strides[i])),
                  what, node);
      }
    }
    cublasLtMatmulPreference_t preference;
    checkBlas(cublasLtMatmulPreferenceCreate(&preference), what, node);
    size_t workspaceBytes = kWorkspaceBytes;
    checkBlas(cublasLtMatmulPreferenceSetAttribute(preference,
                                                   CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &workspaceBytes, sizeof(workspaceBytes)),
              what, node);
    // Arena buffers are 64-byte aligned, batch offsets less: the algorithm
    // must not assume cuBLASLt's default 256 bytes. (cuBLASLt's A is our B.)
    std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignB},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignA},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD}};
    for (auto &[attribute, bytes] : alignments)
      checkBlas(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof(bytes)),
                what, node);
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(handle, p.op, p.b, p.a, p.c, p.c,
                                                              preference, 1, &result, &found);
    if (!p.sums)
      checkBlas(heuristic, what, node);
    if (p.sums && (heuristic != CUBLAS_STATUS_SUCCESS || found == 0)) {
      // No algorithm with the sums (none found, or CUBLAS_STATUS_NOT_SUPPORTED:
      // no heuristic for the configuration): the plain product, and the
      // caller sums (matmul returns false).
      setAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_DEFAULT), what,
                   node);
      p.sums = false;
      checkBlas(cublasLtMatmulAlgoGetHeuristic(handle, p.op, p.b, p.a, p.c, p.c, preference, 1,
                                               &result, &found),
                what, node);
    }
    cublasLtMatmulPreferenceDestroy(preference);
    if (found == 0) {
      std::string message =
          std::string("cuBLASLt has no algorithm for the GEMM of node '") + node + "'";
      fatal(message.c_str());
    }
    p.algo = result.algo;
    return plans.emplace(key, p).first->second;
  }
};

Gemms gemms;

size_t bytesOf(GemmType type) { return type == GemmType::F32 ? 4 : 2; }

} // namespace

bool matmul(GemmType inputs, GemmType output, bool transA, bool transB, int batchRank,
            const int64_t *batchShape, const int64_t *aStrides, const int64_t *bStrides, int64_t m,
            int64_t n, int64_t k, const void *a, const void *b, void *c, const void *bias,
            const void *addend, void *aSums, void *bSums, const char *node) {
  // Collapse batch dimensions: (size, a stride, b stride, c stride).
  struct Dim {
    int64_t size, a, b, c;
  };
  std::vector<Dim> dims;
  int64_t cStride = 1;
  std::vector<Dim> reversed;
  for (int d = batchRank - 1; d >= 0; --d) {
    if (batchShape[d] == 1)
      continue;
    Dim dim{batchShape[d], aStrides[d], bStrides[d], cStride};
    cStride *= batchShape[d];
    if (!reversed.empty()) {
      Dim &inner = reversed.back();
      if (dim.a == inner.a * inner.size && dim.b == inner.b * inner.size &&
          dim.c == inner.c * inner.size) {
        inner.size *= dim.size;
        continue;
      }
    }
    reversed.push_back(dim);
  }
  dims.assign(reversed.rbegin(), reversed.rend());
  Dim innermost = dims.empty() ? Dim{1, 0, 0, 1} : dims.back();
  if (!dims.empty())
    dims.pop_back();
  size_t in = bytesOf(inputs), out = bytesOf(output);
  // Every matrix the call touches starts at base + a multiple of these.
  int64_t aStep = m * k * in, bStep = k * n * in, cStep = m * n * out;
  uint32_t alignA = alignmentOf(a, aStep), alignB = alignmentOf(b, bStep),
           alignC = alignmentOf(addend ? addend : c, cStep), alignD = alignmentOf(c, cStep),
           alignBias = bias ? alignmentOf(bias, 0) : 0;
  // The sums of one product only (a batch's would be summed over it).
  void *sums = aSums ? aSums : bSums;
  if (!dims.empty() || innermost.size > 1)
    sums = nullptr;
  uint32_t alignSums = sums ? alignmentOf(sums, 0) : 0;
  Plan &p = gemms.plan(inputs, output, transA, transB, m, n, k, innermost.size, innermost.a,
                       innermost.b, alignA, alignB, alignC, alignD, bias, alignBias, sums,
                       aSums != nullptr, alignSums, node);
  if (bias)
    setAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, "setting a GEMM's bias", node);
  if (p.sums)
    setAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void *>(sums),
                 "setting a GEMM's sums", node);
  int64_t outer = 1;
  for (const Dim &d : dims)
    outer *= d.size;
  const float one = 1, beta = addend ? 1 : 0;
  std::vector<int64_t> coord(dims.size(), 0);
  for (int64_t i = 0; i < outer; ++i) {
    int64_t aOffset = 0, bOffset = 0, cOffset = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      aOffset += coord[d] * dims[d].a;
      bOffset += coord[d] * dims[d].b;
      cOffset += coord[d] * dims[d].c;
    }
    const char *aAt = static_cast<const char *>(a) + aOffset * m * k * in;
    const char *bAt = static_cast<const char *>(b) + bOffset * k * n * in;
    char *cAt = static_cast<char *>(c) + cOffset * m * n * out;
    const char *addendAt = addend ? static_cast<const char *>(addend) + cOffset * m * n * out : cAt;
    checkBlas(cublasLtMatmul(gemms.handle, p.op, &one, bAt, p.b, aAt, p.a, &beta, addendAt, p.c,
                             cAt, p.c, &p.algo, gemms.workspace, kWorkspaceBytes, stream()),
              "a GEMM", node);
    for (int d = int(dims.size()) - 1; d >= 0; --d) {
      if (++coord[d] < dims[d].size)
        break;
      coord[d] = 0;
    }
  }
  return p.sums;
}

} // namespace ppcrt::cuda
