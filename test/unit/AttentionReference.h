//===- AttentionReference.h - attention by direct loops in double -*- C++ -*-===//
//
// The reference both targets' attention kernels are checked against
// (CpuKernelsTest.cpp, cuda/EmulatedKernelsTest.cpp): the scores of every
// query and key, the softmax and the FlashAttention backward's formulas
// written out in double, and the cases the tests run (queries != keys,
// headDim != valueDim, causal with fewer and more queries than keys, biases
// broadcast over heads and queries with -inf padding). CpuKernelsTest checks
// the gradients' formulas once against finite differences.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_ATTENTIONREFERENCE_H
#define PPC_TEST_UNIT_ATTENTIONREFERENCE_H

#include "runtime/ppcrt/Lines.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ppc::test {

/// One attention problem. The bias, when there is one, is [2, 1, T, S]
/// (QueryBias: a bias per batch element, broadcast over the heads) or
/// [2, 1, 1, S] (Padding: 0 or -inf per key, broadcast over heads and
/// queries; key 0 is never masked, so every query sees a key. Lowest: 0 or
/// bf16's lowest finite value, the dtype's min that Hugging Face's masks add,
/// with every key of the second batch element masked: its rows' scores all
/// equal, which softmax spreads evenly), and batch = 2 * heads.
struct AttentionCase {
  enum Bias { None, QueryBias, Padding, Lowest };
  int64_t batch, queries, keys, headDim, valueDim;
  bool causal;
  Bias bias;

  std::string name() const {
    return std::to_string(batch) + "x" + std::to_string(queries) + "x" + std::to_string(keys) +
           " d" + std::to_string(headDim) + "/" + std::to_string(valueDim) +
           (causal ? " causal" : "") +
           (bias == QueryBias ? " bias [2,1,T,S]"
            : bias == Padding ? " bias [2,1,1,S]"
            : bias == Lowest  ? " lowest [2,1,1,S]"
                              : "");
  }

  ppcrt::lines::AttentionShape shape() const {
    ppcrt::lines::AttentionShape s{
        batch,  queries, keys, headDim, valueDim, 1 / std::sqrt(double(headDim)),
        causal, 1,       0,    0,       0,        0};
    if (bias != None) {
      s.biasInner = batch / 2;
      s.biasOuterStride = bias == QueryBias ? queries * keys : keys;
      s.biasRowStride = bias == QueryBias ? keys : 0;
      s.biasColStride = 1;
    }
    return s;
  }

  int64_t biasSize() const {
    return bias == None ? 0 : bias == QueryBias ? 2 * queries * keys : 2 * keys;
  }
};

/// The cases the kernel tests run: tiles of both kernels are cut off on
/// every side (37 queries, 53 keys), a causal query may see all keys or
/// fewer than its index.
inline std::vector<AttentionCase> attentionCases() {
  using C = AttentionCase;
  return {
      C{6, 37, 53, 24, 40, false, C::None},      C{3, 29, 29, 24, 40, true, C::None},
      C{2, 20, 45, 40, 24, true, C::None},       C{2, 40, 25, 16, 16, true, C::None},
      C{6, 37, 53, 24, 40, false, C::QueryBias}, C{6, 29, 29, 32, 8, true, C::QueryBias},
      C{6, 37, 53, 24, 40, false, C::Padding},   C{6, 20, 45, 24, 40, true, C::Padding},
      C{6, 37, 53, 24, 40, false, C::Lowest},    C{6, 20, 45, 24, 40, true, C::Lowest},
  };
}

/// Whether the gradient kernels are checked on case `c`: not where every key
/// of a row carries the lowest mask (Lowest's second batch element). lse =
/// M + log(N) rounds to M there, so attention_grad's P = exp(S - lse) is 1
/// for each of the N keys where softmax's is 1/N, in the reference as in
/// every kernel (docs/architecture.md, "Fused attention": a known limit).
inline bool gradientChecked(const AttentionCase &c) { return c.bias != AttentionCase::Lowest; }

/// The inputs of a case in double: q, k, v, the bias, and the output's
/// gradient dO (the weights of the loss sum(o * dO)).
struct AttentionInputs {
  std::vector<double> q, k, v, bias, dO;
};

inline std::vector<double> uniformValues(size_t count, std::mt19937 &generator, double low,
                                         double high) {
  std::uniform_real_distribution<double> value(low, high);
  std::vector<double> values(count);
  for (double &v : values)
    v = value(generator);
  return values;
}

