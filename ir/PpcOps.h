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
#include "llvm/Support/Error.h"

#include "ir/PpcEnums.h.inc"
#include "ir/PpcInterfaces.h.inc"

namespace ppc {
/// The strings of a mesh axis list (an array of string attributes).
llvm::SmallVector<llvm::StringRef> axisNames(mlir::ArrayAttr axes);
/// Checks that `mesh` names a `ppc.mesh` visible from `op` and that `axes`
/// are axes of it; returns the size of a group over `axes`. Errors are
/// emitted at `op`.
mlir::FailureOr<int64_t> verifyCollectiveMesh(mlir::Operation *op,
                                              mlir::SymbolTableCollection &symbolTable,
                                              mlir::FlatSymbolRefAttr mesh, mlir::ArrayAttr axes);

/// Marks the collectives (and `ppc.axis_index`): ops whose result depends on
/// the other ranks of a mesh group. The SPMD executor computes them across
/// ranks; the single-rank executor and autodiff do not handle them.
template <typename ConcreteType>
class CollectiveTrait : public mlir::OpTrait::TraitBase<ConcreteType, CollectiveTrait> {};

/// Linearity (Ppc_LinearInFirst, Ppc_LinearInEach, Ppc_Additive in
/// PpcOps.td): which operands partial sums may flow through.
template <typename ConcreteType>
class LinearInFirstTrait : public mlir::OpTrait::TraitBase<ConcreteType, LinearInFirstTrait> {};
template <typename ConcreteType>
class LinearInEachTrait : public mlir::OpTrait::TraitBase<ConcreteType, LinearInEachTrait> {};
template <typename ConcreteType>
class AdditiveTrait : public mlir::OpTrait::TraitBase<ConcreteType, AdditiveTrait> {};

/// The FLOPs of `op` on its own operand shapes (ContractionOpInterface's
/// getFlops), 0 for an op that is not a contraction.
double flopsOf(mlir::Operation *op);

/// Whether `op` is linear in operand `i` with its other operands fixed.
bool isLinearIn(mlir::Operation *op, unsigned i);

/// Marks the collectives that move data between ranks (Ppc_Communicates in
/// PpcOps.td): all but ppc.all_slice and ppc.axis_index.
template <typename ConcreteType>
class CommunicatesTrait : public mlir::OpTrait::TraitBase<ConcreteType, CommunicatesTrait> {};

/// The bytes of a value of `type`, a statically shaped tensor whose elements
/// take their bit width rounded up to bytes (i1: one): checkedTensorBytes
/// (runtime/CheckedSize.h) of its shape, an error beginning with the shape
/// when it is not within kMaxTensorBytes.
llvm::Expected<int64_t> tensorTypeBytes(mlir::ShapedType type);
/// The bytes of a value of `type` in IR the verifier has accepted, where
/// every tensor is within kMaxTensorBytes (BoundedTensorsTrait): how passes,
/// the planner and the memory plan size values. For a type the verifier
/// would refuse (IR never verified) it is kMaxTensorBytes + 1, more than any
/// budget and small enough that sums of sizes stay in an int64; 0 for a type
/// that is not a statically shaped tensor.
int64_t boundedTensorBytes(mlir::Type type);
/// Checks every result of `op` with tensorTypeBytes; the error names the
/// result and is emitted at `op`.
mlir::LogicalResult verifyBoundedResults(mlir::Operation *op);

/// On every ppc op: its results are tensors within the size limit, so no
/// later size computation overflows (verifyBoundedResults).
template <typename ConcreteType>
class BoundedTensorsTrait : public mlir::OpTrait::TraitBase<ConcreteType, BoundedTensorsTrait> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) { return verifyBoundedResults(op); }
};
/// Whether `value` lives in host memory: a function argument marked
/// `ppc.place = "host"`, the result of a transfer to the host, or a result
/// of an op that runs on the host (offload; device memory otherwise).
bool onHost(mlir::Value value);
/// Whether the host runs `op` (`ppc.place = "host"`; never a transfer).
bool runsOnHost(mlir::Operation *op);

} // namespace ppc

#define GET_OP_CLASSES
#include "ir/PpcOps.h.inc"

#endif // PPC_IR_PPCOPS_H
