//===- Lines.h - scans and selections along one line of a tensor ---------===//
//
// Kernels over the lines of a tensor viewed as [outer, n, inner]: one call
// handles line (o, j), the n elements o*n*inner + j, stride inner. The CPU
// kernels loop over the lines and the CUDA kernels give each line a thread,
// both calling these, so the two targets compute alike.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_LINES_H
#define PPC_RUNTIME_PPCRT_LINES_H

#include "runtime/ppcrt/Scalar.h"

#include <cstdint>

namespace ppcrt::lines {

/// Running sums of the line, added in scan order (from the end with
/// `reverse`; without the element itself with `exclusive`).
template <typename T>
PPCRT_HD inline void cumsum(const T *in, T *out, int64_t n, int64_t inner, bool exclusive,
                            bool reverse) {
  T sum = T(0);
  for (int64_t s = 0; s < n; ++s) {
    int64_t i = (reverse ? n - 1 - s : s) * inner;
    T x = in[i];
    if (exclusive)
      out[i] = sum;
    sum += x;
    if (!exclusive)
      out[i] = sum;
  }
}

/// Whether `x` comes before `y` in top-k order: larger (smaller) first,
/// NaN as the largest; equal elements keep their order.
template <typename K> PPCRT_HD inline bool topKBefore(K x, K y, bool largest) {
  bool xn = x != x, yn = y != y;
  if (xn || yn)
    return xn && !yn ? largest : (!xn && yn && !largest);
  return largest ? y < x : x < y;
}

/// The position of the line's largest (smallest) element, compared as `K`:
/// NaN counts as the extreme either way (numpy's argmax and argmin), of
/// equal elements the first wins (the last with `last`).
template <typename K, typename T>
PPCRT_HD inline int64_t argMax(const T *in, int64_t n, int64_t inner, bool largest, bool last) {
  int64_t best = 0;
  K b = K(in[0]);
  for (int64_t i = 1; i < n; ++i) {
    K x = K(in[i * inner]);
    bool xn = x != x, bn = b != b, better;
    if (xn || bn)
      better = xn && (!bn || last);
    else
      better = largest ? (b < x || (last && x == b)) : (x < b || (last && x == b));
    if (better) {
      best = i;
      b = x;
    }
  }
  return best;
}

/// The positions of the k first elements of the line in top-k order,
/// compared as `K` (the element type; float for bf16): k selection passes,
/// each taking the best element after the previous pick, so for small k such
/// as a router's.
template <typename K, typename T>
PPCRT_HD inline void topKIndices(const T *in, int64_t *out, int64_t n, int64_t inner, int64_t k,
                                 bool largest) {
  for (int64_t r = 0; r < k; ++r) {
    int64_t best = -1, previous = r ? out[(r - 1) * inner] : -1;
    for (int64_t i = 0; i < n; ++i) {
      K x = K(in[i * inner]);
      if (previous >= 0) {
        K p = K(in[previous * inner]);
        if (!(topKBefore(p, x, largest) || (!topKBefore(x, p, largest) && previous < i)))
          continue;
      }
      if (best < 0 || topKBefore(x, K(in[best * inner]), largest))
        best = i;
    }
    out[r * inner] = best;
  }
}

/// Where an attention operand's rows lie: row r of head n (n < batch) of a
/// [batch, rows, size] operand starts at head(n) + r * rowStride, its
/// elements one apart. The heads are `inner` per outer index, which lets an
/// operand be a strided view of another tensor: q of [B, T, 3, H, dh] (a
/// fused QKV projection, never split into heads) has inner H, outerStride
/// T * 3 * H * dh, innerStride dh and rowStride 3 * H * dh. All zeros (the
/// default) is dense row-major ([batch, rows, size]: AttentionShape::resolved).
struct AttentionRows {
  int64_t inner = 0, outerStride = 0, innerStride = 0, rowStride = 0;

  PPCRT_HD int64_t head(int64_t n) const {
    return (n / inner) * outerStride + (n % inner) * innerStride;
  }
  PPCRT_HD int64_t at(int64_t n, int64_t r) const { return head(n) + r * rowStride; }
  /// These rows, or dense [*, rows, size] ones where they are the default.
  PPCRT_HD AttentionRows orDense(int64_t rows, int64_t size) const {
    return inner ? *this : AttentionRows{1, rows * size, 0, size};
  }
};

/// The sizes of scaled dot-product attention (ppc.attention) over `batch`
/// independent heads: q [batch, queries, headDim], k [batch, keys, headDim],
/// v [batch, keys, valueDim], the output [batch, queries, valueDim] and the
/// log-sum-exp of each query's scores [batch, queries] (dense). Where each
/// operand's rows lie is its AttentionRows (q, k, v and o; the gradient's
/// dO, dq, dk and dv), dense by default. The score of query i
/// and key j is scale * dot(q_i, k_j) + bias(n, i, j); with `causal`, keys
/// j > i are left out (as if their score were -inf). The optional bias is
/// read at biasAt(n, i, j), which covers a bias broadcast along the batch
/// (batch = outer * inner, e.g. [B, 1, T, S] over heads B*H), the queries or
/// the keys (stride 0).
struct AttentionShape {
  int64_t batch, queries, keys, headDim, valueDim;
  double scale;
  bool causal;
  int64_t biasInner, biasOuterStride, biasInnerStride, biasRowStride, biasColStride;
  AttentionRows q{}, k{}, v{}, o{}, dO{}, dq{}, dk{}, dv{};

  /// This shape with every default AttentionRows made dense.
  PPCRT_HD AttentionShape resolved() const {
    AttentionShape s = *this;
    s.q = q.orDense(queries, headDim);
    s.k = k.orDense(keys, headDim);
    s.v = v.orDense(keys, valueDim);
    s.o = o.orDense(queries, valueDim);
    s.dO = dO.orDense(queries, valueDim);
    s.dq = dq.orDense(queries, headDim);
    s.dk = dk.orDense(keys, headDim);
    s.dv = dv.orDense(keys, valueDim);
    return s;
  }

  PPCRT_HD int64_t biasAt(int64_t n, int64_t i, int64_t j) const {
    return (n / biasInner) * biasOuterStride + (n % biasInner) * biasInnerStride +
           i * biasRowStride + j * biasColStride;
  }
  /// The number of keys query i sees (all of them without `causal`).
  PPCRT_HD int64_t visibleKeys(int64_t i) const {
    return causal ? (i + 1 < keys ? i + 1 : keys) : keys;
  }
};

/// The sizes of rotary embedding (ppc.rotary) over [batch, rows, size],
/// size even, and where each operand's rows lie: the input x, the tables
/// cos and sin (broadcast along the batch or the rows where a stride is 0)
/// and the result y, each given (no dense default).
struct RotaryShape {
  int64_t batch, rows, size;
  bool transposed;
  AttentionRows x, cos, sin, y;
};

} // namespace ppcrt::lines

#endif // PPC_RUNTIME_PPCRT_LINES_H
