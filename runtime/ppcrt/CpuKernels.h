//===- CpuKernels.h - library kernels generated CPU code calls -----------===//
//
// The ops that are not fused elementwise loops: GEMMs (OpenBLAS), reductions,
// normalizations, the loss, attention, and data movement. Generated code
// calls them with every size a compile-time constant, so after inlining they
// are as specialized as emitted loops. Numerics follow the reference
// executor: sums accumulate in double and round once; GEMMs (BLAS) and
// attention (tile by tile) accumulate in the element type. The functions the op emitters call have
// the names and arguments of runtime/ppcrt/cuda/Kernels.cuh's: one emitter per op writes the call
// for either target (codegen/Ops.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_CPUKERNELS_H
#define PPC_RUNTIME_PPCRT_CPUKERNELS_H

#include "runtime/ppcrt/Lines.h"
#include "runtime/ppcrt/Math.h"
#include "runtime/ppcrt/Rank.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace ppcrt::cpu {

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// c[m, n] = op(a) op(b), row-major, op transposing when asked; lda/ldb are
/// the row lengths of a and b as stored.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
          const float *b, int64_t ldb, float *c);
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
          const double *b, int64_t ldb, double *c);

template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
          const T *b, int64_t ldb, T *c) {
  // Integers: exact, wrapping in 64 bits.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      uint64_t sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += uint64_t(transA ? a[p * lda + i] : a[i * lda + p]) *
               uint64_t(transB ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * n + j] = T(sum);
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

/// Reduces `in`, of the collapsed shape `shape` (rank `rank`; dimension d is
/// reduced when bit d of `reducedMask` is set), into `out` (the kept
/// dimensions). `count` is the number of elements combined per result.
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
      A *target = acc.data() + outIndex;
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

/// softmax (or log_softmax) over the middle dimension of [outer, size, inner].
template <bool IsLog, typename T>
void softmax(const T *x, T *y, int64_t outer, int64_t size, int64_t inner) {
  std::vector<double> shifted(size);
#pragma omp parallel for firstprivate(shifted) if (outer * size * inner > 32768)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t base = o * size * inner + j;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < size; ++k)
        max = std::max(max, double(x[base + k * inner]));
      double sum = 0;
      for (int64_t k = 0; k < size; ++k) {
        shifted[k] = double(x[base + k * inner]) - max;
        sum += std::exp(shifted[k]);
      }
      double logSum = std::log(sum);
      for (int64_t k = 0; k < size; ++k)
        y[base + k * inner] = T(IsLog ? shifted[k] - logSum : std::exp(shifted[k]) / sum);
    }
}

/// Layer normalization of the rows of [outer, size]; scale and bias hold
/// `size` elements, or one (broadcast), as their strides (1 or 0) say.
template <typename T>
void layerNorm(const T *x, const T *scale, int64_t scaleStride, const T *bias, int64_t biasStride,
               T *y, int64_t outer, int64_t size, double epsilon) {
#pragma omp parallel for if (outer * size > 32768)
  for (int64_t o = 0; o < outer; ++o) {
    const T *row = x + o * size;
    double mean = 0;
    for (int64_t i = 0; i < size; ++i)
      mean += row[i];
    mean /= size;
    double variance = 0;
    for (int64_t i = 0; i < size; ++i)
      variance += (row[i] - mean) * (row[i] - mean);
    variance /= size;
    double stddev = std::sqrt(variance + epsilon);
    for (int64_t i = 0; i < size; ++i) {
      double v = (row[i] - mean) / stddev * double(scale[i * scaleStride]);
      if (bias)
        v += double(bias[i * biasStride]);
      y[o * size + i] = T(v);
    }
  }
}

enum class LossReduction { None, Sum, Mean };

