//===- CpuKernels.h - library kernels generated CPU code calls -----------===//
//
// The ops that are not fused elementwise loops: GEMMs (OpenBLAS), reductions,
// normalizations, the loss, attention, and data movement. Generated code
// calls them with every size a compile-time constant, so after inlining they
// are as specialized as emitted loops. Numerics follow the reference
// executor: sums accumulate in double and round once; GEMMs (BLAS) and
// attention (its products BLAS's) accumulate in the element type. The functions the op emitters
// call have the names and arguments of runtime/ppcrt/cuda/Kernels.cuh's: one emitter per op writes
// the call for either target (codegen/Ops.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_CPUKERNELS_H
#define PPC_RUNTIME_PPCRT_CPUKERNELS_H

#include "runtime/ppcrt/Lines.h"
#include "runtime/ppcrt/Math.h"
#include "runtime/ppcrt/NormSums.h"
#include "runtime/ppcrt/Rank.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ppcrt::cpu {

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// c[m, n] = op(a) op(b), row-major, op transposing when asked; lda/ldb/ldc
/// are the row lengths of a, b and c as stored (ldc 0: n, c dense).
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
          const float *b, int64_t ldb, float *c, int64_t ldc = 0);
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
          const double *b, int64_t ldb, double *c, int64_t ldc = 0);
/// c += op(a) op(b) (BLAS's beta = 1). For a depth OpenBLAS takes in one
/// block (attention's 64 rows) each element of c gets its product added
/// once: the bits of gemm's product added to c.
void gemmAccumulate(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc = 0);
void gemmAccumulate(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const double *a,
                    int64_t lda, const double *b, int64_t ldb, double *c, int64_t ldc = 0);

template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
          const T *b, int64_t ldb, T *c, int64_t ldc = 0) {
  ldc = ldc ? ldc : n;
  // Integers: exact, wrapping in 64 bits.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      uint64_t sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += uint64_t(transA ? a[p * lda + i] : a[i * lda + p]) *
               uint64_t(transB ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = T(sum);
    }
}

