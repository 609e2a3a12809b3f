//===- Normalization.cpp - gradients of softmax, log_softmax, layer_norm --===//

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

/// With xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + epsilon) and
/// y = xhat * scale + bias, all statistics over the normalized dimensions:
///   dx     = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
///            dxhat = g * scale: one ppc.layer_norm_grad, which recomputes
///            the statistics (the forward keeps none) and returns them;
///   dscale = sum of g * xhat, dbias = sum of g, over the dimensions scale
///            and bias were broadcast along: elementwise reductions that
///            recompute xhat from those statistics.
/// For bf16 and f16 the kernel computes dx in f32 and the sums are taken in
/// f32, each gradient rounded once (as the fused backward kernels of
/// Megatron-LM and PyTorch compute it), without an f32 copy of x or g.
static LogicalResult layerNormGradient(const GradientRequest &request,
                                       llvm::SmallVectorImpl<Value> &operandGrads) {
  auto layerNorm = llvm::cast<LayerNormOp>(request.op);
  OpBuilder &b = request.builder;
  Location loc = layerNorm.getLoc();
  Value x = layerNorm.getInput(), scale = layerNorm.getScale(), bias = layerNorm.getBias(),
        g = request.resultGrads[0];
  auto grad = b.create<LayerNormGradOp>(loc, x, scale, g, layerNorm.getAxisAttr(),
                                        layerNorm.getEpsilonAttr());
  Type stats = getElementTypeOrSelf(grad.getMean().getType());
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
    Value xhat =
        b.create<MulOp>(loc, b.create<SubOp>(loc, widened(x), grad.getMean()), grad.getRstd());
    scaleGrad = sumTo(b.create<MulOp>(loc, wideG, xhat), scale);
  }
  if (bias && request.wanted[2])
    biasGrad = sumTo(wideG, bias);
  // (A layer_norm_grad none of whose results is wanted is dead code.)
  operandGrads.push_back(request.wanted[0] ? grad.getInputGrad() : Value());
  operandGrads.push_back(scaleGrad);
  if (bias)
    operandGrads.push_back(biasGrad);
  return success();
}

void registerNormalizationGradients(GradientRegistry &registry) {
  registry.add<SoftmaxOp>(softmaxGradient);
  registry.add<LogSoftmaxOp>(logSoftmaxGradient);
  registry.add<LayerNormOp>(layerNormGradient);
  registry.addComputedInF32<SoftmaxOp>();
  registry.addComputedInF32<LogSoftmaxOp>();
}

} // namespace ppc
