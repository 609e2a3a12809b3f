//===- Spmd.h - runs per-rank programs on a simulated mesh ------*- C++ -*-===//
//
// The reference executor's mesh: every rank of a `ppc.mesh` runs a function
// in one process, with its own values. An SPMD program runs the same
// function on every rank; a pipelined one gives each stage its own function.
// Ranks meet only where their program says so: at a collective (the ranks of
// its group) and at a recv (the message's sender).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_EXECUTOR_SPMD_H
#define PPC_EXECUTOR_SPMD_H

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

namespace ppc {

/// Runs `programOfRank[r]` on rank r of `mesh`: `argsPerRank[r]` are rank
/// r's local arguments (storage dtypes of `options`); returns every rank's
/// results, and fills `peakBytesPerRank` (when given) with each rank's peak
/// of live bytes (`ExecutionFrame::peakBytes`), and `hostPeakBytesPerRank`
/// with those in host memory (`hostPeakBytes`: offload).
///
/// Each rank steps through its own program. Ordinary ops run their kernels
/// on the rank's values. A collective is a meeting of the ranks of its group
/// (`MeshOp::getGroup`): it runs once every member has reached it, and the
/// members must be at the same collective (the same op, or one with the same
/// name, attributes and types); `ppc.axis_index` and `ppc.all_slice` need no
/// meeting. `ppc.send` appends a tensor to the messages from the rank to its
/// peer; `ppc.recv` waits for the next message from its peer and checks it
/// against its result type. Ranks take turns, each running until it waits
/// or returns; when none can go on before all have returned, the run fails
/// with a deadlock naming where each rank waits. Messages never received are
/// an error too. A failure on one rank is emitted at the op with "(rank r)"
/// appended.
mlir::FailureOr<llvm::SmallVector<llvm::SmallVector<Tensor>>>
runMesh(llvm::ArrayRef<mlir::func::FuncOp> programOfRank, MeshOp mesh,
        llvm::ArrayRef<llvm::SmallVector<Tensor>> argsPerRank, const ExecOptions &options,
        llvm::SmallVectorImpl<int64_t> *peakBytesPerRank = nullptr,
        llvm::SmallVectorImpl<int64_t> *hostPeakBytesPerRank = nullptr);

/// Runs the SPMD program `func` on every rank of `mesh` (`runMesh` with
/// `func` for every rank).
mlir::FailureOr<llvm::SmallVector<llvm::SmallVector<Tensor>>>
runSpmd(mlir::func::FuncOp func, MeshOp mesh, llvm::ArrayRef<llvm::SmallVector<Tensor>> argsPerRank,
        const ExecOptions &options, llvm::SmallVectorImpl<int64_t> *peakBytesPerRank = nullptr);

/// The local tensor that `rank` holds of `global` under `sharding`: the
/// block of each split dimension at the rank's position in the group of
/// that dimension's axes. A value partial over some axes is held whole by
/// the rank at position 0 of that group and as zeros by the others.
llvm::Expected<Tensor> shardTensor(const Tensor &global, ShardingAttr sharding, MeshOp mesh,
                                   int64_t rank);

/// The full value from every rank's local tensor under `sharding` (the
/// inverse of `shardTensor`): blocks placed, partial axes summed in double
/// and rounded once, replicated axes read at coordinate 0.
llvm::Expected<Tensor> unshardTensor(llvm::ArrayRef<Tensor> perRank, ShardingAttr sharding,
                                     MeshOp mesh);

} // namespace ppc

#endif // PPC_EXECUTOR_SPMD_H