/// Batched matmul with broadcast batch dimensions: batch index `i` (row-major
/// over `batchShape`) reads a at sum(coord * aStrides) and b likewise, in
/// matrices; c is dense. A batch that only `a` has is folded into m.
template <typename T>
void matmul(bool transA, bool transB, int batchRank, const int64_t *batchShape,
            const int64_t *aStrides, const int64_t *bStrides, int64_t m, int64_t n, int64_t k,
            const T *a, const T *b, T *c) {
  int64_t lda = transA ? m : k, ldb = transB ? k : n;
  int64_t batch = 1;
  for (int d = 0; d < batchRank; ++d)
    batch *= batchShape[d];
  // b shared by every batch and a dense: one GEMM with m * batch rows.
  bool bShared = true, aDense = true;
  int64_t expect = 1;
  for (int d = batchRank - 1; d >= 0; --d) {
    bShared &= bStrides[d] == 0 || batchShape[d] == 1;
    aDense &= aStrides[d] == expect || batchShape[d] == 1;
    expect *= batchShape[d];
  }
  if (batch > 1 && bShared && aDense && !transA) {
    gemm(false, transB, m * batch, n, k, a, lda, b, ldb, c);
    return;
  }
  // One GEMM: split over the threads by `gemm`, which a parallel region
  // around it (even one of a single thread) would keep on one.
  if (batch == 1) {
    gemm(transA, transB, m, n, k, a, lda, b, ldb, c);
    return;
  }
  // One GEMM per batch index, the batch shared among the threads when
  // there are several GEMMs worth it (each then runs on one thread).
#pragma omp parallel for schedule(dynamic) if (batch > 1 && batch * m * n * k >= (int64_t(1) << 21))
  for (int64_t i = 0; i < batch; ++i) {
    int64_t aIndex = 0, bIndex = 0;
    for (int64_t d = batchRank - 1, rest = i; d >= 0; --d) {
      aIndex += rest % batchShape[d] * aStrides[d];
      bIndex += rest % batchShape[d] * bStrides[d];
      rest /= batchShape[d];
    }
    gemm(transA, transB, m, n, k, a + aIndex * m * k, lda, b + bIndex * k * n, ldb, c + i * m * n);
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

/// This thread's share of [0, size) inside a parallel region: contiguous,
/// in order of the threads, its bounds multiples of `align` but for the
/// last's end (`reduce`'s kept axis, and the generated loops that share
/// their innermost axis: codegen/cpu/Elementwise.cpp).
inline std::pair<int64_t, int64_t> threadShare(int64_t size, int64_t align = 1) {
  int64_t threads = 1, thread = 0;
#ifdef _OPENMP
  threads = omp_get_num_threads();
  thread = omp_get_thread_num();
#endif
  int64_t lo = size * thread / threads / align * align;
  int64_t hi = thread + 1 == threads ? size : size * (thread + 1) / threads / align * align;
  return {lo, hi};
}

/// The type a reduction of T accumulates in: double for floats; for
/// integers uint64_t (sums and products wrap), int64_t where signed order
/// matters (max, min of signed types).
template <typename T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

template <ReduceKind Kind, typename T>
using ReduceAccumulator =
    std::conditional_t<std::is_signed_v<T> && !std::is_floating_point_v<T> &&
                           (Kind == ReduceKind::Max || Kind == ReduceKind::Min),
                       int64_t, Accumulator<T>>;

template <ReduceKind Kind, typename A> inline A reduceIdentity() {
  if constexpr (Kind == ReduceKind::Sum || Kind == ReduceKind::Mean)
    return A(0);
  else if constexpr (Kind == ReduceKind::Prod)
    return A(1);
  else if constexpr (Kind == ReduceKind::Max)
    return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity()
                                       : std::numeric_limits<A>::lowest();
  else
    return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity()
                                       : std::numeric_limits<A>::max();
}

template <ReduceKind Kind, typename A> inline A reduceCombine(A x, A y) {
  if constexpr (Kind == ReduceKind::Sum || Kind == ReduceKind::Mean)
    return x + y;
  else if constexpr (Kind == ReduceKind::Prod)
    return x * y;
  else if constexpr (Kind == ReduceKind::Max)
    return (x != x) || x > y ? x : y;
  else
    return (x != x) || x < y ? x : y;
}

namespace detail {

/// Combines the elements of `in` (shape `shape`, rank `rank`, dimension d
/// reduced when bit d of `reducedMask` is set) into `acc` at
/// sum(coordinate * outStrides), in row-major order.
template <ReduceKind Kind, typename T, typename A>
void reduceBlock(const T *in, A *acc, int rank, const int64_t *shape, uint32_t reducedMask,
                 const int64_t *outStrides) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= shape[d];
  // Rows of the innermost dimension at a time.
  int64_t inner = rank ? shape[rank - 1] : 1;
  bool innerReduced = rank && (reducedMask >> (rank - 1) & 1);
  int64_t coords[kMaxRank] = {0};
  int64_t outIndex = 0;
  for (int64_t base = 0; base < total; base += inner) {
    const T *row = in + base;
    if (innerReduced) {
      A value = acc[outIndex];
      for (int64_t j = 0; j < inner; ++j)
        value = reduceCombine<Kind, A>(value, A(row[j]));
      acc[outIndex] = value;
    } else {
      A *target = acc + outIndex;
      for (int64_t j = 0; j < inner; ++j)
        target[j] = reduceCombine<Kind, A>(target[j], A(row[j]));
    }
    for (int d = rank - 2; d >= 0; --d) {
      outIndex += outStrides[d];
      if (++coords[d] < shape[d])
        break;
      outIndex -= outStrides[d] * shape[d];
      coords[d] = 0;
    }
  }
}

} // namespace detail

/// Reduces `in`, of the collapsed shape `shape` (rank `rank`; dimension d is
/// reduced when bit d of `reducedMask` is set), into `out` (the kept
/// dimensions). Each result combines its elements in row-major order, so
/// the result is the same bits on any number of threads: the threads share
/// the outermost kept dimension, whose coordinates have results of their
/// own (a bias's gradient, [rows, n] summed over rows, is cut by columns).
template <ReduceKind Kind, typename T>
void reduce(const T *in, T *out, int rank, const int64_t (&shape)[kMaxRank], uint32_t reducedMask) {
  using A = ReduceAccumulator<Kind, T>;
  int64_t outSize = 1, count = 1, total = 1;
  int64_t outStrides[kMaxRank];
  for (int d = rank - 1; d >= 0; --d) {
    total *= shape[d];
    if (reducedMask >> d & 1) {
      outStrides[d] = 0;
      count *= shape[d];
    } else {
      outStrides[d] = outSize;
      outSize *= shape[d];
    }
  }
  std::vector<A> acc(outSize, reduceIdentity<Kind, A>());
  int kept = 0; // the outermost kept dimension, `rank` if none
  while (kept < rank && (reducedMask >> kept & 1))
    ++kept;
  if (kept == rank || total < 65536 || shape[kept] < 2) {
    detail::reduceBlock<Kind>(in, acc.data(), rank, shape, reducedMask, outStrides);
  } else {
    // [before (reduced), shape[kept], after] with results of their own per
    // coordinate of `kept`.
    int64_t before = 1, after = 1, size = shape[kept];
    for (int d = 0; d < kept; ++d)
      before *= shape[d];
    for (int d = kept + 1; d < rank; ++d)
      after *= shape[d];
    int subRank = rank - kept - 1;
    uint32_t subMask = reducedMask >> (kept + 1);
#pragma omp parallel
    {
      const auto [lo, hi] = threadShare(size);
      for (int64_t b = 0; b < before; ++b) {
        const T *slice = in + b * size * after;
        if (subRank == 0) {
          for (int64_t c = lo; c < hi; ++c)
            acc[c] = reduceCombine<Kind, A>(acc[c], A(slice[c]));
        } else {
          for (int64_t c = lo; c < hi; ++c)
            detail::reduceBlock<Kind>(slice + c * after, acc.data() + c * outStrides[kept], subRank,
                                      shape + kept + 1, subMask, outStrides + kept + 1);
        }
      }
    }
  }
  for (int64_t i = 0; i < outSize; ++i) {
    A value = acc[i];
    if constexpr (Kind == ReduceKind::Mean) {
      if constexpr (std::is_floating_point_v<A>)
        value /= A(count);
      else
        value = count ? A(int64_t(value) / count) : A(0);
    }
    out[i] = T(value);
  }
}

//===----------------------------------------------------------------------===//
// Normalizations and the loss
//===----------------------------------------------------------------------===//

/// softmax (or log_softmax) over the middle dimension of [outer, size, inner];
/// y is dense, x's outer index o starts at o * xStride (size * inner when
/// dense; a wider row's window when inner is 1) and may be of another type.
template <bool IsLog, typename X, typename T>
void softmax(const X *x, T *y, int64_t outer, int64_t size, int64_t inner, int64_t xStride) {
  std::vector<double> shifted(size);
#pragma omp parallel for firstprivate(shifted) if (outer * size * inner > 32768)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t base = o * size * inner + j, from = o * xStride + j;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < size; ++k)
        max = std::max(max, double(x[from + k * inner]));
      double sum = 0;
      for (int64_t k = 0; k < size; ++k) {
        shifted[k] = double(x[from + k * inner]) - max;
        sum += std::exp(shifted[k]);
      }
      double logSum = std::log(sum);
      for (int64_t k = 0; k < size; ++k)
        y[base + k * inner] = T(IsLog ? shifted[k] - logSum : std::exp(shifted[k]) / sum);
    }
}

