//===- CpuGemm.cpp - GEMMs through OpenBLAS, on OpenMP's threads ----------===//
//
// One pool of threads for the whole step: OpenBLAS runs single-threaded
// (CpuDevice), and a GEMM big enough is cut into panels of C, one per
// OpenMP thread, each an OpenBLAS call over the whole depth. OpenBLAS's own
// threads (the pthread build Debian ships) waited for work in sched_yield
// loops beside OpenMP's, and took a quarter of a 2-core step's cycles
// (issue 19's profile); with one pool they do not exist. Each element of C
// is still one OpenBLAS dot product over k, so a split changes no result
// (CpuKernelsTest compares the two).
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/CpuKernels.h"

#include <cblas.h>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ppcrt::cpu {

namespace {

/// Panels of C start on multiples of this many rows or columns (OpenBLAS's
/// micro-kernels are at most 32 wide for floats with AVX-512).
constexpr int64_t kPanelAlign = 32;

/// The threads a GEMM of this size is split over: one below 2^21
/// multiply-adds (a 128^3 GEMM takes tens of microseconds on one core,
/// where waking another thread is not worth it), inside a parallel region,
/// or where neither side of C makes two panels.
int gemmThreads(int64_t m, int64_t n, int64_t k) {
#ifdef _OPENMP
  if (omp_in_parallel() || m * n * k < (int64_t(1) << 21))
    return 1;
  int64_t panels = std::max(m, n) / kPanelAlign;
  return int(std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), panels)));
#else
  (void)m, (void)n, (void)k;
  return 1;
#endif
}

/// c = op(a) op(b) by `blas` (cblas_sgemm or cblas_dgemm), over the
/// threads: the longer side of C is cut into one panel per thread.
template <typename T, typename Blas>
void splitGemm(Blas blas, bool transA, bool transB, int64_t m, int64_t n, int64_t k, const T *a,
               int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc, T beta = T(0)) {
  ldc = ldc ? ldc : n;
  auto call = [&](int64_t rows, int64_t cols, const T *pa, const T *pb, T *pc) {
    blas(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
         rows, cols, k, T(1), pa, lda, pb, ldb, beta, pc, ldc);
  };
  int threads = gemmThreads(m, n, k);
  if (threads == 1) {
    call(m, n, a, b, c);
    return;
  }
  bool byRows = m >= n;
  int64_t side = byRows ? m : n;
  int64_t panel = (side + threads - 1) / threads;
  panel = (panel + kPanelAlign - 1) / kPanelAlign * kPanelAlign;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int t = 0; t < threads; ++t) {
    int64_t begin = t * panel, end = std::min(side, begin + panel);
    if (begin >= end)
      continue;
    if (byRows)
      // Rows [begin, end) of op(a) and of c.
      call(end - begin, n, transA ? a + begin : a + begin * lda, b, c + begin * ldc);
    else
      // Columns [begin, end) of op(b) and of c.
      call(m, end - begin, a, transB ? b + begin * ldb : b + begin, c + begin);
  }
}

} // namespace

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
          const float *b, int64_t ldb, float *c, int64_t ldc) {
  splitGemm<float>(cblas_sgemm, transA, transB, m, n, k, a, lda, b, ldb, c, ldc);
}

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
          const double *b, int64_t ldb, double *c, int64_t ldc) {
  splitGemm<double>(cblas_dgemm, transA, transB, m, n, k, a, lda, b, ldb, c, ldc);
}

void gemmAccumulate(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
  splitGemm<float>(cblas_sgemm, transA, transB, m, n, k, a, lda, b, ldb, c, ldc, 1.0f);
}

void gemmAccumulate(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const double *a,
                    int64_t lda, const double *b, int64_t ldb, double *c, int64_t ldc) {
  splitGemm<double>(cblas_dgemm, transA, transB, m, n, k, a, lda, b, ldb, c, ldc, 1.0);
}

} // namespace ppcrt::cpu
