//===- Contraction.cpp - matmul, einsum and attention kernels -------------===//
//
// Products are accumulated in double for floats and in wrapping 64-bit
// arithmetic for integers; the result is rounded to its dtype once at the end.
//
//===----------------------------------------------------------------------===//

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

using namespace mlir;

namespace ppc {

/// The elements of a tensor computing in `T` (double or int64_t).
template <typename T> static llvm::ArrayRef<T> elements(const Tensor &tensor) {
  if constexpr (std::is_same_v<T, double>)
    return tensor.floats();
  else
    return tensor.ints();
}

template <typename T> static llvm::MutableArrayRef<T> elements(Tensor &tensor) {
  if constexpr (std::is_same_v<T, double>)
    return tensor.floats();
  else
    return tensor.ints();
}

// Integer products and sums wrap around in 64 bits instead of overflowing
// into undefined behaviour; rounding to the dtype then wraps them correctly.

static double multiply(double x, double y) { return x * y; }

static int64_t multiply(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
}

static double add(double x, double y) { return x + y; }

static int64_t add(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

/// Batched matmul: the batch broadcast is resolved once per batch, then an
/// i-k-j loop runs over contiguous rows of the right operand and the result.
template <typename T> static void matmul(const Tensor &lhs, const Tensor &rhs, Tensor &result) {
  llvm::ArrayRef<int64_t> shape = result.shape();
  int64_t rank = shape.size();
  int64_t m = shape[rank - 2], n = shape[rank - 1], k = lhs.shape().back();
  llvm::ArrayRef<int64_t> batchShape = shape.drop_back(2), lhsBatch = lhs.shape().drop_back(2),
                          rhsBatch = rhs.shape().drop_back(2);
  Shape batchStrides = stridesOf(batchShape), lhsStrides = stridesOf(lhsBatch),
        rhsStrides = stridesOf(rhsBatch);
  llvm::ArrayRef<T> a = elements<T>(lhs), b = elements<T>(rhs);
  llvm::MutableArrayRef<T> c = elements<T>(result);
  for (int64_t batch = 0, e = numElements(batchShape); batch < e; ++batch) {
    const T *aBatch =
        a.data() + broadcastIndex(batch, batchShape, batchStrides, lhsBatch, lhsStrides) * m * k;
    const T *bBatch =
        b.data() + broadcastIndex(batch, batchShape, batchStrides, rhsBatch, rhsStrides) * k * n;
    T *cBatch = c.data() + batch * m * n;
    for (int64_t i = 0; i < m; ++i) {
      T *cRow = cBatch + i * n;
      for (int64_t p = 0; p < k; ++p) {
        T x = aBatch[i * k + p];
        const T *bRow = bBatch + p * n;
        for (int64_t j = 0; j < n; ++j)
          cRow[j] = add(cRow[j], multiply(x, bRow[j]));
      }
    }
  }
  result.roundToDType();
}

static LogicalResult matmulKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results,
                                  const ExecOptions &options) {
  Tensor result(resultDType(op, 0, options), llvm::cast<MatMulOp>(op).getType().getShape());
  if (result.isFloat())
    matmul<double>(operands[0], operands[1], result);
  else
    matmul<int64_t>(operands[0], operands[1], result);
  results.push_back(std::move(result));
  return success();
}

//===----------------------------------------------------------------------===//
// EinsumOp
//===----------------------------------------------------------------------===//

/// Walks every combination of label values with an odometer (output labels
/// outermost, summed labels innermost) and adds the product of the operands'
/// elements to the result element. Each operand's flat index moves by the
/// sum of the strides of the dimensions carrying the label that steps, so a
/// label repeated within a term walks that term's diagonal.
template <typename T>
static void einsum(const EinsumSpec &spec, llvm::ArrayRef<Tensor> operands, Tensor &result) {
  std::string labels = spec.output;
  for (const std::string &term : spec.inputs)
    for (char c : term)
      if (!llvm::is_contained(labels, c))
        labels.push_back(c);
  int64_t numLabels = labels.size(), numOperands = operands.size();
  Shape sizes(numLabels, 0);
  // strides[t][l]: the step of operand t's flat index when label l steps;
  // entry numOperands is the result.
  std::vector<Shape> strides(numOperands + 1, Shape(numLabels, 0));
  auto addTerm = [&](llvm::StringRef term, llvm::ArrayRef<int64_t> shape, Shape &termStrides) {
    Shape dimStrides = stridesOf(shape);
    for (auto [d, c] : llvm::enumerate(term)) {
      size_t l = labels.find(c);
      sizes[l] = shape[d];
      termStrides[l] += dimStrides[d];
    }
  };
  for (int64_t t = 0; t < numOperands; ++t)
    addTerm(spec.inputs[t], operands[t].shape(), strides[t]);
  addTerm(spec.output, result.shape(), strides[numOperands]);

  llvm::SmallVector<llvm::ArrayRef<T>> inputs;
  for (const Tensor &operand : operands)
    inputs.push_back(elements<T>(operand));
  llvm::MutableArrayRef<T> out = elements<T>(result);
  Shape coords(numLabels, 0), offsets(numOperands + 1, 0);
  for (int64_t step = 0, e = numElements(sizes); step < e; ++step) {
    T product = 1;
    for (int64_t t = 0; t < numOperands; ++t)
      product = multiply(product, inputs[t][offsets[t]]);
    T &target = out[offsets[numOperands]];
    target = add(target, product);
    for (int64_t l = numLabels - 1; l >= 0; --l) {
      for (int64_t t = 0; t <= numOperands; ++t)
        offsets[t] += strides[t][l];
      if (++coords[l] < sizes[l])
        break;
      for (int64_t t = 0; t <= numOperands; ++t)
        offsets[t] -= strides[t][l] * sizes[l];
      coords[l] = 0;
    }
  }
  result.roundToDType();
}

static LogicalResult einsumKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results,
                                  const ExecOptions &options) {
  auto einsumOp = llvm::cast<EinsumOp>(op);
  auto spec = parseEinsum(einsumOp.getEquation(),
                          [&](const llvm::Twine &msg) { (void)op->emitError(msg); });
  if (failed(spec))
    return failure();
  Tensor result(resultDType(op, 0, options), einsumOp.getType().getShape());
  if (result.isFloat())
    einsum<double>(*spec, operands, result);
  else
    einsum<int64_t>(*spec, operands, result);
  results.push_back(std::move(result));
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The scores of one (batch, query) row of an attention, in double: scale *
/// q_i . k_j + bias (hidden keys -inf), and their log-sum-exp.
struct AttentionRows {
  int64_t batch, queries, keys, headDim, valueDim;
  double scale;
  bool causal;
  const Tensor &q, &k;
  const Tensor *bias;
  Shape scoreShape, scoreStrides, biasStrides;

  template <typename OpT>
  AttentionRows(OpT op, llvm::ArrayRef<Tensor> operands, const Tensor *bias)
      : scale(op.getScale().convertToDouble()), causal(op.getCausal()), q(operands[0]),
        k(operands[1]), bias(bias) {
    llvm::ArrayRef<int64_t> qShape = q.shape();
    int64_t rank = qShape.size();
    batch = numElements(qShape.drop_back(2));
    queries = qShape[rank - 2];
    headDim = qShape[rank - 1];
    keys = k.shape()[rank - 2];
    valueDim = operands[2].shape()[rank - 1];
    scoreShape.assign(qShape.begin(), qShape.end() - 1);
    scoreShape.push_back(keys);
    scoreStrides = stridesOf(scoreShape);
    if (bias)
      biasStrides = stridesOf(bias->shape());
  }

  /// Fills `scores` (keys of them) for query i of batch n; returns the
  /// log-sum-exp, and their max in `rowMax` where given.
  double row(int64_t n, int64_t i, std::vector<double> &scores, double *rowMax = nullptr) const {
    const double *qi = q.floats().data() + (n * queries + i) * headDim;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < keys; ++j) {
      if (causal && j > i) {
        scores[j] = -std::numeric_limits<double>::infinity();
        continue;
      }
      const double *kj = k.floats().data() + (n * keys + j) * headDim;
      double dot = 0;
      for (int64_t d = 0; d < headDim; ++d)
        dot += qi[d] * kj[d];
      double s = scale * dot;
      if (bias)
        s += bias->floats()[broadcastIndex((n * queries + i) * keys + j, scoreShape, scoreStrides,
                                           bias->shape(), biasStrides)];
      scores[j] = s;
      max = std::max(max, s);
    }
    double sum = 0;
    for (int64_t j = 0; j < keys; ++j)
      sum += std::exp(scores[j] - max);
    if (rowMax)
      *rowMax = max;
    return max + std::log(sum);
  }
};

