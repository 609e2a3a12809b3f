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
/// Builds elementwise arithmetic on tensors and rank-0 f64 scalars; scalars
/// are cast to the tensor's element type at their use.
struct Arith {
  OpBuilder &b;
  Location loc;
  Type element;

  Value s(Value f64) { return castScalar(b, loc, f64, element); }
  Value s(double v) { return s(f64Scalar(b, loc, v)); }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value sqrt(Value x) { return b.create<SqrtOp>(loc, x); }
};
} // namespace

void buildParameterUpdate(OpBuilder &builder, Location loc, const OptimizerConfig &config,
                          const StepScalars &scalars, Value param, Value grad,
                          llvm::ArrayRef<Value> state, llvm::SmallVectorImpl<Value> &results) {
  Arith a{builder, loc, getElementTypeOrSelf(param.getType())};
  Arith f64{builder, loc, builder.getF64Type()};
  if (config.kind == OptimizerConfig::Kind::Sgd) {
    // torch.optim.SGD: d_p = g + wd * p; buf = momentum * buf + d_p (the
    // first buffer is d_p itself, which a zero buffer gives exactly);
    // p = p - lr * d_p.
    Value dp = grad;
    if (scalars.weightDecay)
      dp = a.add(dp, a.mul(param, a.s(scalars.weightDecay)));
    if (scalars.momentum) {
      Value buf = a.add(a.mul(state[0], a.s(scalars.momentum)), dp);
      dp = buf;
      results.push_back(a.sub(param, a.mul(dp, a.s(scalars.lr))));
      results.push_back(buf);
      return;
    }
    results.push_back(a.sub(param, a.mul(dp, a.s(scalars.lr))));
    return;
  }
  // torch.optim.AdamW: p *= 1 - lr * wd; m = beta1 * m + (1 - beta1) * g;
  // v = beta2 * v + (1 - beta2) * g * g; p += -lr / (1 - beta1^t) * m /
  // (sqrt(v) / sqrt(1 - beta2^t) + eps).
  Value one = f64Scalar(builder, loc, 1.0);
  Value p = param;
  if (scalars.weightDecay)
    p = a.mul(param, a.s(f64.sub(one, f64.mul(scalars.lr, scalars.weightDecay))));
  Value m =
      a.add(a.mul(state[0], a.s(scalars.beta1)), a.mul(grad, a.s(f64.sub(one, scalars.beta1))));
  Value v = a.add(a.mul(state[1], a.s(scalars.beta2)),
                  a.mul(a.mul(grad, grad), a.s(f64.sub(one, scalars.beta2))));
  Value bc1 = f64.sub(one, builder.create<PowOp>(loc, scalars.beta1, scalars.t));
  Value bc2 = f64.sub(one, builder.create<PowOp>(loc, scalars.beta2, scalars.t));
  Value stepSize = builder.create<NegOp>(loc, f64.div(scalars.lr, bc1));
  Value denom = a.add(a.div(a.sqrt(v), a.s(f64.sqrt(bc2))), a.s(scalars.eps));
  results.push_back(a.add(p, a.mul(a.div(m, denom), a.s(stepSize))));
  results.push_back(m);
  results.push_back(v);
}

} // namespace ppc