/// nll_loss of input [batch, classes, inner] at targets [batch, inner].
template <typename T>
void nllLoss(const T *input, const int64_t *target, const T *weight, T *out, int64_t batch,
             int64_t classes, int64_t inner, LossReduction reduction, bool hasIgnore,
             int64_t ignoreIndex, const char *node) {
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
      double loss = -double(input[(n * classes + t) * inner + j]) * w;
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

/// The rows a task of the attention kernels takes (queries in the forward
/// and dq passes, keys in the dk/dv pass) and the columns of a tile of
/// scores (keys, queries): the tile products below keep 4 rows of a tile
/// in vector registers.
constexpr int64_t kAttentionRows = 64, kAttentionTile = 32;

/// e^x, vectorizable for floats (Math.h: libm's expf does not vectorize
/// without -ffast-math and costs more than the rest of a score).
inline float attentionExp(float x) { return math::exp(x); }
inline double attentionExp(double x) { return std::exp(x); }

/// acc + x * y, in one rounding where the CPU has FMA. Generated CPU code is
/// built with -ffp-contract=off (a fusion group rounds each op once, so a
/// recomputed clone in another group rounds alike); the attention kernels
/// ask for their multiply-adds here instead.
template <typename C> inline C madd(C x, C y, C acc) {
#if defined(__FMA__)
  return std::fma(x, y, acc);
#else
  return acc + x * y;
#endif
}

/// bT[d * kAttentionTile + c] = b[c * ldb + d]: `cols` rows of b transposed
/// (depth of them each), zeros past them.
template <typename C>
inline void attentionTranspose(const C *b, int64_t ldb, int64_t cols, int64_t depth, C *bT) {
  constexpr int64_t N = kAttentionTile;
  for (int64_t d = 0; d < depth; ++d)
    std::fill_n(bT + d * N + cols, N - cols, C(0));
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t d = 0; d < depth; ++d)
      bT[d * N + c] = b[c * ldb + d];
}

/// out[r * kAttentionTile + c] = sum_d a[r * lda + d] * bT[d * kAttentionTile
/// + c] for r < rows: a tile of dot products, vectorized along c.
template <typename C>
inline void attentionDots(const C *a, int64_t lda, int64_t rows, const C *bT, int64_t depth,
                          C *out) {
  constexpr int64_t N = kAttentionTile;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    C acc[4][N] = {};
    const C *a0 = a + r * lda;
    for (int64_t d = 0; d < depth; ++d) {
      const C *b = bT + d * N;
      for (int x = 0; x < 4; ++x) {
        C s = a0[x * lda + d];
        for (int64_t c = 0; c < N; ++c)
          acc[x][c] = madd(s, b[c], acc[x][c]);
      }
    }
    std::memcpy(out + r * N, acc, sizeof(acc));
  }
  for (; r < rows; ++r) {
    C acc[N] = {};
    for (int64_t d = 0; d < depth; ++d) {
      C s = a[r * lda + d];
      for (int64_t c = 0; c < N; ++c)
        acc[c] = madd(s, bT[d * N + c], acc[c]);
    }
    std::memcpy(out + r * N, acc, sizeof(acc));
  }
}

/// out[r * cols + e] += sum_c p[r * kAttentionTile + c] * b[c * cols + e] for
/// r < rows, c < depth: a tile of weights times `depth` rows of b,
/// vectorized along e.
template <typename C>
inline void attentionAccumulate(const C *p, int64_t rows, const C *b, int64_t depth, int64_t cols,
                                C *out) {
  constexpr int64_t N = kAttentionTile, W = 32;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    int64_t e0 = 0;
    for (; e0 + W <= cols; e0 += W) {
      C acc[4][W];
      for (int x = 0; x < 4; ++x)
        for (int64_t e = 0; e < W; ++e)
          acc[x][e] = out[(r + x) * cols + e0 + e];
      for (int64_t c = 0; c < depth; ++c) {
        const C *row = b + c * cols + e0;
        for (int x = 0; x < 4; ++x) {
          C w = p[(r + x) * N + c];
          for (int64_t e = 0; e < W; ++e)
            acc[x][e] = madd(w, row[e], acc[x][e]);
        }
      }
      for (int x = 0; x < 4; ++x)
        for (int64_t e = 0; e < W; ++e)
          out[(r + x) * cols + e0 + e] = acc[x][e];
    }
    for (int x = 0; x < 4; ++x)
      for (int64_t c = 0; c < depth; ++c) {
        C w = p[(r + x) * N + c];
        for (int64_t e = e0; e < cols; ++e)
          out[(r + x) * cols + e] = madd(w, b[c * cols + e], out[(r + x) * cols + e]);
      }
  }
  for (; r < rows; ++r)
    for (int64_t c = 0; c < depth; ++c) {
      C w = p[r * N + c];
      for (int64_t e = 0; e < cols; ++e)
        out[r * cols + e] = madd(w, b[c * cols + e], out[r * cols + e]);
    }
}