/// Scaled dot-product attention, in double: o_i = sum_j P_ij v_j with P =
/// softmax(S), and lse_i = log sum_j exp(S_ij). With operands narrower than
/// f32 (bf16, f16), P enters its product rounded to the operands' dtype, as
/// FlashAttention's forward rounds it, but relative to the row's max
/// rounded up to a multiple of ln 2 (M = K ln 2), so that the rounding does
/// not depend on where a kernel's tiles fall (scaling by a power of two
/// commutes with it): o_i = sum_j round(p_ij) v_j / sum_j p_ij, p_ij =
/// exp(S_ij - M_i); M_i is the max itself where that is 2^20 or more in
/// magnitude (masked rows). The runtime's kernels round alike
/// (docs/architecture.md, "Mixed precision").
static LogicalResult attentionKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                     llvm::SmallVectorImpl<Tensor> &results,
                                     const ExecOptions &options) {
  auto attention = llvm::cast<AttentionOp>(op);
  AttentionRows rows(attention, operands, attention.getBias() ? &operands[3] : nullptr);
  const Tensor &v = operands[2];
  Tensor output(resultDType(op, 0, options), attention.getOutput().getType().getShape());
  Tensor lse(resultDType(op, 1, options), attention.getLse().getType().getShape());
  const DType narrow = rows.q.dtype();
  const bool rounds = dtypeBytes(narrow) < dtypeBytes(DType::F32);
  std::vector<double> scores(rows.keys), sum(rows.valueDim);
  for (int64_t n = 0; n < rows.batch; ++n)
    for (int64_t i = 0; i < rows.queries; ++i) {
      double max;
      double logSum = rows.row(n, i, scores, &max);
      // o = sum_j p_j v_j / sum_j p_j, p_j = exp(S_j - M) with M the max
      // or (rounding) the max rounded up to a multiple of ln 2, which a max
      // of magnitude 2^20 or more (a mask's lowest value on every key) is
      // not, as the kernels take it (Kernels.cuh, RoundedShift). Dividing
      // by the sum rather than subtracting lse keeps such a row evenly
      // spread, where lse = M + log(sum) rounds to M.
      double shift =
          rounds && std::fabs(max) < 0x1p20 ? std::ceil(max / std::log(2.0)) * std::log(2.0) : max;
      double total = 0;
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t j = 0; j < rows.keys; ++j) {
        double p = std::exp(scores[j] - shift);
        total += p;
        if (rounds)
          p = roundFloat(narrow, p);
        const double *vj = v.floats().data() + (n * rows.keys + j) * rows.valueDim;
        for (int64_t d = 0; d < rows.valueDim; ++d)
          sum[d] += p * vj[d];
      }
      int64_t at = n * rows.queries + i;
      for (int64_t d = 0; d < rows.valueDim; ++d)
        output.setDouble(at * rows.valueDim + d, sum[d] / total);
      lse.setDouble(at, logSum);
    }
  results.push_back(std::move(output));
  results.push_back(std::move(lse));
  return success();
}