/// log_sum_exp over the middle dimension of [outer, size, inner] into y
/// [outer, inner] (the axis kept with size 1): max-subtracted, in double;
/// an infinite maximum is the result. x as softmax reads it.
template <typename X, typename T>
void logSumExp(const X *x, T *y, int64_t outer, int64_t size, int64_t inner, int64_t xStride) {
#pragma omp parallel for if (outer * size * inner > 32768)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t from = o * xStride + j;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < size; ++k)
        max = std::max(max, double(x[from + k * inner]));
      double sum = 0;
      for (int64_t k = 0; k < size; ++k)
        sum += std::exp(double(x[from + k * inner]) - max);
      y[o * inner + j] = T(std::isinf(max) ? max : max + std::log(sum));
    }
}

/// ppc.rotary (ir/PpcOps.td): each row's halves a and b with the tables'
/// (c, s) at their positions, in double, rounded once:
///   y = (a c_a - b s_a, b c_b + a s_b);  transposed: (a c_a + b s_b, b c_b - a s_a).
/// Each pair is read before it is written, so y may be x itself (the same
/// rows), not another view of its buffer.
template <typename T>
void rotary(const T *x, const T *cos, const T *sin, T *y, lines::RotaryShape shape) {
  int64_t half = shape.size / 2;
  const bool transposed = shape.transposed;
#pragma omp parallel for collapse(2) if (shape.batch * shape.rows * shape.size > 32768)
  for (int64_t n = 0; n < shape.batch; ++n)
    for (int64_t r = 0; r < shape.rows; ++r) {
      const T *in = x + shape.x.at(n, r), *c = cos + shape.cos.at(n, r),
              *s = sin + shape.sin.at(n, r);
      T *out = y + shape.y.at(n, r);
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        double a = double(in[i]), b = double(in[i + half]);
        double ca = double(c[i]), cb = double(c[i + half]);
        double sa = double(s[i]), sb = double(s[i + half]);
        out[i] = T(transposed ? a * ca + b * sb : a * ca - b * sa);
        out[i + half] = T(transposed ? b * cb - a * sa : b * cb + a * sb);
      }
    }
}

