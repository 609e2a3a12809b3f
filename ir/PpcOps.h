//===- PpcOps.h - ops of the ppc dialect ------------------------*- C++ -*-===//

#ifndef PPC_IR_PPCOPS_H
#define PPC_IR_PPCOPS_H

#include "ir/PpcDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/PpcEnums.h.inc"

#define GET_OP_CLASSES
#include "ir/PpcOps.h.inc"

#endif // PPC_IR_PPCOPS_H