inline AttentionInputs attentionInputs(const AttentionCase &c, unsigned seed) {
  std::mt19937 generator(seed);
  AttentionInputs in;
  in.q = uniformValues(c.batch * c.queries * c.headDim, generator, -2, 2);
  in.k = uniformValues(c.batch * c.keys * c.headDim, generator, -2, 2);
  in.v = uniformValues(c.batch * c.keys * c.valueDim, generator, -1, 1);
  in.dO = uniformValues(c.batch * c.queries * c.valueDim, generator, -1, 1);
  if (c.bias == AttentionCase::QueryBias)
    in.bias = uniformValues(c.biasSize(), generator, -1, 1);
  if (c.bias == AttentionCase::Padding) {
    in.bias.assign(c.biasSize(), 0.0);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t j = 1; j < c.keys; ++j)
        if ((j * 7 + b * 3) % 5 == 2)
          in.bias[b * c.keys + j] = -INFINITY;
  }
  if (c.bias == AttentionCase::Lowest) {
    in.bias.assign(c.biasSize(), 0.0);
    for (int64_t j = 0; j < c.keys; ++j) {
      in.bias[j] = (j * 7) % 5 == 2 ? -0x1.fep127 : 0.0; // bf16's lowest
      in.bias[c.keys + j] = -0x1.fep127;
    }
  }
  return in;
}

/// The score of query i and key j of head n, -inf where it is left out.
inline double referenceScore(const ppcrt::lines::AttentionShape &s, const AttentionInputs &in,
                             int64_t n, int64_t i, int64_t j) {
  if (s.causal && j > i)
    return -INFINITY;
  double dot = 0;
  for (int64_t d = 0; d < s.headDim; ++d)
    dot += in.q[(n * s.queries + i) * s.headDim + d] * in.k[(n * s.keys + j) * s.headDim + d];
  int64_t at = (n / s.biasInner) * s.biasOuterStride + (n % s.biasInner) * s.biasInnerStride +
               i * s.biasRowStride + j * s.biasColStride;
  return s.scale * dot + (in.bias.empty() ? 0.0 : in.bias[at]);
}

/// o [batch, queries, valueDim] and lse [batch, queries]. Where `operand`
/// is given (bf16's rounding, for the kernels' bf16 precision), the
/// probabilities enter their product rounded, relative to the row's max
/// rounded up to a multiple of ln 2 (M = K ln 2; the max itself where it is
/// 2^20 or more in magnitude, as a row whose keys are all masked with the
/// lowest value has it): o_i = sum_j r_ij v_j /
/// sum_j exp(S_ij - M_i), r_ij = operand(exp(S_ij - M_i)), as the kernels
/// compute it (Kernels.cuh, RoundedShift; the executor alike); `slack`, where
/// given, receives per element of o what float may flip: for each r_ij whose
/// exp(S_ij - M_i) lies within float's error of a rounding boundary, the gap
/// between its two roundings times |v_j| / sum_j exp(S_ij - M_i). lse is
/// exact either way.
inline void referenceAttention(const ppcrt::lines::AttentionShape &s, const AttentionInputs &in,
                               std::vector<double> &o, std::vector<double> &lse,
                               double (*operand)(double) = nullptr,
                               std::vector<double> *slack = nullptr) {
  o.assign(s.batch * s.queries * s.valueDim, 0.0);
  lse.assign(s.batch * s.queries, 0.0);
  if (slack)
    slack->assign(o.size(), 0.0);
  const double eps = 0x1p-24; // float's unit roundoff
  std::vector<double> scores(s.keys), weights(s.keys), gaps(s.keys);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t i = 0; i < s.queries; ++i) {
      const int64_t row = n * s.queries + i;
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s.keys; ++j) {
        scores[j] = referenceScore(s, in, n, i, j);
        max = std::max(max, scores[j]);
      }
      for (int64_t j = 0; j < s.keys; ++j)
        sum += std::exp(scores[j] - max);
      double logSum = max + std::log(sum);
      lse[row] = logSum;
      // The weights: exp(S - M), rounded where `operand` is given, and
      // their sum before rounding (dividing by it rather than subtracting
      // lse keeps a row of the lowest scores evenly spread, where lse rounds
      // to M).
      const double shift =
          operand && std::fabs(max) < 0x1p20 ? std::ceil(max / std::log(2.0)) * std::log(2.0) : max;
      double total = 0;
      for (int64_t j = 0; j < s.keys; ++j) {
        const double p = std::exp(scores[j] - shift);
        weights[j] = operand ? operand(p) : p;
        total += p;
        gaps[j] = 0;
        if (operand && slack && scores[j] != -INFINITY) {
          // Float's error bounds (twice the first-order ones): the score's
          // dot product, scaling and bias; the shift and exp.
          double dotMagnitude = 0;
          for (int64_t d = 0; d < s.headDim; ++d)
            dotMagnitude +=
                std::fabs(in.q[row * s.headDim + d] * in.k[(n * s.keys + j) * s.headDim + d]);
          const double scoreError =
              (s.headDim + 2) * eps * (s.scale * dotMagnitude + std::fabs(scores[j])) +
              eps * (std::fabs(scores[j]) + std::fabs(shift));
          const double pError = 2 * p * (scoreError + 4 * eps);
          gaps[j] = std::fabs(operand(p + pError) - operand(p - pError));
        }
      }
      for (int64_t j = 0; j < s.keys; ++j)
        for (int64_t e = 0; e < s.valueDim; ++e)
          o[row * s.valueDim + e] += weights[j] / total * in.v[(n * s.keys + j) * s.valueDim + e];
      if (slack)
        for (int64_t j = 0; j < s.keys; ++j)
          for (int64_t e = 0; e < s.valueDim; ++e)
            (*slack)[row * s.valueDim + e] +=
                gaps[j] * std::fabs(in.v[(n * s.keys + j) * s.valueDim + e]) / total;
    }
}

