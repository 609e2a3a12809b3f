//===- PpcOps.h - ops of the ppc dialect ------------------------*- C++ -*-===//

#ifndef PPC_IR_PPCOPS_H
#define PPC_IR_PPCOPS_H

#include "ir/PpcAttrs.h"
#include "ir/PpcDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/PpcEnums.h.inc"

namespace ppc {
/// The strings of a mesh axis list (an array of string attributes).
llvm::SmallVector<llvm::StringRef> axisNames(mlir::ArrayAttr axes);
/// Checks that `mesh` names a `ppc.mesh` visible from `op` and that `axes`
/// are axes of it; returns the size of a group over `axes`. Errors are
/// emitted at `op`.
mlir::FailureOr<int64_t>
verifyCollectiveMesh(mlir::Operation *op,
                     mlir::SymbolTableCollection &symbolTable,
                     mlir::FlatSymbolRefAttr mesh, mlir::ArrayAttr axes);

/// Marks the collectives (and `ppc.axis_index`): ops whose result depends on
/// the other ranks of a mesh group. The SPMD executor computes them across
/// ranks; the single-rank executor and autodiff do not handle them.
template <typename ConcreteType>
class CollectiveTrait
    : public mlir::OpTrait::TraitBase<ConcreteType, CollectiveTrait> {};
} // namespace ppc

#define GET_OP_CLASSES
#include "ir/PpcOps.h.inc"

#endif // PPC_IR_PPCOPS_H
