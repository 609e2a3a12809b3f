//===- PpcDialect.cpp - the ppc dialect -----------------------------------===//

#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace ppc;

#include "ir/PpcDialect.cpp.inc"

void PpcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/PpcOps.cpp.inc"
      >();
}

Operation *PpcDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}

/// `ppc.input`, `ppc.param`, `ppc.output`, `ppc.grad` and `ppc.state` name
/// the ONNX value (or parameter) behind a function argument or result; each
/// must be a non-empty string. `ppc.step` marks the step argument.
static LogicalResult verifyNameAttr(Operation *op, NamedAttribute attr,
                                    llvm::ArrayRef<llvm::StringLiteral> allowed) {
  if (!llvm::is_contained(allowed, attr.getName().getValue()))
    return op->emitError() << "unknown ppc attribute '" << attr.getName().getValue()
                           << "' here";
  if (attr.getName().getValue() == PpcDialect::kStepAttrName) {
    if (!llvm::isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << PpcDialect::kStepAttrName
                             << "' must be a unit attribute";
    return success();
  }
  auto name = llvm::dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be a non-empty string";
  return success();
}

LogicalResult PpcDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                   unsigned, NamedAttribute attr) {
  return verifyNameAttr(op, attr,
                        {kInputAttrName, kParamAttrName, kStateAttrName, kStepAttrName});
}

LogicalResult PpcDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                      unsigned,
                                                      NamedAttribute attr) {
  return verifyNameAttr(op, attr,
                        {kOutputAttrName, kParamAttrName, kGradAttrName, kStateAttrName});
}
