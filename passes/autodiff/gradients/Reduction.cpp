//===- Reduction.cpp - gradients of reduce_* ------------------------------===//
//
// Each rule first brings the result's adjoint to the keepdims shape (the
// input's shape with the reduced dimensions of size 1), from where it
// broadcasts back over the reduced dimensions.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/autodiff/Gradients.h"

using namespace mlir;

namespace ppc {

namespace {
/// What every reduction rule starts from.
struct ReduceParts {
  Value input;
  /// The result and its adjoint, reshaped to the keepdims shape.
  Value result, grad;
  RankedTensorType inputType;
  llvm::ArrayRef<int64_t> axes;
};
} // namespace

/// A value of the reduction result's shape reshaped to the keepdims shape.
template <typename OpT> static Value withKeptDims(OpBuilder &b, OpT op, Value value) {
  if (op.getKeepdims())
    return value;
  auto inputType = llvm::cast<RankedTensorType>(op.getInput().getType());
  llvm::SmallVector<int64_t> shape(inputType.getShape());
  for (int64_t axis : op.getAxes())
    shape[axis] = 1;
  return b.create<ReshapeOp>(op.getLoc(), RankedTensorType::get(shape, inputType.getElementType()),
                             value);
}

/// A rule for reduction `OpT`: `fn` builds the input's adjoint from the
/// parts; non-float reductions have no gradient.
template <typename OpT, typename Fn> static GradientRule reduceRule(Fn fn) {
  return [fn](const GradientRequest &request, llvm::SmallVectorImpl<Value> &operandGrads) {
    auto op = llvm::cast<OpT>(request.op);
    auto inputType = llvm::cast<RankedTensorType>(op.getInput().getType());
    if (!request.wanted[0] || !llvm::isa<FloatType>(inputType.getElementType())) {
      operandGrads.push_back(Value());
      return success();
    }
    OpBuilder &b = request.builder;
    ReduceParts parts{op.getInput(), withKeptDims(b, op, op.getResult()),
                      withKeptDims(b, op, request.resultGrads[0]), inputType, op.getAxes()};
    operandGrads.push_back(fn(b, op.getLoc(), parts));
    return success();
  };
}

static Value sumGradient(OpBuilder &b, Location loc, const ReduceParts &p) {
  return b.create<ExpandOp>(loc, p.inputType, p.grad);
}

static Value meanGradient(OpBuilder &b, Location loc, const ReduceParts &p) {
  int64_t count = 1;
  for (int64_t axis : p.axes)
    count *= p.inputType.getDimSize(axis);
  return b.create<ExpandOp>(loc, p.inputType, scaleBy(b, loc, p.grad, 1.0 / count));
}

/// The adjoint is shared evenly by the elements equal to the extremum (as
/// torch.amax/amin).
static Value extremumGradient(OpBuilder &b, Location loc, const ReduceParts &p) {
  Value mask = b.create<CastOp>(loc, p.inputType, b.create<EqualOp>(loc, p.input, p.result));
  Value count = b.create<ReduceSumOp>(loc, mask, p.axes, /*keepdims=*/true);
  return b.create<MulOp>(loc, mask, b.create<DivOp>(loc, p.grad, count));
}

/// d prod(x) / dx_i = prod(x) / x_i. This is NaN where x_i is 0; the product
/// of the other elements would be exact there but needs a cumulative product
/// that the dialect lacks.
static Value prodGradient(OpBuilder &b, Location loc, const ReduceParts &p) {
  return b.create<DivOp>(loc, b.create<MulOp>(loc, p.grad, p.result), p.input);
}

void registerReductionGradients(GradientRegistry &registry) {
  registry.add<ReduceSumOp>(reduceRule<ReduceSumOp>(sumGradient));
  registry.add<ReduceMeanOp>(reduceRule<ReduceMeanOp>(meanGradient));
  registry.add<ReduceMaxOp>(reduceRule<ReduceMaxOp>(extremumGradient));
  registry.add<ReduceMinOp>(reduceRule<ReduceMinOp>(extremumGradient));
  registry.add<ReduceProdOp>(reduceRule<ReduceProdOp>(prodGradient));
}

} // namespace ppc
