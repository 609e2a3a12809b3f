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

/// `ppc.input`, `ppc.param` and `ppc.output` name the ONNX value behind a
/// function argument or result; each must be a non-empty string.
static LogicalResult verifyNameAttr(Operation *op, NamedAttribute attr,
                                    llvm::ArrayRef<llvm::StringLiteral> allowed) {
  if (!llvm::is_contained(allowed, attr.getName().getValue()))
    return op->emitError() << "unknown ppc attribute '" << attr.getName().getValue()
                           << "' here";
  auto name = llvm::dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be a non-empty string";
  return success();
}

LogicalResult PpcDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                   unsigned, NamedAttribute attr) {
  return verifyNameAttr(op, attr, {kInputAttrName, kParamAttrName});
}

LogicalResult PpcDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                      unsigned,
                                                      NamedAttribute attr) {
  return verifyNameAttr(op, attr, {kOutputAttrName});
}
