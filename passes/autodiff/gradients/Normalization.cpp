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
///   dxhat  = g * scale
///   dx     = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
///   dscale = sum of g * xhat, dbias = sum of g, over the dimensions scale
///            and bias were broadcast along.
/// The statistics are recomputed from x rather than kept from the forward
/// kernel, which computes them internally.
static LogicalResult layerNormGradient(const GradientRequest &request,
                                       llvm::SmallVectorImpl<Value> &operandGrads) {
  auto layerNorm = llvm::cast<LayerNormOp>(request.op);
  OpBuilder &b = request.builder;
  Location loc = layerNorm.getLoc();
  Value x = layerNorm.getInput(), scale = layerNorm.getScale(), bias = layerNorm.getBias(),
        g = request.resultGrads[0];
  auto inputType = llvm::cast<RankedTensorType>(x.getType());
  auto axes = llvm::to_vector(llvm::seq<int64_t>(layerNorm.getAxis(), inputType.getRank()));
  auto mean = [&](Value v) {
    return b.create<ReduceMeanOp>(loc, v, axes, /*keepdims=*/true).getResult();
  };

  Value centered = b.create<SubOp>(loc, x, mean(x));
  Value variance = mean(b.create<MulOp>(loc, centered, centered));
  Value epsilon =
      scalarConstant(b, loc, inputType.getElementType(), layerNorm.getEpsilon().convertToDouble());
  Value rstd =
      b.create<ReciprocalOp>(loc, b.create<SqrtOp>(loc, b.create<AddOp>(loc, variance, epsilon)));
  Value xhat = b.create<MulOp>(loc, centered, rstd);

  Value inputGrad, scaleGrad, biasGrad;
  if (request.wanted[0]) {
    Value dxhat = b.create<MulOp>(loc, g, scale);
    Value projection = b.create<MulOp>(loc, xhat, mean(b.create<MulOp>(loc, dxhat, xhat)));
    Value centeredGrad = b.create<SubOp>(loc, b.create<SubOp>(loc, dxhat, mean(dxhat)), projection);
    inputGrad = b.create<MulOp>(loc, centeredGrad, rstd);
  }
  if (request.wanted[1])
    scaleGrad = unbroadcast(b, loc, b.create<MulOp>(loc, g, xhat),
                            llvm::cast<RankedTensorType>(scale.getType()));
  if (bias && request.wanted[2])
    biasGrad = unbroadcast(b, loc, g, llvm::cast<RankedTensorType>(bias.getType()));
  operandGrads.push_back(inputGrad);
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
  registry.addComputedInF32<LayerNormOp>();
}

} // namespace ppc