/// What a kernel that computes P and dS in float and rounds them before
/// their products may differ from referenceAttentionGrad by, per element of
/// dq, dk and dv: where float's error could put P or dS on the other side
/// of a rounding boundary, the gap between its two roundings times the
/// other factor of the term (the rounding of every other term is the
/// reference's).
struct AttentionGradSlack {
  std::vector<double> dq, dk, dv;
};

/// dq, dk and dv from o and lse as given (the kernels' inputs): P = exp(S -
/// lse), D_i = dot(dO_i, o_i), dS = P (dO v^T - D), dq = scale dS k, dk =
/// scale dS^T q, dv = P^T dO. P and dS enter their products through
/// `operand` where given (bf16's rounding, for the kernels' bf16
/// precision), and then `slack`, where given, receives what float may flip.
inline void referenceAttentionGrad(const ppcrt::lines::AttentionShape &s, const AttentionInputs &in,
                                   const std::vector<double> &o, const std::vector<double> &lse,
                                   std::vector<double> &dq, std::vector<double> &dk,
                                   std::vector<double> &dv, double (*operand)(double) = nullptr,
                                   AttentionGradSlack *slack = nullptr) {
  dq.assign(in.q.size(), 0.0);
  dk.assign(in.k.size(), 0.0);
  dv.assign(in.v.size(), 0.0);
  if (slack) {
    slack->dq.assign(in.q.size(), 0.0);
    slack->dk.assign(in.k.size(), 0.0);
    slack->dv.assign(in.v.size(), 0.0);
  }
  const double eps = 0x1p-24; // float's unit roundoff
  // x rounded, and the gap between the roundings of x -/+ error (0 where
  // they agree).
  auto rounded = [&](double x, double error, double &gap) {
    gap = operand && slack ? std::fabs(operand(x + error) - operand(x - error)) : 0.0;
    return operand ? operand(x) : x;
  };
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t i = 0; i < s.queries; ++i) {
      const int64_t row = n * s.queries + i;
      double rowD = 0, rowDMagnitude = 0;
      for (int64_t e = 0; e < s.valueDim; ++e) {
        rowD += in.dO[row * s.valueDim + e] * o[row * s.valueDim + e];
        rowDMagnitude += std::fabs(in.dO[row * s.valueDim + e] * o[row * s.valueDim + e]);
      }
      for (int64_t j = 0; j < s.keys; ++j) {
        double score = referenceScore(s, in, n, i, j);
        if (score == -INFINITY)
          continue;
        const int64_t key = n * s.keys + j;
        double dotMagnitude = 0, dpMagnitude = 0, dp = 0;
        for (int64_t d = 0; d < s.headDim; ++d)
          dotMagnitude += std::fabs(in.q[row * s.headDim + d] * in.k[key * s.headDim + d]);
        for (int64_t e = 0; e < s.valueDim; ++e) {
          dp += in.dO[row * s.valueDim + e] * in.v[key * s.valueDim + e];
          dpMagnitude += std::fabs(in.dO[row * s.valueDim + e] * in.v[key * s.valueDim + e]);
        }
        // Float's error bounds (twice the first-order ones): the score's dot
        // product, scaling, bias and subtraction of lse; exp; dP and D.
        const double p = std::exp(score - lse[row]), ds = p * (dp - rowD);
        const double scoreError =
            (s.headDim + 2) * eps * (s.scale * dotMagnitude + std::fabs(score)) +
            eps * (std::fabs(score) + std::fabs(lse[row]));
        const double pError = 2 * p * (scoreError + 4 * eps);
        const double dsError =
            2 * (pError * std::fabs(dp - rowD) +
                 p * (s.valueDim + 1) * eps * (dpMagnitude + rowDMagnitude) + eps * std::fabs(ds));
        double pGap, dsGap;
        const double pOperand = rounded(p, pError, pGap), dsOperand = rounded(ds, dsError, dsGap);
        for (int64_t e = 0; e < s.valueDim; ++e) {
          dv[key * s.valueDim + e] += pOperand * in.dO[row * s.valueDim + e];
          if (slack)
            slack->dv[key * s.valueDim + e] += pGap * std::fabs(in.dO[row * s.valueDim + e]);
        }
        for (int64_t d = 0; d < s.headDim; ++d) {
          dq[row * s.headDim + d] += s.scale * dsOperand * in.k[key * s.headDim + d];
          dk[key * s.headDim + d] += s.scale * dsOperand * in.q[row * s.headDim + d];
          if (slack) {
            slack->dq[row * s.headDim + d] +=
                s.scale * dsGap * std::fabs(in.k[key * s.headDim + d]);
            slack->dk[key * s.headDim + d] +=
                s.scale * dsGap * std::fabs(in.q[row * s.headDim + d]);
          }
        }
      }
    }
}

