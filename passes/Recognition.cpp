//===- Recognition.cpp - helpers of the passes that recognise ops --------===//

#include "passes/Recognition.h"

#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace ppc {

bool holdsExactly(FloatType type, APFloat value) {
  bool losesInfo = false;
  value.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven, &losesInfo);
  return !losesInfo;
}

void copySchedule(Operation *from, llvm::ArrayRef<Operation *> made) {
  for (NamedAttribute attr : from->getDiscardableAttrs())
    if (attr.getName() != PpcDialect::kShardingsAttrName)
      for (Operation *op : made)
        op->setAttr(attr.getName(), attr.getValue());
}

std::optional<double> floatScalarConstant(Value value) {
  DenseElementsAttr attr;
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getNumElements() != 1 || !llvm::isa<FloatType>(type.getElementType()) ||
      !matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  return (*attr.getValues<APFloat>().begin()).convertToDouble();
}

std::optional<Attribute> splatValue(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<Attribute>();
}

llvm::StringRef fusableReduction(Operation *op) {
  return llvm::TypeSwitch<Operation *, llvm::StringRef>(op)
      .Case<ReduceSumOp>([](auto) { return "Sum"; })
      .Case<ReduceMeanOp>([](auto) { return "Mean"; })
      .Case<ReduceMaxOp>([](auto) { return "Max"; })
      .Case<ReduceMinOp>([](auto) { return "Min"; })
      .Default([](auto) { return ""; });
}

bool isZerosConstant(Value value) {
  DenseElementsAttr dense;
  if (!matchPattern(value, m_Constant(&dense)) || !dense.isSplat())
    return false;
  if (auto f = llvm::dyn_cast<FloatAttr>(dense.getSplatValue<Attribute>()))
    return f.getValue().isZero();
  if (auto i = llvm::dyn_cast<IntegerAttr>(dense.getSplatValue<Attribute>()))
    return i.getValue().isZero();
  return false;
}

void eraseUnreadPpcOps(func::FuncOp func) {
  for (Block &block : func.getBody())
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (op.getDialect() && llvm::isa<PpcDialect>(op.getDialect()) && op.use_empty() &&
          isPure(&op))
        op.erase();
}

Value otherOperand(Operation *op, Value value) {
  if (op->getNumOperands() != 2)
    return nullptr;
  if (op->getOperand(0) == value && op->getOperand(1) != value)
    return op->getOperand(1);
  if (op->getOperand(1) == value && op->getOperand(0) != value)
    return op->getOperand(0);
  return nullptr;
}

} // namespace ppc