/// The scores of one row of a tile: s[c] = scale * s[c] + bias[c *
/// biasStride] for c < visible, -inf past it (the keys a causal query does
/// not see, and the tile's padding); returns their max.
template <typename C>
inline C attentionScores(C *s, C scale, const C *bias, int64_t biasStride, int64_t visible) {
  constexpr int64_t N = kAttentionTile;
  const C none = -std::numeric_limits<C>::infinity();
  for (int64_t c = 0; c < N; ++c)
    s[c] = c < visible ? scale * s[c] : none;
  if (bias)
    for (int64_t c = 0; c < visible; ++c)
      s[c] += bias[c * biasStride];
  C best = none;
#pragma omp simd reduction(max : best)
  for (int64_t c = 0; c < N; ++c)
    best = s[c] > best ? s[c] : best;
  return best;
}

/// Whether a scaled dot-product attention this big runs on several threads.
inline bool attentionInParallel(const lines::AttentionShape &shape, int64_t tasks) {
  return tasks > 1 &&
         shape.batch * shape.queries * shape.keys * (shape.headDim + shape.valueDim) > 65536;
}

} // namespace detail

/// Scaled dot-product attention (ppc.attention) over the shape's batch of
/// heads (lines::AttentionShape): o = softmax(scale q k^T + bias) v, dense
/// row-major, and the log-sum-exp of each query's scores in lse. The scores
/// are never stored: each task takes kAttentionRows queries through tiles
/// of kAttentionTile keys with an online softmax (FlashAttention's), so the
/// memory is a few tiles per thread. Computed in T (float or double; the
/// CPU target has no bf16); L is T.
template <typename T, typename L>
void attention(const T *q, const T *k, const T *v, const T *bias, T *o, L *lse,
               const lines::AttentionShape &shape) {
  static_assert(std::is_floating_point_v<T>, "attention computes in float or double");
  using detail::kAttentionRows, detail::kAttentionTile;
  constexpr int64_t R = kAttentionRows, N = kAttentionTile;
  const int64_t queries = shape.queries, keys = shape.keys, depth = shape.headDim,
                width = shape.valueDim;
  const int64_t blocks = (queries + R - 1) / R, tasks = shape.batch * blocks;
  const T scale = T(shape.scale), none = -std::numeric_limits<T>::infinity();
#pragma omp parallel if (detail::attentionInParallel(shape, tasks))
  {
    std::vector<T> kT(depth * N), scores(R * N), acc(R * width);
    T rowMax[R], sum[R];
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t n = task / blocks, i0 = task % blocks * R, rows = std::min(R, queries - i0);
      const T *qs = q + (n * queries + i0) * depth, *ks = k + n * keys * depth,
              *vs = v + n * keys * width;
      std::fill_n(acc.data(), rows * width, T(0));
      std::fill_n(rowMax, R, none);
      std::fill_n(sum, R, T(0));
      const int64_t end = shape.visibleKeys(i0 + rows - 1);
      for (int64_t j0 = 0; j0 < end; j0 += N) {
        const int64_t cols = std::min(N, end - j0);
        detail::attentionTranspose(ks + j0 * depth, depth, cols, depth, kT.data());
        detail::attentionDots(qs, depth, rows, kT.data(), depth, scores.data());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r, visible = std::min(shape.visibleKeys(i) - j0, cols);
          T *s = scores.data() + r * N;
          T tileMax = visible > 0
                          ? detail::attentionScores(s, scale,
                                                    bias ? bias + shape.biasAt(n, i, j0) : nullptr,
                                                    shape.biasColStride, visible)
                          : none;
          if (tileMax == none) { // nothing to see in this tile: adds 0
            std::fill_n(s, N, T(0));
            continue;
          }
          T next = std::max(rowMax[r], tileMax), rowSum = 0;
#pragma omp simd reduction(+ : rowSum)
          for (int64_t c = 0; c < N; ++c) {
            s[c] = detail::attentionExp(s[c] - next);
            rowSum += s[c];
          }
          if (next != rowMax[r]) {
            T alpha = detail::attentionExp(rowMax[r] - next);
            sum[r] *= alpha;
            for (int64_t e = 0; e < width; ++e)
              acc[r * width + e] *= alpha;
            rowMax[r] = next;
          }
          sum[r] += rowSum;
        }
        detail::attentionAccumulate(scores.data(), rows, vs + j0 * width, cols, width, acc.data());
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = n * queries + i0 + r;
        lse[i] = L(rowMax[r] + std::log(sum[r]));
        T inverse = T(1) / sum[r];
        for (int64_t e = 0; e < width; ++e)
          o[i * width + e] = acc[r * width + e] * inverse;
      }
    }
  }
}