namespace detail {

/// The mean and the biased variance of a row, in double (the layer norms');
/// uncentered (RMSNorm's), 0 and the mean square.
template <bool Centered, typename T>
std::pair<double, double> rowMoments(const T *row, int64_t size) {
  double mean = 0;
  if constexpr (Centered) {
#pragma omp simd reduction(+ : mean)
    for (int64_t i = 0; i < size; ++i)
      mean += double(row[i]);
    mean /= size;
  }
  double variance = 0;
#pragma omp simd reduction(+ : variance)
  for (int64_t i = 0; i < size; ++i)
    variance += (double(row[i]) - mean) * (double(row[i]) - mean);
  return {mean, variance / size};
}

/// A row's statistics and the means its input gradient subtracts
/// (layerNormGrad), in double.
struct NormGradRow {
  double m, r, meanDxhat, meanProjection;
  /// The input gradient at a column of `x` with dxhat = dy * scale, rounded
  /// to T, plus `addend[at]` (unless null) as ppc.add rounds it.
  template <typename T> T written(T x, double dxhat, const T *addend, int64_t at) const {
    T value = T(r * (dxhat - meanDxhat - (double(x) - m) * r * meanProjection));
    return addend ? T(double(value) + double(addend[at])) : value;
  }
};

template <bool Centered, typename T>
NormGradRow normGradRow(const T *row, const T *g, const T *scale, int64_t scaleStride, int64_t size,
                        double epsilon) {
  const std::pair<double, double> moments = rowMoments<Centered>(row, size);
  NormGradRow n{moments.first, 1 / std::sqrt(moments.second + epsilon), 0, 0};
  double meanDxhat = 0, meanProjection = 0;
#pragma omp simd reduction(+ : meanDxhat, meanProjection)
  for (int64_t i = 0; i < size; ++i) {
    double dxhat = double(g[i]) * double(scale[i * scaleStride]);
    meanDxhat += dxhat;
    meanProjection += dxhat * (double(row[i]) - n.m) * n.r;
  }
  n.meanDxhat = Centered ? meanDxhat / size : 0;
  n.meanProjection = meanProjection / size;
  return n;
}

} // namespace detail

/// Layer normalization (RMS normalization unless Centered: no mean, the
/// mean square for the variance) of the rows of [outer, size]; scale and
/// bias hold `size` elements, or one (broadcast), as their strides (1 or 0)
/// say.
template <typename T, bool Centered = true>
void layerNorm(const T *x, const T *scale, int64_t scaleStride, const T *bias, int64_t biasStride,
               T *y, int64_t outer, int64_t size, double epsilon) {
#pragma omp parallel for if (outer * size > 32768)
  for (int64_t o = 0; o < outer; ++o) {
    const T *row = x + o * size;
    const std::pair<double, double> moments = detail::rowMoments<Centered>(row, size);
    const double mean = moments.first, variance = moments.second;
    double stddev = std::sqrt(variance + epsilon);
#pragma omp simd
    for (int64_t i = 0; i < size; ++i) {
      double v = (row[i] - mean) / stddev * double(scale[i * scaleStride]);
      if (bias)
        v += double(bias[i * biasStride]);
      y[o * size + i] = T(v);
    }
  }
}

/// The input's gradient of layerNorm over the rows of [outer, size] given
/// the result's (dy), with each row's statistics as the forward computes
/// them: mean (unless null) and rstd = 1 / sqrt(var + epsilon), in S (float,
/// or double). Where `addend` is not null, dx is the gradient (rounded to
/// T) plus addend, rounded again: the add of the residual stream's gradient
/// as ppc.add computes it.
template <typename T, typename S, bool Centered = true>
void layerNormGrad(const T *x, const T *scale, int64_t scaleStride, const T *dy, T *dx,
                   const T *addend, S *mean, S *rstd, int64_t outer, int64_t size, double epsilon) {
#pragma omp parallel for if (outer * size > 32768)
  for (int64_t o = 0; o < outer; ++o) {
    const T *row = x + o * size, *g = dy + o * size;
    const detail::NormGradRow n =
        detail::normGradRow<Centered>(row, g, scale, scaleStride, size, epsilon);
#pragma omp simd
    for (int64_t i = 0; i < size; ++i)
      dx[o * size + i] =
          n.written(row[i], double(g[i]) * double(scale[i * scaleStride]), addend, o * size + i);
    if (mean)
      mean[o] = S(n.m);
    rstd[o] = S(n.r);
  }
}

/// layerNormGrad that also sums over the rows dy, dy times the normalized
/// input and the values it writes, where `sums` asks (NormSums.h): the rows
/// in 64 fixed chunks (not one per thread), each chunk's sums in double,
/// added in chunk order, so the result does not depend on the threads.
template <typename T, typename S, bool Centered = true, typename R, typename P, typename I>
void layerNormGrad(const T *x, const T *scale, int64_t scaleStride, const T *dy, T *dx,
                   const T *addend, S *mean, S *rstd, int64_t outer, int64_t size, double epsilon,
                   NormGradSums<R, P, I> sums) {
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(outer, 64));
  std::vector<double> partials(size_t(chunks * 3 * size), 0.0);
