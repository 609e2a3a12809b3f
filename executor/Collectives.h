//===- Collectives.h - collectives of the simulated mesh ---------*- C++
//-*-===//
//
// The semantics of the collective ops for the in-process mesh executor:
// functions registered by op class (like the kernels). A collective that
// communicates is computed for one group at a time, from the operands of the
// group's ranks; one that does not (`ppc.axis_index`, `ppc.all_slice`) is
// computed for one rank from its position in its group.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_EXECUTOR_COLLECTIVES_H
#define PPC_EXECUTOR_COLLECTIVES_H

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

namespace ppc {

/// Computes `op` for one group: `ranks` are the group's ranks in group order
/// (for messages), `operands[i]` the operand values of `ranks[i]`, and
/// `results[i]` receives its results. Reductions compute in double (integers
/// in 64 bits, wrapping) in group order and round once to the result's
/// dtype, as kernels do.
using GroupCollectiveKernel = std::function<mlir::LogicalResult(
    mlir::Operation *op, llvm::ArrayRef<int64_t> ranks,
    llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
    llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results, const ExecOptions &options)>;

/// Computes `op` for one rank without the others: the rank is at `position`
/// of a group of `groupSize` ranks and has `operands`.
using LocalCollectiveKernel = std::function<mlir::LogicalResult(
    mlir::Operation *op, int64_t position, int64_t groupSize, llvm::ArrayRef<Tensor> operands,
    llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &options)>;

/// A collective's kernel: exactly one of the two is set.
struct CollectiveKernel {
  GroupCollectiveKernel group;
  LocalCollectiveKernel local;
};

/// The collective kernel of `op`, or null when `op` is not a collective.
const CollectiveKernel *lookupCollectiveKernel(mlir::Operation *op);

/// The mesh and axes of a collective op (every collective has both).
mlir::FlatSymbolRefAttr collectiveMesh(mlir::Operation *op);
mlir::ArrayAttr collectiveAxes(mlir::Operation *op);

} // namespace ppc

#endif // PPC_EXECUTOR_COLLECTIVES_H
