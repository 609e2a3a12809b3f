//===- Spmd.h - runs an SPMD program on a simulated mesh ---------*- C++
//-*-===//
//
// The reference executor's mesh: every rank of a `ppc.mesh` runs the same
// function in one process, with its own values. Ranks advance op by op in
// lockstep (all ranks run op k before any runs op k+1), which is valid
// because the program is SPMD: every rank reaches the same collectives in
// the same order.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_EXECUTOR_SPMD_H
#define PPC_EXECUTOR_SPMD_H

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

namespace ppc {

/// Runs `func` on every rank of `mesh`: `argsPerRank[r]` are rank r's
/// local arguments (storage dtypes of `options`); returns every rank's
/// results. Ordinary ops run their kernels on each rank; collectives and
/// `ppc.axis_index` combine the ranks of each group. A failure on one rank
/// is emitted at the op with "(rank r)" appended.
mlir::FailureOr<llvm::SmallVector<llvm::SmallVector<Tensor>>>
runSpmd(mlir::func::FuncOp func, MeshOp mesh,
        llvm::ArrayRef<llvm::SmallVector<Tensor>> argsPerRank,
        const ExecOptions &options);

/// The local tensor that `rank` holds of `global` under `sharding`: the
/// block of each split dimension at the rank's position in the group of
/// that dimension's axes. A value partial over some axes is held whole by
/// the rank at position 0 of that group and as zeros by the others.
llvm::Expected<Tensor> shardTensor(const Tensor &global, ShardingAttr sharding,
                                   MeshOp mesh, int64_t rank);

/// The full value from every rank's local tensor under `sharding` (the
/// inverse of `shardTensor`): blocks placed, partial axes summed in double
/// and rounded once, replicated axes read at coordinate 0.
llvm::Expected<Tensor> unshardTensor(llvm::ArrayRef<Tensor> perRank,
                                     ShardingAttr sharding, MeshOp mesh);

} // namespace ppc

#endif // PPC_EXECUTOR_SPMD_H
