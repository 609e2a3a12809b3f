//===- CpuGemm.cpp - GEMMs through OpenBLAS -------------------------------===//

#include "runtime/ppcrt/CpuKernels.h"

#include <cblas.h>

namespace ppcrt::cpu {

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
          const float *b, int64_t ldb, float *c) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
}

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
          const double *b, int64_t ldb, double *c) {
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              m, n, k, 1.0, a, lda, b, ldb, 0.0, c, n);
}

} // namespace ppcrt::cpu
