//===- PpcAttrs.h - attributes of the ppc dialect ---------------*- C++ -*-===//

#ifndef PPC_IR_PPCATTRS_H
#define PPC_IR_PPCATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LogicalResult.h"

namespace ppc {
class MeshOp;
} // namespace ppc

#define GET_ATTRDEF_CLASSES
#include "ir/PpcAttrs.h.inc"

#endif // PPC_IR_PPCATTRS_H