#pragma omp parallel for if (outer * size > 32768)
  for (int64_t c = 0; c < chunks; ++c) {
    double *own = partials.data() + c * 3 * size;
    for (int64_t o = outer * c / chunks; o < outer * (c + 1) / chunks; ++o) {
      const T *row = x + o * size, *g = dy + o * size;
      const detail::NormGradRow n =
          detail::normGradRow<Centered>(row, g, scale, scaleStride, size, epsilon);
      for (int64_t i = 0; i < size; ++i) {
        double gi = double(g[i]), xhat = (double(row[i]) - n.m) * n.r;
        T written = n.written(row[i], gi * double(scale[i * scaleStride]), addend, o * size + i);
        dx[o * size + i] = written;
        own[i] += gi;
        own[size + i] += gi * xhat;
        own[2 * size + i] += double(written);
      }
      if (mean)
        mean[o] = S(n.m);
      rstd[o] = S(n.r);
    }
  }
  for (int64_t i = 0; i < size; ++i) {
    double total[3] = {0, 0, 0};
    for (int64_t c = 0; c < chunks; ++c)
      for (int kind = 0; kind < 3; ++kind)
        total[kind] += partials[size_t((c * 3 + kind) * size + i)];
    if (sums.resultGrad)
      sums.resultGrad[i] = R(total[0]);
    if (sums.scaleGrad)
      sums.scaleGrad[i] = P(total[1]);
    if (sums.inputGrad)
      sums.inputGrad[i] = I(total[2]);
  }
}

enum class LossReduction { None, Sum, Mean };

/// nll_loss of input [batch, classes, inner] at targets [batch, inner]; the
/// input's batch index n starts at n * inputStride (classes * inner when
/// dense; a wider row's window when inner is 1) and may be of a narrower
/// type, widened exactly. Where `shift` is not null the loss reads input -
/// shift, shift [batch, inner] (a log-softmax's log_sum_exp), rounded to T
/// as ppc.sub would.
template <typename X, typename T>
void nllLoss(const X *input, int64_t inputStride, const T *shift, const int64_t *target,
             const T *weight, T *out, int64_t batch, int64_t classes, int64_t inner,
             LossReduction reduction, bool hasIgnore, int64_t ignoreIndex, const char *node) {
  double lossSum = 0, weightSum = 0;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t i = n * inner + j, t = target[i];
      if (hasIgnore && t == ignoreIndex) {
        if (reduction == LossReduction::None)
          out[i] = T(0);
        continue;
      }
      if (t < 0 || t >= classes) {
        kernelFailed(node);
        if (reduction == LossReduction::None)
          out[i] = T(0);
        continue;
      }
      double w = weight ? double(weight[t]) : 1.0;
      double picked = double(input[n * inputStride + t * inner + j]);
      if (shift)
        picked = double(T(picked - double(shift[i])));
      double loss = -picked * w;
      if (reduction == LossReduction::None)
        out[i] = T(loss);
      lossSum += loss;
      weightSum += w;
    }
  if (reduction == LossReduction::Sum)
    out[0] = T(lossSum);
  else if (reduction == LossReduction::Mean)
    out[0] = T(lossSum / weightSum);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace detail {

/// The queries a task of the attention kernels takes. Its scores, a row of
/// keys per query (as many as the block's last query sees), are a slab of
/// kAttentionRows x keys per thread; the products are OpenBLAS's.
constexpr int64_t kAttentionRows = 64;

/// Row s of a slab of scores, q.k for the `visible` keys a query sees, as
/// the scores proper in place: scale * s[c] + bias[c * biasStride] (no
/// bias where null); returns their max (-inf where none is seen).
template <typename C>
inline C attentionScores(C *s, C scale, const C *bias, int64_t biasStride, int64_t visible) {
  C best = -std::numeric_limits<C>::infinity();
  if (bias) {
#pragma omp simd reduction(max : best)
    for (int64_t c = 0; c < visible; ++c) {
      C x = scale * s[c];
      x += bias[c * biasStride];
      s[c] = x;
      best = x > best ? x : best;
    }
  } else {
#pragma omp simd reduction(max : best)
    for (int64_t c = 0; c < visible; ++c) {
      C x = scale * s[c];
      s[c] = x;
      best = x > best ? x : best;
    }
  }
  return best;
}

/// Whether a scaled dot-product attention this big runs on several threads.
inline bool attentionInParallel(const lines::AttentionShape &shape, int64_t tasks) {
  return tasks > 1 &&
         shape.batch * shape.queries * shape.keys * (shape.headDim + shape.valueDim) > 65536;
}

} // namespace detail