/// FlashAttention's backward, in double: P = exp(s - lse) from the saved
/// lse, D_i = dO_i . o_i, dS = P (dO v^T - D), dq = scale dS k, dk = scale
/// dS^T q, dv = P^T dO. With operands narrower than f32 (bf16, f16), P and
/// dS are rounded to the operands' dtype before their products, as
/// FlashAttention's kernels round them (docs/architecture.md, "Mixed
/// precision"); the runtime's kernels round alike.
static LogicalResult attentionGradKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                         llvm::SmallVectorImpl<Tensor> &results,
                                         const ExecOptions &options) {
  auto grad = llvm::cast<AttentionGradOp>(op);
  AttentionRows rows(grad, operands, grad.getBias() ? &operands[6] : nullptr);
  const Tensor &q = operands[0], &k = operands[1], &v = operands[2], &o = operands[3],
               &lse = operands[4], &dO = operands[5];
  int64_t hd = rows.headDim, vd = rows.valueDim;
  std::vector<double> dq(q.numElements()), dk(k.numElements()), dv(v.numElements());
  std::vector<double> scores(rows.keys);
  const DType narrow = q.dtype();
  const bool rounds = dtypeBytes(narrow) < dtypeBytes(DType::F32);
  auto asOperand = [&](double x) { return rounds ? roundFloat(narrow, x) : x; };
  for (int64_t n = 0; n < rows.batch; ++n)
    for (int64_t i = 0; i < rows.queries; ++i) {
      int64_t at = n * rows.queries + i;
      (void)rows.row(n, i, scores);
      double logSum = lse.floats()[at];
      const double *doi = dO.floats().data() + at * vd, *oi = o.floats().data() + at * vd,
                   *qi = q.floats().data() + at * hd;
      double delta = 0;
      for (int64_t d = 0; d < vd; ++d)
        delta += doi[d] * oi[d];
      for (int64_t j = 0; j < rows.keys; ++j) {
        double p = std::exp(scores[j] - logSum);
        if (p == 0)
          continue;
        int64_t key = n * rows.keys + j;
        const double *vj = v.floats().data() + key * vd, *kj = k.floats().data() + key * hd;
        double dp = 0, rounded = asOperand(p);
        for (int64_t d = 0; d < vd; ++d) {
          dp += doi[d] * vj[d];
          dv[key * vd + d] += rounded * doi[d];
        }
        double ds = asOperand(p * (dp - delta)) * rows.scale;
        for (int64_t d = 0; d < hd; ++d) {
          dq[at * hd + d] += ds * kj[d];
          dk[key * hd + d] += ds * qi[d];
        }
      }
    }
  auto store = [&](unsigned index, llvm::ArrayRef<double> values) {
    Tensor result(resultDType(op, index, options),
                  llvm::cast<RankedTensorType>(op->getResult(index).getType()).getShape());
    for (auto [i, x] : llvm::enumerate(values))
      result.setDouble(i, x);
    results.push_back(std::move(result));
  };
  store(0, dq);
  store(1, dk);
  store(2, dv);
  return success();
}

void registerContractionKernels(KernelRegistry &registry) {
  registry.add<MatMulOp>(matmulKernel);
  registry.add<EinsumOp>(einsumKernel);
  registry.add<AttentionOp>(attentionKernel);
  registry.add<AttentionGradOp>(attentionGradKernel);
}

} // namespace ppc