/// The gradients of attention (ppc.attention_grad) with respect to q, k
/// and v (written, not accumulated; the bias has none), from the forward's
/// output o and log-sum-exp (FlashAttention's backward): P = exp(S - lse)
/// recomputed tile by tile, dS = P (dO v^T - rowsum(dO o)), dq = scale dS k,
/// dk = scale dS^T q, dv = P^T dO. Two passes so that no two threads write
/// one row: queries for dq, then keys for dk and dv (with the tiles
/// transposed: keys are the rows, queries the columns).
template <typename T, typename L>
void attentionGrad(const T *q, const T *k, const T *v, const T *bias, const T *o, const L *lse,
                   const T *dO, T *dq, T *dk, T *dv, const lines::AttentionShape &shape) {
  static_assert(std::is_floating_point_v<T>, "attention computes in float or double");
  using detail::kAttentionRows, detail::kAttentionTile;
  constexpr int64_t R = kAttentionRows, N = kAttentionTile;
  const int64_t queries = shape.queries, keys = shape.keys, depth = shape.headDim,
                width = shape.valueDim;
  const T scale = T(shape.scale), none = -std::numeric_limits<T>::infinity();
  auto rowDot = [](const T *x, const T *y, int64_t size) {
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t e = 0; e < size; ++e)
      dot += x[e] * y[e];
    return dot;
  };

  // dq: tasks of R queries.
  const int64_t queryBlocks = (queries + R - 1) / R, queryTasks = shape.batch * queryBlocks;
#pragma omp parallel if (detail::attentionInParallel(shape, queryTasks))
  {
    std::vector<T> kT(depth * N), vT(width * N), scores(R * N), dP(R * N), acc(R * depth);
    T rowLse[R], rowD[R];
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < queryTasks; ++task) {
      const int64_t n = task / queryBlocks, i0 = task % queryBlocks * R,
                    rows = std::min(R, queries - i0);
      const int64_t first = n * queries + i0;
      const T *ks = k + n * keys * depth, *vs = v + n * keys * width;
      for (int64_t r = 0; r < rows; ++r) {
        rowLse[r] = T(lse[first + r]);
        rowD[r] = rowDot(dO + (first + r) * width, o + (first + r) * width, width);
      }
      std::fill_n(acc.data(), rows * depth, T(0));
      const int64_t end = shape.visibleKeys(i0 + rows - 1);
      for (int64_t j0 = 0; j0 < end; j0 += N) {
        const int64_t cols = std::min(N, end - j0);
        detail::attentionTranspose(ks + j0 * depth, depth, cols, depth, kT.data());
        detail::attentionTranspose(vs + j0 * width, width, cols, width, vT.data());
        detail::attentionDots(q + first * depth, depth, rows, kT.data(), depth, scores.data());
        detail::attentionDots(dO + first * width, width, rows, vT.data(), width, dP.data());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r, visible = std::min(shape.visibleKeys(i) - j0, cols);
          T *s = scores.data() + r * N;
          const T *dp = dP.data() + r * N;
          detail::attentionScores(s, scale, bias ? bias + shape.biasAt(n, i, j0) : nullptr,
                                  shape.biasColStride, std::max<int64_t>(visible, 0));
          for (int64_t c = 0; c < N; ++c) {
            T p = detail::attentionExp(s[c] - rowLse[r]);
            s[c] = p * (dp[c] - rowD[r]);
          }
        }
        detail::attentionAccumulate(scores.data(), rows, ks + j0 * depth, cols, depth, acc.data());
      }
      for (int64_t e = 0; e < rows * depth; ++e)
        dq[first * depth + e] = scale * acc[e];
    }
  }

  // dk and dv: tasks of R keys; a causal one starts at the first query that
  // sees its first key.
  const int64_t keyBlocks = (keys + R - 1) / R, keyTasks = shape.batch * keyBlocks;