/// Scaled dot-product attention (ppc.attention) over the shape's batch of
/// heads (lines::AttentionShape): o = softmax(scale q k^T + bias) v, each
/// operand's rows where the shape says, and the log-sum-exp of each query's
/// scores in lse. Each task
/// takes kAttentionRows queries of a head (FlashAttention-2's row blocks,
/// without tiles of keys: a block's rows of scores fit): S = Q K^T over the
/// keys its last query sees, by gemm; the softmax row by row (keys a causal
/// query does not see weigh exactly 0); O = P V, by gemm, divided by the
/// rows' sums. The memory is a slab of kAttentionRows x keys scores per
/// thread. Computed in T (float or double; the CPU target has no bf16); L
/// is T.
template <typename T, typename L>
void attention(const T *q, const T *k, const T *v, const T *bias, T *o, L *lse,
               const lines::AttentionShape &layout) {
  static_assert(std::is_floating_point_v<T>, "attention computes in float or double");
  constexpr int64_t R = detail::kAttentionRows;
  const lines::AttentionShape shape = layout.resolved();
  const int64_t queries = shape.queries, keys = shape.keys, depth = shape.headDim,
                width = shape.valueDim;
  const int64_t blocks = (queries + R - 1) / R, tasks = shape.batch * blocks;
  const T scale = T(shape.scale), none = -std::numeric_limits<T>::infinity();
#pragma omp parallel if (detail::attentionInParallel(shape, tasks))
  {
    std::vector<T> scores(R * keys);
    T sum[R];
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t n = task / blocks, i0 = task % blocks * R, rows = std::min(R, queries - i0);
      const int64_t first = n * queries + i0, end = shape.visibleKeys(i0 + rows - 1);
      const T *vs = v + shape.v.head(n);
      gemm(false, true, rows, end, depth, q + shape.q.at(n, i0), shape.q.rowStride,
           k + shape.k.head(n), shape.k.rowStride, scores.data());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        T *s = scores.data() + r * end;
        int64_t visible = shape.visibleKeys(i);
        const T best = detail::attentionScores(
            s, scale, bias ? bias + shape.biasAt(n, i, 0) : nullptr, shape.biasColStride, visible);
        if (best == none) // nothing to see: lse -inf, o NaN (0 / 0)
          visible = 0;
        T rowSum = 0;
#pragma omp simd reduction(+ : rowSum)
        for (int64_t c = 0; c < visible; ++c) {
          s[c] = scalar::exp(s[c] - best);
          rowSum += s[c];
        }
        std::fill(s + visible, s + end, T(0));
        sum[r] = rowSum;
        lse[first + r] = L(best + std::log(rowSum));
      }
      T *os = o + shape.o.at(n, i0);
      const int64_t ldo = shape.o.rowStride;
      gemm(false, false, rows, width, end, scores.data(), end, vs, shape.v.rowStride, os, ldo);
      for (int64_t r = 0; r < rows; ++r) {
        const T inverse = T(1) / sum[r];
        for (int64_t e = 0; e < width; ++e)
          os[r * ldo + e] *= inverse;
      }
    }
  }
}

/// The gradients of attention (ppc.attention_grad) with respect to q, k
/// and v (written, not accumulated; the bias has none), from the forward's
/// output o and log-sum-exp (FlashAttention-2's backward): per block of
/// kAttentionRows queries, P = exp(S - lse) recomputed from S = Q K^T,
/// dP = dO V^T, dS = P (dP - rowsum(dO o)), dq = scale dS K, and the
/// block's terms of dk = scale dS^T Q and dv = P^T dO, every product by
/// gemm. A thread takes a head at a time (its dk and dv are no other
/// thread's), its blocks in order, so the sums are the same on any number
/// of threads.
template <typename T, typename L>
void attentionGrad(
    const T *q, const T *k, const T *v, const T *bias, const T *o, const L *lse, const T *dO, T *dq,
    T *dk, T *dv, const lines::AttentionShape &layout,
    float * /*dqSums: CUDA's one-kernel backward's; none planned on CPUs*/ = nullptr) {
  static_assert(std::is_floating_point_v<T>, "attention computes in float or double");
  constexpr int64_t R = detail::kAttentionRows;
  const lines::AttentionShape shape = layout.resolved();
  const int64_t queries = shape.queries, keys = shape.keys, depth = shape.headDim,
                width = shape.valueDim;
  const int64_t ldq = shape.q.rowStride, ldk = shape.k.rowStride, ldv = shape.v.rowStride,
                ldo = shape.o.rowStride, lddO = shape.dO.rowStride, lddq = shape.dq.rowStride,
                lddk = shape.dk.rowStride, lddv = shape.dv.rowStride;
  const T scale = T(shape.scale);
  auto rowDot = [](const T *x, const T *y, int64_t size) {
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t e = 0; e < size; ++e)
      dot += x[e] * y[e];
    return dot;
  };
