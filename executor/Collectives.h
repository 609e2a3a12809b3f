//===- Collectives.h - collectives of the simulated mesh ---------*- C++
//-*-===//
//
// The semantics of the collective ops for the in-process SPMD executor:
// one function per op, registered by op class (like the kernels), computing
// every rank's results at once from every rank's operands.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_EXECUTOR_COLLECTIVES_H
#define PPC_EXECUTOR_COLLECTIVES_H

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

namespace ppc {

/// `operands[r]` are rank r's operand values; `results[r]` receives rank
/// r's results (one list per rank of `mesh`). Reductions compute in double
/// (integers in 64 bits, wrapping) in group order and round once to the
/// result's dtype, as kernels do.
using CollectiveKernel = std::function<mlir::LogicalResult(
    mlir::Operation *op, MeshOp mesh,
    llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
    llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
    const ExecOptions &options)>;

/// The collective kernel of `op`, or null when `op` is not a collective.
const CollectiveKernel *lookupCollectiveKernel(mlir::Operation *op);

} // namespace ppc

#endif // PPC_EXECUTOR_COLLECTIVES_H