#pragma omp parallel if (detail::attentionInParallel(shape, keyTasks))
  {
    std::vector<T> qT(depth * N), dOT(width * N), scores(R * N), dP(R * N), accK(R * depth),
        accV(R * width);
    T colLse[N], colD[N];
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < keyTasks; ++task) {
      const int64_t n = task / keyBlocks, j0 = task % keyBlocks * R, rows = std::min(R, keys - j0);
      const int64_t first = n * keys + j0;
      const T *biasN = bias ? bias + shape.biasAt(n, 0, 0) : nullptr;
      std::fill_n(accK.data(), rows * depth, T(0));
      std::fill_n(accV.data(), rows * width, T(0));
      for (int64_t i0 = shape.causal ? j0 : 0; i0 < queries; i0 += N) {
        const int64_t cols = std::min(N, queries - i0), at = n * queries + i0;
        for (int64_t c = 0; c < cols; ++c) {
          colLse[c] = T(lse[at + c]);
          colD[c] = rowDot(dO + (at + c) * width, o + (at + c) * width, width);
        }
        detail::attentionTranspose(q + at * depth, depth, cols, depth, qT.data());
        detail::attentionTranspose(dO + at * width, width, cols, width, dOT.data());
        detail::attentionDots(k + first * depth, depth, rows, qT.data(), depth, scores.data());
        detail::attentionDots(v + first * width, width, rows, dOT.data(), width, dP.data());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t j = j0 + r;
          T *s = scores.data() + r * N, *dp = dP.data() + r * N;
          // Query i0 + c sees key j when j <= i0 + c (causal) or always.
          const int64_t from = shape.causal ? std::max<int64_t>(j - i0, 0) : 0;
          const T *biasRow =
              biasN ? biasN + i0 * shape.biasRowStride + j * shape.biasColStride : nullptr;
          T x[N];
          for (int64_t c = 0; c < N; ++c)
            x[c] = scale * s[c] - colLse[c];
          if (biasRow)
            for (int64_t c = from; c < cols; ++c)
              x[c] += T(biasRow[c * shape.biasRowStride]);
          for (int64_t c = 0; c < N; ++c) {
            bool seen = c >= from && c < cols;
            T p = detail::attentionExp(seen ? x[c] : none);
            s[c] = p;
            dp[c] = seen ? p * (dp[c] - colD[c]) : T(0);
          }
        }
        detail::attentionAccumulate(scores.data(), rows, dO + at * width, cols, width, accV.data());
        detail::attentionAccumulate(dP.data(), rows, q + at * depth, cols, depth, accK.data());
      }
      for (int64_t e = 0; e < rows * depth; ++e)
        dk[first * depth + e] = scale * accK[e];
      std::copy_n(accV.data(), rows * width, dv + first * width);
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

/// Concatenation: input k's rows of `chunk` bytes go at byte `at` of each
/// `row`-byte row of the result.
inline void concatPart(void *out, const void *in, int64_t outer, int64_t row, int64_t at,
                       int64_t chunk) {
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char *>(out) + o * row + at, static_cast<const char *>(in) + o * chunk,
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
