//===- Normalization.cpp - softmax, layer_norm, rms_norm and gradients -----===//
//
// All of them normalize float tensors along some dimensions, computed in
// double and rounded once per element.
//
//===----------------------------------------------------------------------===//

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

using namespace mlir;

namespace ppc {

/// softmax or log_softmax along the op's axis, in the max-subtracted form,
/// over the (outer, axis, inner) decomposition of the input.
template <typename OpT>
static LogicalResult softmaxKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                   llvm::SmallVectorImpl<Tensor> &results,
                                   const ExecOptions &options) {
  constexpr bool isLog = std::is_same_v<OpT, LogSoftmaxOp>;
  const Tensor &input = operands[0];
  llvm::ArrayRef<int64_t> shape = input.shape();
  int64_t axis = llvm::cast<OpT>(op).getAxis();
  int64_t outer = numElements(shape.take_front(axis)), size = shape[axis],
          inner = numElements(shape.drop_front(axis + 1));
  Tensor result(resultDType(op, 0, options), shape);
  llvm::ArrayRef<double> x = input.floats();
  std::vector<double> shifted(size), exps(size);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      int64_t base = o * size * inner + j;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < size; ++k)
        max = std::max(max, x[base + k * inner]);
      double sum = 0;
      for (int64_t k = 0; k < size; ++k) {
        shifted[k] = x[base + k * inner] - max;
        exps[k] = std::exp(shifted[k]);
        sum += exps[k];
      }
      for (int64_t k = 0; k < size; ++k)
        result.setDouble(base + k * inner, isLog ? shifted[k] - std::log(sum) : exps[k] / sum);
    }
  }
  results.push_back(std::move(result));
  return success();
}

/// log_sum_exp along the op's axis, in the max-subtracted form (as the
/// softmaxes compute it); the axis kept with size 1. An axis whose maximum
/// is infinite (all -inf, or a +inf) gives that maximum.
static LogicalResult logSumExpKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                     llvm::SmallVectorImpl<Tensor> &results,
                                     const ExecOptions &options) {
  const Tensor &input = operands[0];
  llvm::ArrayRef<int64_t> shape = input.shape();
  int64_t axis = llvm::cast<LogSumExpOp>(op).getAxis();
  int64_t outer = numElements(shape.take_front(axis)), size = shape[axis],
          inner = numElements(shape.drop_front(axis + 1));
  Shape resultShape(shape);
  resultShape[axis] = 1;
  Tensor result(resultDType(op, 0, options), resultShape);
  llvm::ArrayRef<double> x = input.floats();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      int64_t base = o * size * inner + j;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < size; ++k)
        max = std::max(max, x[base + k * inner]);
      double sum = 0;
      for (int64_t k = 0; k < size; ++k)
        sum += std::exp(x[base + k * inner] - max);
      result.setDouble(o * inner + j, std::isinf(max) ? max : max + std::log(sum));
    }
  }
  results.push_back(std::move(result));
  return success();
}

/// For each element of the normalized shape, the flat index of the scale or
/// bias element broadcast to it.
static std::vector<int64_t> paramIndices(const Tensor &param, llvm::ArrayRef<int64_t> normalized) {
  Shape strides = stridesOf(normalized), paramStrides = stridesOf(param.shape());
  std::vector<int64_t> indices(numElements(normalized));
  for (int64_t i = 0, e = indices.size(); i < e; ++i)
    indices[i] = broadcastIndex(i, normalized, strides, param.shape(), paramStrides);
  return indices;
}

/// The mean and the biased variance of a row (layer_norm and its
/// gradient); uncentered (rms_norm's), 0 and the mean square.
static std::pair<double, double> rowMoments(const double *x, int64_t size, bool centered) {
  double mean = 0;
  if (centered) {
    for (int64_t i = 0; i < size; ++i)
      mean += x[i];
    mean /= size;
  }
  double variance = 0;
  for (int64_t i = 0; i < size; ++i)
    variance += (x[i] - mean) * (x[i] - mean);
  return {mean, variance / size};
}

/// The rows a norm (or its gradient) normalizes: `outer` rows of `size`
/// elements (dimensions [axis, rank)), and the scale's element for each.
struct NormalizedRows {
  NormalizedRows(llvm::ArrayRef<int64_t> shape, int64_t axis, const Tensor &scale)
      : normalized(shape.drop_front(axis)), outer(numElements(shape.take_front(axis))),
        size(numElements(normalized)), scaleIndex(paramIndices(scale, normalized)) {}
  llvm::ArrayRef<int64_t> normalized;
  int64_t outer, size;
  std::vector<int64_t> scaleIndex;
};

