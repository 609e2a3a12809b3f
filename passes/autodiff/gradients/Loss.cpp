//===- Loss.cpp - gradient of nll_loss ------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/autodiff/Gradients.h"

using namespace mlir;

namespace ppc {

/// The input's adjoint is zero except at each element's target class, where
/// it is -g * weight[target] (0 for ignored targets), divided by the summed
/// weight of the non-ignored targets for `mean`. It is built as a where over
/// the one-hot of the targets (target == iota over the class dimension).
static LogicalResult nllLossGradient(const GradientRequest &request,
                                     llvm::SmallVectorImpl<Value> &operandGrads) {
  auto nllLoss = llvm::cast<NllLossOp>(request.op);
  Value input = nllLoss.getInput(), target = nllLoss.getTarget(), weight = nllLoss.getWeight();
  if (weight && request.wanted[2])
    return nllLoss.emitError() << "nll_loss has no gradient with respect to its weight";
  operandGrads.append(nllLoss->getNumOperands(), Value());
  if (!request.wanted[0])
    return success();

  OpBuilder &b = request.builder;
  Location loc = nllLoss.getLoc();
  auto inputType = llvm::cast<RankedTensorType>(input.getType());
  auto targetType = llvm::cast<RankedTensorType>(target.getType());
  Type element = inputType.getElementType(), index = targetType.getElementType();
  int64_t rank = inputType.getRank(), numClasses = inputType.getDimSize(1);

  // The per-element weight: weight[target], times 0 for ignored targets.
  // Ignored targets may lie outside [0, C), so they gather row 0 instead.
  Value elementWeight;
  Value ignored;
  if (IntegerAttr attr = nllLoss.getIgnoreIndexAttr()) {
    Value ignoreIndex = scalarConstant(b, loc, index, attr.getInt());
    ignored = b.create<EqualOp>(loc, target, ignoreIndex);
    elementWeight = b.create<CastOp>(loc, RankedTensorType::get(targetType.getShape(), element),
                                     b.create<NotOp>(loc, ignored));
  }
  if (weight) {
    Value rows = target;
    if (ignored)
      rows = b.create<WhereOp>(loc, ignored, scalarConstant(b, loc, index, 0), target);
    Value picked = b.create<GatherOp>(loc, weight, rows, /*axis=*/0);
    elementWeight =
        elementWeight ? b.create<MulOp>(loc, picked, elementWeight).getResult() : picked;
  }

  Value coefficient = b.create<NegOp>(loc, request.resultGrads[0]);
  if (elementWeight)
    coefficient = b.create<MulOp>(loc, coefficient, elementWeight);
  if (nllLoss.getReduction() == LossReduction::Mean) {
    Value total =
        elementWeight
            ? b.create<ReduceSumOp>(loc, elementWeight,
                                    llvm::to_vector(llvm::seq<int64_t>(0, targetType.getRank())),
                                    /*keepdims=*/false)
                  .getResult()
            : scalarConstant(b, loc, element, targetType.getNumElements());
    coefficient = b.create<DivOp>(loc, coefficient, total);
  }

  // Targets and coefficients with a class dimension of size 1, against an
  // iota over the classes.
  llvm::SmallVector<int64_t> withClass(targetType.getShape());
  withClass.insert(withClass.begin() + 1, 1);
  Value targets = b.create<ReshapeOp>(loc, RankedTensorType::get(withClass, index), target);
  if (llvm::cast<RankedTensorType>(coefficient.getType()).getRank() > 0)
    coefficient = b.create<ReshapeOp>(loc, RankedTensorType::get(withClass, element), coefficient);
  llvm::SmallVector<int64_t> classShape(rank, 1);
  classShape[1] = numClasses;
  auto classType = RankedTensorType::get(classShape, index);
  llvm::SmallVector<Attribute> classes;
  for (int64_t c = 0; c < numClasses; ++c)
    classes.push_back(b.getIntegerAttr(index, c));
  Value iota = b.create<ConstantOp>(loc, DenseElementsAttr::get(classType, classes));
  Value oneHot = b.create<EqualOp>(loc, targets, iota);
  operandGrads[0] = b.create<WhereOp>(loc, oneHot, coefficient, scalarConstant(b, loc, element, 0));
  return success();
}

void registerLossGradients(GradientRegistry &registry) { registry.add<NllLossOp>(nllLossGradient); }

} // namespace ppc