#pragma omp parallel if (detail::attentionInParallel(shape, shape.batch))
  {
    // P and dS for a block's rows.
    std::vector<T> p(R * keys), dS(R * keys);
#pragma omp for schedule(dynamic)
    for (int64_t n = 0; n < shape.batch; ++n) {
      const T *ks = k + shape.k.head(n), *vs = v + shape.v.head(n);
      T *dks = dk + shape.dk.head(n), *dvs = dv + shape.dv.head(n);
      for (int64_t j = 0; j < keys; ++j) {
        std::fill_n(dks + j * lddk, depth, T(0));
        std::fill_n(dvs + j * lddv, width, T(0));
      }
      for (int64_t i0 = 0; i0 < queries; i0 += R) {
        const int64_t rows = std::min(R, queries - i0), first = n * queries + i0,
                      end = shape.visibleKeys(i0 + rows - 1);
        const T *qs = q + shape.q.at(n, i0), *dOs = dO + shape.dO.at(n, i0),
                *os = o + shape.o.at(n, i0);
        gemm(false, true, rows, end, depth, qs, ldq, ks, ldk, p.data());
        gemm(false, true, rows, end, width, dOs, lddO, vs, ldv, dS.data());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r, visible = shape.visibleKeys(i);
          T *pr = p.data() + r * end, *dr = dS.data() + r * end;
          const T rowLse = T(lse[first + r]);
          const T rowD = rowDot(dOs + r * lddO, os + r * ldo, width);
          detail::attentionScores(pr, scale, bias ? bias + shape.biasAt(n, i, 0) : nullptr,
                                  shape.biasColStride, visible);
#pragma omp simd
          for (int64_t c = 0; c < visible; ++c) {
            const T x = scalar::exp(pr[c] - rowLse);
            pr[c] = x;
            dr[c] = x * (dr[c] - rowD);
          }
          std::fill(pr + visible, pr + end, T(0));
          std::fill(dr + visible, dr + end, T(0));
        }
        T *dqs = dq + shape.dq.at(n, i0);
        gemm(false, false, rows, depth, end, dS.data(), end, ks, ldk, dqs, lddq);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t e = 0; e < depth; ++e)
            dqs[r * lddq + e] *= scale;
        gemmAccumulate(true, false, end, depth, rows, dS.data(), end, qs, ldq, dks, lddk);
        gemmAccumulate(true, false, end, width, rows, p.data(), end, dOs, lddO, dvs, lddv);
      }
      for (int64_t j = 0; j < keys; ++j)
        for (int64_t e = 0; e < depth; ++e)
          dks[j * lddk + e] *= scale;
    }
  }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// out (dense, d.size) at coordinates c reads in[offset + sum c[k] * d.stride[k]].
template <typename T> void stridedCopy(const T *in, T *out, const Dims &d, int64_t offset) {
  int rank = d.rank;
  const int64_t *shape = d.size, *strides = d.stride;
  if (rank == 0) {
    out[0] = in[offset];
    return;
  }
  int64_t inner = shape[rank - 1], innerStride = strides[rank - 1], total = 1;
  for (int k = 0; k < rank; ++k)
    total *= shape[k];
  int64_t coords[kMaxRank] = {0};
  int64_t index = offset;
  for (int64_t base = 0; base < total; base += inner) {
    const T *from = in + index;
    T *to = out + base;
    if (innerStride == 1)
      std::memcpy(to, from, inner * sizeof(T));
    else
      for (int64_t j = 0; j < inner; ++j)
        to[j] = from[j * innerStride];
    for (int k = rank - 2; k >= 0; --k) {
      index += strides[k];
      if (++coords[k] < shape[k])
        break;
      index -= strides[k] * shape[k];
      coords[k] = 0;
    }
  }
}

/// The inverse: in (dense, d.size) at c is written to out[offset + sum c[k] * d.stride[k]].
template <typename T> void stridedStore(const T *in, T *out, const Dims &d, int64_t offset) {
  int rank = d.rank;
  const int64_t *shape = d.size, *strides = d.stride;
  if (rank == 0) {
    out[offset] = in[0];
    return;
  }
  int64_t inner = shape[rank - 1], innerStride = strides[rank - 1], total = 1;
  for (int k = 0; k < rank; ++k)
    total *= shape[k];
  int64_t coords[kMaxRank] = {0};
  int64_t index = offset;
  for (int64_t base = 0; base < total; base += inner) {
    for (int64_t j = 0; j < inner; ++j)
      out[index + j * innerStride] = in[base + j];
    for (int k = rank - 2; k >= 0; --k) {
      index += strides[k];
      if (++coords[k] < shape[k])
        break;
      index -= strides[k] * shape[k];
      coords[k] = 0;
    }
  }
}

/// out[0, n) = value.
template <typename T> void fill(T *out, int64_t n, T value) { std::fill_n(out, n, value); }

/// Copies `bytes` between arena buffers.
inline void copy(void *out, const void *in, size_t bytes) { std::memcpy(out, in, bytes); }

/// Copies a constant of the program into the arena (one memory on CPUs).
inline void upload(void *out, const void *in, size_t bytes) { std::memcpy(out, in, bytes); }

/// Concatenation: input k's pieces of `chunk` bytes, `pitch` bytes apart
/// (`chunk` where it is dense), go at byte `at` of each `row`-byte row of
/// the result.
inline void concatPart(void *out, const void *in, int64_t outer, int64_t row, int64_t at,
                       int64_t chunk, int64_t pitch) {
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char *>(out) + o * row + at, static_cast<const char *>(in) + o * pitch,
                chunk);
}