/// Where a strided-layout test keeps a [batch, rows, size] operand of case
/// `c`, as a view of a larger tensor holds it (a fused QKV projection's
/// slice, heads not yet transposed; codegen's attention views): `inner`
/// heads side by side in each row, every row followed by `pad` unused
/// elements and every outer block by 2 * pad more, so that reading or
/// writing densely would touch them. `pad` differs per operand, so mixing
/// two operands' layouts up fails too.
inline ppcrt::lines::AttentionRows interleavedRows(const AttentionCase &c, int64_t rows,
                                                   int64_t size, int64_t pad) {
  int64_t inner = c.batch % 3 == 0 ? 3 : c.batch % 2 == 0 ? 2 : 1;
  int64_t rowStride = inner * size + pad;
  return {inner, rows * rowStride + 2 * pad, size, rowStride};
}

/// The elements a buffer of that layout spans.
inline int64_t spanOf(const ppcrt::lines::AttentionRows &rows, int64_t batch, int64_t count,
                      int64_t size) {
  return rows.at(batch - 1, count - 1) + size;
}

/// A dense [batch, rows, size] operand in a buffer of `layout`, NaN where
/// the layout has no element.
inline std::vector<double> scatterRows(const std::vector<double> &dense,
                                       const ppcrt::lines::AttentionRows &layout, int64_t batch,
                                       int64_t rows, int64_t size) {
  std::vector<double> strided(spanOf(layout, batch, rows, size), NAN);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t e = 0; e < size; ++e)
        strided[layout.at(n, r) + e] = dense[(n * rows + r) * size + e];
  return strided;
}

/// The dense operand of a buffer of `layout`; `untouched` tells whether
/// every element the layout does not cover is still NaN.
inline std::vector<double> gatherRows(const std::vector<double> &strided,
                                      const ppcrt::lines::AttentionRows &layout, int64_t batch,
                                      int64_t rows, int64_t size, bool &untouched) {
  std::vector<double> dense(batch * rows * size);
  std::vector<bool> covered(strided.size(), false);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t e = 0; e < size; ++e) {
        dense[(n * rows + r) * size + e] = strided[layout.at(n, r) + e];
        covered[layout.at(n, r) + e] = true;
      }
  untouched = true;
  for (size_t i = 0; i < strided.size(); ++i)
    untouched = untouched && (covered[i] || std::isnan(strided[i]));
  return dense;
}

/// The shape of case `c` with every operand in an interleavedRows layout.
inline ppcrt::lines::AttentionShape interleavedShape(const AttentionCase &c) {
  ppcrt::lines::AttentionShape s = c.shape();
  s.q = interleavedRows(c, c.queries, c.headDim, 1);
  s.k = interleavedRows(c, c.keys, c.headDim, 2);
  s.v = interleavedRows(c, c.keys, c.valueDim, 3);
  s.o = interleavedRows(c, c.queries, c.valueDim, 4);
  s.dO = interleavedRows(c, c.queries, c.valueDim, 5);
  s.dq = interleavedRows(c, c.queries, c.headDim, 6);
  s.dk = interleavedRows(c, c.keys, c.headDim, 7);
  s.dv = interleavedRows(c, c.keys, c.valueDim, 8);
  return s;
}

} // namespace ppc::test

#endif // PPC_TEST_UNIT_ATTENTIONREFERENCE_H
