//===- Optimizers.cpp - optimizer updates as ppc IR -----------------------===//

#include "passes/Optimizers.h"
#include "ir/PpcOps.h"

using namespace mlir;

namespace ppc {

Value f64Scalar(OpBuilder &builder, Location loc, double value) {
  auto type = RankedTensorType::get({}, builder.getF64Type());
  return builder.create<ConstantOp>(loc,
                                    DenseElementsAttr::get(type, builder.getF64FloatAttr(value)));
}

Value castScalar(OpBuilder &builder, Location loc, Value scalar, Type elementType) {
  auto type = RankedTensorType::get({}, elementType);
  if (scalar.getType() == type)
    return scalar;
  return builder.create<CastOp>(loc, type, scalar);
}

llvm::SmallVector<StringRef> optimizerStateKinds(const OptimizerConfig &config) {
  if (config.kind == OptimizerConfig::Kind::AdamW)
    return {"exp_avg", "exp_avg_sq"};
  if (config.momentum != 0)
    return {"momentum"};
  return {};
}

namespace {
/// Builds elementwise arithmetic on tensors and rank-0 scalars.
struct Arith {
  OpBuilder &b;
  Location loc;

  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value sqrt(Value x) { return b.create<SqrtOp>(loc, x); }
};
} // namespace

llvm::DenseMap<Type, UpdateFactors> buildUpdateFactors(OpBuilder &builder, Location loc,
                                                       const OptimizerConfig &config,
                                                       const StepScalars &scalars,
                                                       llvm::ArrayRef<Type> elementTypes) {
  Arith f64{builder, loc};
  // The f64 factors, in UpdateFactors' order of fields.
  UpdateFactors wide;
  if (config.kind == OptimizerConfig::Kind::Sgd) {
    wide.weightDecay = scalars.weightDecay;
    wide.momentum = scalars.momentum;
    wide.lr = scalars.lr;
  } else {
    // torch.optim.AdamW: p *= 1 - lr * wd; m = beta1 * m + (1 - beta1) * g;
    // v = beta2 * v + (1 - beta2) * g * g; p += -lr / (1 - beta1^t) * m /
    // (sqrt(v) / sqrt(1 - beta2^t) + eps).
    Value one = f64Scalar(builder, loc, 1.0);
    if (scalars.weightDecay)
      wide.decay = f64.sub(one, f64.mul(scalars.lr, scalars.weightDecay));
    wide.beta1 = scalars.beta1;
    wide.oneMinusBeta1 = f64.sub(one, scalars.beta1);
    wide.beta2 = scalars.beta2;
    wide.oneMinusBeta2 = f64.sub(one, scalars.beta2);
    Value bc1 = f64.sub(one, builder.create<PowOp>(loc, scalars.beta1, scalars.t));
    Value bc2 = f64.sub(one, builder.create<PowOp>(loc, scalars.beta2, scalars.t));
    wide.stepSize = builder.create<NegOp>(loc, f64.div(scalars.lr, bc1));
    wide.sqrtBiasCorrection2 = f64.sqrt(bc2);
    wide.eps = scalars.eps;
  }
  llvm::DenseMap<Type, UpdateFactors> byType;
  for (Type element : elementTypes) {
    if (byType.count(element))
      continue;
    auto cast = [&](Value v) { return v ? castScalar(builder, loc, v, element) : Value(); };
    byType[element] = {
        cast(wide.weightDecay), cast(wide.momentum),      cast(wide.lr),
        cast(wide.decay),       cast(wide.beta1),         cast(wide.oneMinusBeta1),
        cast(wide.beta2),       cast(wide.oneMinusBeta2), cast(wide.sqrtBiasCorrection2),
        cast(wide.eps),         cast(wide.stepSize)};
  }
  return byType;
}

void buildParameterUpdate(OpBuilder &builder, Location loc, const OptimizerConfig &config,
                          const UpdateFactors &f, Value param, Value grad,
                          llvm::ArrayRef<Value> state, llvm::SmallVectorImpl<Value> &results) {
  Arith a{builder, loc};
  if (config.kind == OptimizerConfig::Kind::Sgd) {
    // torch.optim.SGD: d_p = g + wd * p; buf = momentum * buf + d_p (the
    // first buffer is d_p itself, which a zero buffer gives exactly);
    // p = p - lr * d_p.
    Value dp = grad;
    if (f.weightDecay)
      dp = a.add(dp, a.mul(param, f.weightDecay));
    if (f.momentum) {
      Value buf = a.add(a.mul(state[0], f.momentum), dp);
      results.push_back(a.sub(param, a.mul(buf, f.lr)));
      results.push_back(buf);
      return;
    }
    results.push_back(a.sub(param, a.mul(dp, f.lr)));
    return;
  }
  Value p = f.decay ? a.mul(param, f.decay) : param;
  Value m = a.add(a.mul(state[0], f.beta1), a.mul(grad, f.oneMinusBeta1));
  Value v = a.add(a.mul(state[1], f.beta2), a.mul(a.mul(grad, grad), f.oneMinusBeta2));
  Value denom = a.add(a.div(a.sqrt(v), f.sqrtBiasCorrection2), f.eps);
  results.push_back(a.add(p, a.mul(a.div(m, denom), f.stepSize)));
  results.push_back(m);
  results.push_back(v);
}

} // namespace ppc
