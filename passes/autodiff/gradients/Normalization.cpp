//===- Normalization.cpp - gradients of softmax, layer_norm, rms_norm ------===//

#include "ir/PpcOps.h"
#include "passes/autodiff/Gradients.h"

using namespace mlir;

namespace ppc {

/// dx = y * (g - sum(g * y)), the sum along the softmax axis.
static LogicalResult softmaxGradient(const GradientRequest &request,
                                     llvm::SmallVectorImpl<Value> &operandGrads) {
  auto softmax = llvm::cast<SoftmaxOp>(request.op);
  if (!request.wanted[0]) {
    operandGrads.push_back(Value());
    return success();
  }
  OpBuilder &b = request.builder;
  Location loc = softmax.getLoc();
  Value y = softmax.getResult(), g = request.resultGrads[0];
  int64_t axis = softmax.getAxis();
  Value gy = b.create<MulOp>(loc, g, y);
  Value sum = b.create<ReduceSumOp>(loc, gy, llvm::ArrayRef(axis), /*keepdims=*/true);
  operandGrads.push_back(b.create<SubOp>(loc, gy, b.create<MulOp>(loc, y, sum)));
  return success();
}

/// dx = g - exp(y) * sum(g), the sum along the axis.
static LogicalResult logSoftmaxGradient(const GradientRequest &request,
                                        llvm::SmallVectorImpl<Value> &operandGrads) {
  auto logSoftmax = llvm::cast<LogSoftmaxOp>(request.op);
  if (!request.wanted[0]) {
    operandGrads.push_back(Value());
    return success();
  }
  OpBuilder &b = request.builder;
  Location loc = logSoftmax.getLoc();
  Value g = request.resultGrads[0];
  int64_t axis = logSoftmax.getAxis();
  Value sum = b.create<ReduceSumOp>(loc, g, llvm::ArrayRef(axis), /*keepdims=*/true);
  Value softmax = b.create<ExpOp>(loc, logSoftmax.getResult());
  operandGrads.push_back(b.create<SubOp>(loc, g, b.create<MulOp>(loc, softmax, sum)));
  return success();
}

/// dx = exp(x - y) * g: the softmax along the axis times the result's
/// adjoint, broadcast along it.
static LogicalResult logSumExpGradient(const GradientRequest &request,
                                       llvm::SmallVectorImpl<Value> &operandGrads) {
  auto logSumExp = llvm::cast<LogSumExpOp>(request.op);
  if (!request.wanted[0]) {
    operandGrads.push_back(Value());
    return success();
  }
  OpBuilder &b = request.builder;
  Location loc = logSumExp.getLoc();
  Value softmax =
      b.create<ExpOp>(loc, b.create<SubOp>(loc, logSumExp.getInput(), logSumExp.getResult()));
  operandGrads.push_back(b.create<MulOp>(loc, softmax, request.resultGrads[0]));
  return success();
}

/// With xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + epsilon) and
/// y = xhat * scale + bias, all statistics over the normalized dimensions:
///   dx     = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
///            dxhat = g * scale: one ppc.layer_norm_grad, which recomputes
///            the statistics (the forward keeps none) and returns them;
///   dscale = sum of g * xhat, dbias = sum of g, over the dimensions scale
///            and bias were broadcast along: elementwise reductions that
///            recompute xhat from those statistics.
/// rms_norm is the same without the mean (xhat = x * rstd, rstd = 1 /
/// sqrt(mean(x^2) + epsilon)) and without a bias: one ppc.rms_norm_grad.
/// For bf16 and f16 the kernel computes dx in f32 and the sums are taken in
/// f32, each gradient rounded once (as the fused backward kernels of
/// Megatron-LM and PyTorch compute it), without an f32 copy of x or g.
template <typename Op, typename GradOp>
static LogicalResult normalizationGradient(const GradientRequest &request,
                                           llvm::SmallVectorImpl<Value> &operandGrads) {
  constexpr bool centered = std::is_same_v<Op, LayerNormOp>;
  auto norm = llvm::cast<Op>(request.op);
  OpBuilder &b = request.builder;
  Location loc = norm.getLoc();
  Value x = norm.getInput(), scale = norm.getScale(), g = request.resultGrads[0];
  Value bias = norm->getNumOperands() > 2 ? norm->getOperand(2) : Value();
  auto grad = b.create<GradOp>(loc, x, scale, g, norm.getAxisAttr(), norm.getEpsilonAttr());
  Value rstd = grad->getResults().back();
  Type stats = getElementTypeOrSelf(rstd.getType());
  auto widened = [&](Value v) -> Value {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    return type.getElementType() == stats ? v
                                          : b.create<CastOp>(loc, type.clone(stats), v).getResult();
  };
  auto sumTo = [&](Value v, Value like) -> Value {
    auto type = llvm::cast<RankedTensorType>(like.getType());
    Value sum = unbroadcast(b, loc, v, type.clone(stats));
    return sum.getType() == type ? sum : b.create<CastOp>(loc, type, sum).getResult();
  };
  Value wideG = widened(g);
  Value scaleGrad, biasGrad;
  if (request.wanted[1]) {
    Value centeredX = widened(x);
    if (centered)
      centeredX = b.create<SubOp>(loc, centeredX, grad->getResult(1));
    Value xhat = b.create<MulOp>(loc, centeredX, rstd);
    scaleGrad = sumTo(b.create<MulOp>(loc, wideG, xhat), scale);
  }
  if (bias && request.wanted[2])
    biasGrad = sumTo(wideG, bias);
  // (A gradient op none of whose results is wanted is dead code.)
  operandGrads.push_back(request.wanted[0] ? grad->getResult(0) : Value());
  operandGrads.push_back(scaleGrad);
  if (bias)
    operandGrads.push_back(biasGrad);
  return success();
}

void registerNormalizationGradients(GradientRegistry &registry) {
  registry.add<SoftmaxOp>(softmaxGradient);
  registry.add<LogSoftmaxOp>(logSoftmaxGradient);
  registry.add<LogSumExpOp>(logSumExpGradient);
  registry.add<LayerNormOp>(normalizationGradient<LayerNormOp, LayerNormGradOp>);
  registry.add<RmsNormOp>(normalizationGradient<RmsNormOp, RmsNormGradOp>);
  registry.addComputedInF32<SoftmaxOp>();
  registry.addComputedInF32<LogSoftmaxOp>();
  registry.addComputedInF32<LogSumExpOp>();
}

} // namespace ppc