/// layer_norm and rms_norm (which has no mean and no bias).
template <typename Op>
static LogicalResult normalizationKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                         llvm::SmallVectorImpl<Tensor> &results,
                                         const ExecOptions &options) {
  constexpr bool centered = std::is_same_v<Op, LayerNormOp>;
  auto norm = llvm::cast<Op>(op);
  const Tensor &input = operands[0], &scale = operands[1];
  const Tensor *bias = operands.size() > 2 ? &operands[2] : nullptr;
  double epsilon = norm.getEpsilon().convertToDouble();
  llvm::ArrayRef<int64_t> shape = input.shape();
  NormalizedRows rows(shape, norm.getAxis(), scale);
  const int64_t outer = rows.outer, size = rows.size;
  const std::vector<int64_t> &scaleIndex = rows.scaleIndex;
  std::vector<int64_t> biasIndex;
  if (bias)
    biasIndex = paramIndices(*bias, rows.normalized);

  Tensor result(resultDType(op, 0, options), shape);
  for (int64_t o = 0; o < outer; ++o) {
    const double *x = input.floats().data() + o * size;
    auto [mean, variance] = rowMoments(x, size, centered);
    double stddev = std::sqrt(variance + epsilon);
    for (int64_t i = 0; i < size; ++i) {
      double y = (x[i] - mean) / stddev * scale.floats()[scaleIndex[i]];
      if (bias)
        y += bias->floats()[biasIndex[i]];
      result.setDouble(o * size + i, y);
    }
  }
  results.push_back(std::move(result));
  return success();
}

/// layer_norm_grad and rms_norm_grad: the statistics of each row as the
/// forward computes them, then dx = rstd * (dxhat - mean(dxhat) - xhat *
/// mean(dxhat * xhat)), without mean(dxhat) for rms_norm (whose xhat is
/// x * rstd and which returns rstd alone).
template <typename Op>
static LogicalResult normalizationGradKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                             llvm::SmallVectorImpl<Tensor> &results,
                                             const ExecOptions &options) {
  constexpr bool centered = std::is_same_v<Op, LayerNormGradOp>;
  auto grad = llvm::cast<Op>(op);
  const Tensor &input = operands[0], &scale = operands[1], &dy = operands[2];
  double epsilon = grad.getEpsilon().convertToDouble();
  llvm::ArrayRef<int64_t> shape = input.shape();
  int64_t axis = grad.getAxis();
  NormalizedRows rows(shape, axis, scale);
  const int64_t outer = rows.outer, size = rows.size;
  const std::vector<int64_t> &scaleIndex = rows.scaleIndex;
  Shape statsShape(shape);
  std::fill(statsShape.begin() + axis, statsShape.end(), 1);
  Tensor dx(resultDType(op, 0, options), shape);
  Tensor means(resultDType(op, 1, options), statsShape);
  Tensor rstds(resultDType(op, centered ? 2 : 1, options), statsShape);
  std::vector<double> xhat(size), dxhat(size);
  for (int64_t o = 0; o < outer; ++o) {
    const double *x = input.floats().data() + o * size, *g = dy.floats().data() + o * size;
    auto [mean, variance] = rowMoments(x, size, centered);
    double rstd = 1 / std::sqrt(variance + epsilon);
    double meanDxhat = 0, meanProjection = 0;
    for (int64_t i = 0; i < size; ++i) {
      xhat[i] = (x[i] - mean) * rstd;
      dxhat[i] = g[i] * scale.floats()[scaleIndex[i]];
      meanDxhat += dxhat[i];
      meanProjection += dxhat[i] * xhat[i];
    }
    meanDxhat = centered ? meanDxhat / size : 0;
    meanProjection /= size;
    for (int64_t i = 0; i < size; ++i)
      dx.setDouble(o * size + i, rstd * (dxhat[i] - meanDxhat - xhat[i] * meanProjection));
    means.setDouble(o, mean);
    rstds.setDouble(o, rstd);
  }
  results.push_back(std::move(dx));
  if (centered)
    results.push_back(std::move(means));
  results.push_back(std::move(rstds));
  return success();
}

void registerNormalizationKernels(KernelRegistry &registry) {
  registry.add<SoftmaxOp>(softmaxKernel<SoftmaxOp>);
  registry.add<LogSoftmaxOp>(softmaxKernel<LogSoftmaxOp>);
  registry.add<LogSumExpOp>(logSumExpKernel);
  registry.add<LayerNormOp>(normalizationKernel<LayerNormOp>);
  registry.add<LayerNormGradOp>(normalizationGradKernel<LayerNormGradOp>);
  registry.add<RmsNormOp>(normalizationKernel<RmsNormOp>);
  registry.add<RmsNormGradOp>(normalizationGradKernel<RmsNormGradOp>);
}

} // namespace ppc
