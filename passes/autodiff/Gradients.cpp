//===- Gradients.cpp - the gradient rule registry and shared helpers ------===//

#include "passes/autodiff/Gradients.h"
#include "ir/PpcOps.h"
#include "passes/Recognition.h"

using namespace mlir;

namespace ppc {

const GradientRegistry &GradientRegistry::get() {
  static const GradientRegistry registry = [] {
    GradientRegistry r;
    registerElementwiseGradients(r);
    registerContractionGradients(r);
    registerReductionGradients(r);
    registerNormalizationGradients(r);
    registerDataMovementGradients(r);
    registerLossGradients(r);
    return r;
  }();
  return registry;
}

const GradientRule *GradientRegistry::lookup(Operation *op) const {
  auto name = op->getRegisteredInfo();
  if (!name)
    return nullptr;
  auto it = rules.find(name->getTypeID());
  return it == rules.end() ? nullptr : &it->second;
}

bool GradientRegistry::isNonDifferentiable(Operation *op) const {
  if (auto name = op->getRegisteredInfo())
    if (nonDifferentiable.contains(name->getTypeID()))
      return true;
  // Without a float result (comparisons, casts to integers) no adjoint flows
  // back, whatever the op.
  return op->getNumResults() > 0 && llvm::none_of(op->getResultTypes(), [](Type type) {
           return llvm::isa<FloatType>(getElementTypeOrSelf(type));
         });
}

Value unbroadcast(OpBuilder &builder, Location loc, Value grad, RankedTensorType target) {
  auto type = llvm::cast<RankedTensorType>(grad.getType());
  if (type == target)
    return grad;
  llvm::ArrayRef<int64_t> shape = type.getShape(), to = target.getShape();
  int64_t offset = shape.size() - to.size();
  // Sum over the leading dimensions `target` lacks and those it has as 1.
  llvm::SmallVector<int64_t> axes;
  for (int64_t d = 0, e = shape.size(); d < e; ++d)
    if (d < offset || (to[d - offset] == 1 && shape[d] != 1))
      axes.push_back(d);
  if (!axes.empty())
    grad = builder.create<ReduceSumOp>(loc, grad, axes, /*keepdims=*/true);
  if (grad.getType() != target)
    grad = builder.create<ReshapeOp>(loc, target, grad);
  return grad;
}

Value scalarConstant(OpBuilder &builder, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute element;
  if (auto floatType = llvm::dyn_cast<FloatType>(elementType))
    element = builder.getFloatAttr(floatType, value);
  else
    element = builder.getIntegerAttr(elementType, static_cast<int64_t>(value));
  return builder.create<ConstantOp>(loc, DenseElementsAttr::get(type, element));
}

Value scaleBy(OpBuilder &builder, Location loc, Value value, double factor) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  auto element = llvm::cast<FloatType>(type.getElementType());
  if (holdsExactly(element, APFloat(factor)) || element.getWidth() >= 32)
    return builder.create<MulOp>(loc, value, scalarConstant(builder, loc, element, factor));
  // As MixedPrecision's computeInF32: the factor in f32, the product rounded once.
  Type f32 = builder.getF32Type();
  Value wide = builder.create<CastOp>(loc, type.clone(f32), value);
  Value product = builder.create<MulOp>(loc, wide, scalarConstant(builder, loc, f32, factor));
  return builder.create<CastOp>(loc, type, product);
}

Value zerosLike(OpBuilder &builder, Location loc, RankedTensorType type) {
  return builder.create<ConstantOp>(
      loc, DenseElementsAttr::get(type, builder.getZeroAttr(type.getElementType())));
}

} // namespace ppc
