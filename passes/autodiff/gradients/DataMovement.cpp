//===- DataMovement.cpp - gradients of ops that move elements -------------===//
//
// Each adjoint moves the result's adjoint back to where the elements came
// from: the inverse reshape or permutation, slices of a concat, insert_slice
// for slice, scatter_add for gather and the other way round.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/autodiff/Gradients.h"

using namespace mlir;

namespace ppc {

static bool isFloatTensor(Value value) {
  return llvm::isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

static RankedTensorType tensorType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

/// The adjoint of the op's only float operand (index 0) from `fn(g)`; other
/// operands get none.
template <typename OpT, typename Fn> static GradientRule firstOperandRule(Fn fn) {
  return [fn](const GradientRequest &request, llvm::SmallVectorImpl<Value> &operandGrads) {
    auto op = llvm::cast<OpT>(request.op);
    Value input = op->getOperand(0);
    operandGrads.push_back(request.wanted[0] && isFloatTensor(input)
                               ? fn(request.builder, op, request.resultGrads[0])
                               : Value());
    operandGrads.append(op->getNumOperands() - 1, Value());
    return success();
  };
}

static Value reshapeGradient(OpBuilder &b, ReshapeOp op, Value g) {
  return b.create<ReshapeOp>(op.getLoc(), op.getInput().getType(), g);
}

static Value transposeGradient(OpBuilder &b, TransposeOp op, Value g) {
  llvm::ArrayRef<int64_t> perm = op.getPerm();
  llvm::SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return b.create<TransposeOp>(op.getLoc(), g, inverse);
}

/// The slice's adjoint inserted into zeros of the input's type.
static Value sliceGradient(OpBuilder &b, SliceOp op, Value g) {
  Value zeros = zerosLike(b, op.getLoc(), op.getInput().getType());
  return b.create<InsertSliceOp>(op.getLoc(), g, zeros, op.getStarts(), op.getLimits(),
                                 op.getSteps());
}

static Value gatherGradient(OpBuilder &b, GatherOp op, Value g) {
  return b.create<ScatterAddOp>(op.getLoc(), op.getData().getType(), g, op.getIndices(),
                                op.getAxisAttr());
}

static Value scatterAddGradient(OpBuilder &b, ScatterAddOp op, Value g) {
  return b.create<GatherOp>(op.getLoc(), g, op.getIndices(), op.getAxisAttr());
}

static Value expandGradient(OpBuilder &b, ExpandOp op, Value g) {
  return unbroadcast(b, op.getLoc(), g, op.getInput().getType());
}

/// The adjoint of a running sum is the running sum of the adjoint taken the
/// other way.
static Value cumSumGradient(OpBuilder &b, CumSumOp op, Value g) {
  return b.create<CumSumOp>(op.getLoc(), g, op.getAxisAttr(), op.getExclusiveAttr(),
                            b.getBoolAttr(!op.getReverse()));
}

static Value triluGradient(OpBuilder &b, TriluOp op, Value g) {
  return b.create<TriluOp>(op.getLoc(), g, op.getUpperAttr(), op.getKAttr());
}

/// Each operand's adjoint is its part of the result's adjoint along the axis.
static LogicalResult concatGradient(const GradientRequest &request,
                                    llvm::SmallVectorImpl<Value> &operandGrads) {
  auto concat = llvm::cast<ConcatOp>(request.op);
  OpBuilder &b = request.builder;
  Value g = request.resultGrads[0];
  llvm::ArrayRef<int64_t> shape = concat.getType().getShape();
  int64_t axis = concat.getAxis(), offset = 0;
  for (auto [i, input] : llvm::enumerate(concat.getInputs())) {
    int64_t size = tensorType(input).getDimSize(axis);
    if (request.wanted[i] && isFloatTensor(input)) {
      llvm::SmallVector<int64_t> starts(shape.size(), 0), limits(shape), steps(shape.size(), 1);
      starts[axis] = offset;
      limits[axis] = offset + size;
      operandGrads.push_back(b.create<SliceOp>(concat.getLoc(), g, starts, limits, steps));
    } else {
      operandGrads.push_back(Value());
    }
    offset += size;
  }
  return success();
}

/// The source's adjoint is the slice of the result's adjoint it landed in;
/// the destination's is the result's adjoint with that region zeroed.
static LogicalResult insertSliceGradient(const GradientRequest &request,
                                         llvm::SmallVectorImpl<Value> &operandGrads) {
  auto insert = llvm::cast<InsertSliceOp>(request.op);
  OpBuilder &b = request.builder;
  Location loc = insert.getLoc();
  Value g = request.resultGrads[0], source = insert.getSource();
  if (!isFloatTensor(source)) {
    operandGrads.append(2, Value());
    return success();
  }
  operandGrads.push_back(
      request.wanted[0]
          ? b.create<SliceOp>(loc, g, insert.getStarts(), insert.getLimits(), insert.getSteps())
                .getResult()
          : Value());
  operandGrads.push_back(request.wanted[1]
                             ? b.create<InsertSliceOp>(loc, zerosLike(b, loc, tensorType(source)),
                                                       g, insert.getStarts(), insert.getLimits(),
                                                       insert.getSteps())
                                   .getResult()
                             : Value());
  return success();
}

void registerDataMovementGradients(GradientRegistry &registry) {
  registry.add<ReshapeOp>(firstOperandRule<ReshapeOp>(reshapeGradient));
  registry.add<TransposeOp>(firstOperandRule<TransposeOp>(transposeGradient));
  registry.add<SliceOp>(firstOperandRule<SliceOp>(sliceGradient));
  registry.add<GatherOp>(firstOperandRule<GatherOp>(gatherGradient));
  registry.add<ScatterAddOp>(firstOperandRule<ScatterAddOp>(scatterAddGradient));
  registry.add<ExpandOp>(firstOperandRule<ExpandOp>(expandGradient));
  registry.add<TriluOp>(firstOperandRule<TriluOp>(triluGradient));
  registry.add<CumSumOp>(firstOperandRule<CumSumOp>(cumSumGradient));
  registry.addNonDifferentiable<ArgMaxOp>();
  registry.addNonDifferentiable<TopKIndicesOp>();
  registry.add<ConcatOp>(concatGradient);
  registry.add<InsertSliceOp>(insertSliceGradient);
}

} // namespace ppc