/// Transposes the last two dimensions of [batch, rows, cols] in tiles.
template <typename T>
void transpose2d(const T *in, T *out, int64_t batch, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
#pragma omp parallel for collapse(2) if (batch * rows * cols > 65536)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i0 = 0; i0 < rows; i0 += kTile)
      for (int64_t j0 = 0; j0 < cols; j0 += kTile)
        for (int64_t i = i0; i < std::min(rows, i0 + kTile); ++i)
          for (int64_t j = j0; j < std::min(cols, j0 + kTile); ++j)
            out[b * rows * cols + j * rows + i] = in[b * rows * cols + i * cols + j];
}

/// Row `rows[i]` of data [outer, n, inner] to row i of out [outer, numRows,
/// inner]; negative indices count from the end, and one outside [-n, n)
/// gives a zero row and is recorded (kernelFailed).
template <typename T>
void gather(const T *data, const int64_t *indices, T *out, int64_t outer, int64_t n, int64_t inner,
            int64_t numRows, const char *node) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < numRows; ++i) {
      T *to = out + (o * numRows + i) * inner;
      if (indices[i] < -n || indices[i] >= n) {
        kernelFailed(node);
        std::memset(to, 0, inner * sizeof(T));
        continue;
      }
      int64_t row = indices[i] < 0 ? indices[i] + n : indices[i];
      std::memcpy(to, data + (o * n + row) * inner, inner * sizeof(T));
    }
}

/// out [outer, n, inner] = zeros, then row i of updates [outer, numRows,
/// inner] added into row rows[i].
template <typename T>
void scatterAdd(const T *updates, const int64_t *indices, T *out, int64_t outer, int64_t n,
                int64_t inner, int64_t numRows, const char *node) {
  std::memset(out, 0, outer * n * inner * sizeof(T));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < numRows; ++i) {
      if (indices[i] < -n || indices[i] >= n) {
        kernelFailed(node);
        continue;
      }
      int64_t row = indices[i] < 0 ? indices[i] + n : indices[i];
      const T *from = updates + (o * numRows + i) * inner;
      T *to = out + (o * n + row) * inner;
      for (int64_t j = 0; j < inner; ++j)
        to[j] += from[j];
    }
}

/// Keeps the lower (or upper) triangle of the last two dimensions.
template <typename T>
void trilu(const T *in, T *out, int64_t total, int64_t rows, int64_t cols, bool upper, int64_t k) {
  for (int64_t i = 0; i < total; ++i) {
    int64_t row = i / cols % rows, col = i % cols;
    out[i] = (upper ? col - row >= k : col - row <= k) ? in[i] : T(0);
  }
}

/// arg_max over the lines along the middle dimension of [outer, n, inner]
/// (Lines.h); out is [outer, 1, inner].
template <typename T>
void argMax(const T *in, int64_t *out, int64_t outer, int64_t n, int64_t inner, bool largest,
            bool last) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j)
      out[o * inner + j] = lines::argMax<T>(in + o * n * inner + j, n, inner, largest, last);
}

/// top_k_indices over the lines along the middle dimension of
/// [outer, n, inner] (Lines.h).
template <typename T>
void topKIndices(const T *in, int64_t *out, int64_t outer, int64_t n, int64_t inner, int64_t k,
                 bool largest) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j)
      lines::topKIndices<T>(in + o * n * inner + j, out + o * k * inner + j, n, inner, k, largest);
}

/// cumsum over the lines along the middle dimension of [outer, n, inner].
template <typename T>
void cumsum(const T *in, T *out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
            bool reverse) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j)
      lines::cumsum(in + o * n * inner + j, out + o * n * inner + j, n, inner, exclusive, reverse);
}

/// Generic einsum: every combination of label values, output labels
/// outermost; strides[t * numLabels + l] is operand t's step for label l
/// (the output is operand `numOperands`).
template <typename T>
void einsum(const T *const *operands, int numOperands, T *out, int numLabels, const int64_t *sizes,
            const int64_t *strides, int64_t outSize) {
  using A = Accumulator<T>;
  std::vector<A> acc(outSize, A(0));
  int64_t coords[32] = {0}, offsets[33] = {0};
  int64_t total = 1;
  for (int l = 0; l < numLabels; ++l)
    total *= sizes[l];
  for (int64_t step = 0; step < total; ++step) {
    A product = 1;
    for (int t = 0; t < numOperands; ++t)
      product *= A(operands[t][offsets[t]]);
    acc[offsets[numOperands]] += product;
    for (int l = numLabels - 1; l >= 0; --l) {
      for (int t = 0; t <= numOperands; ++t)
        offsets[t] += strides[t * numLabels + l];
      if (++coords[l] < sizes[l])
        break;
      for (int t = 0; t <= numOperands; ++t)
        offsets[t] -= strides[t * numLabels + l] * sizes[l];
      coords[l] = 0;
    }
  }
  for (int64_t i = 0; i < outSize; ++i)
    out[i] = T(acc[i]);
}

} // namespace ppcrt::cpu

#endif // PPC_RUNTIME_PPCRT_CPUKERNELS_H
