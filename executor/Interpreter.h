//===- Interpreter.h - runs ppc IR on the CPU --------------------*- C++ -*-===//

#ifndef PPC_EXECUTOR_INTERPRETER_H
#define PPC_EXECUTOR_INTERPRETER_H

#include "executor/Kernels.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <array>

namespace ppc {

/// What one run of a function measured.
struct RunStats {
  /// The peak of live bytes (`ExecutionFrame::peakBytes`), and of those in
  /// host memory (`hostPeakBytes`).
  int64_t peakBytes = 0;
  int64_t hostPeakBytes = 0;
};

/// Runs `func` op by op on `arguments` (one per function argument, already
/// in the storage dtypes of `options`) and returns its results. Errors (an op
/// without a kernel, an out-of-range index) are emitted at the op. A run that
/// succeeds fills `stats` when given.
mlir::FailureOr<llvm::SmallVector<Tensor>> runFunction(mlir::func::FuncOp func,
                                                       llvm::ArrayRef<Tensor> arguments,
                                                       const ExecOptions &options,
                                                       RunStats *stats = nullptr);

/// The live values of one run of a function body: the arguments, then each
/// op's results, each freed after its last use. `runFunction` steps one
/// frame through the body; `runMesh` steps one frame per rank.
class ExecutionFrame {
public:
  /// A frame for `func`'s body holding `arguments`; an argument-count
  /// mismatch is an error at the function.
  static mlir::FailureOr<ExecutionFrame> create(mlir::func::FuncOp func,
                                                llvm::ArrayRef<Tensor> arguments);

  /// The values of `op`'s operands, in order; the last use of a value moves
  /// it out of the frame, earlier uses copy it.
  mlir::FailureOr<llvm::SmallVector<Tensor>> takeOperands(mlir::Operation &op);
  /// Stores `op`'s results (those that have uses).
  void setResults(mlir::Operation &op, llvm::MutableArrayRef<Tensor> results);
  /// Runs `op` with its kernel: operands, kernel, results.
  mlir::LogicalResult runOp(mlir::Operation &op, const ExecOptions &options);

  /// Bytes of the tensors the frame holds now, in their storage dtype
  /// (elements times `byteWidth`).
  int64_t liveBytes() const { return heldBytes[0]; }
  /// The largest live bytes at one op so far: at op k, the frame's bytes
  /// before `takeOperands(k)` plus the bytes of all of k's results (those
  /// without uses too, which `setResults` drops). This is the liveness of
  /// `planMemory` (passes/memory/MemoryPlan.h) counted in storage dtypes, so
  /// the two agree exactly when floats are stored as declared (f32 programs
  /// run without `ExecOptions::f64`); with f64 storage every float counts 8
  /// bytes.
  int64_t peakBytes() const { return peak[0]; }
  /// The same for the values in host memory (ppc::onHost: offload), which
  /// the two above leave out.
  int64_t hostPeakBytes() const { return peak[1]; }

private:
  llvm::DenseMap<mlir::Value, Tensor> values;
  /// Remaining uses per value, so each tensor is freed after its last use.
  llvm::DenseMap<mlir::Value, unsigned> usesLeft;
  /// Carried state (parameter and optimizer-state arguments): counted to
  /// the end, as the executables keep it in its argument's buffer.
  llvm::DenseSet<mlir::Value> carried;
  /// Bytes by memory: [0] the device's, [1] the host's.
  std::array<int64_t, 2> heldBytes{};
  /// `heldBytes` when `opTaken`, the op that took operands last, took them.
  std::array<int64_t, 2> bytesAtOp{};
  mlir::Operation *opTaken = nullptr;
  std::array<int64_t, 2> peak{};
};

/// Checks that the executor can hold every result of `op`: at 8 bytes per
/// element (Tensor holds doubles and int64_t), within kMaxTensorBytes
/// (runtime/CheckedSize.h). The error names the result and is emitted at
/// `op`, before its kernel allocates anything.
mlir::LogicalResult checkHostSizes(mlir::Operation *op);

/// Runs `op`'s kernel on `operands` and checks the results (`checkResults`).
mlir::LogicalResult runKernel(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                              llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &options);

/// Checks that `results` has one tensor per result of `op`, each of the
/// result's shape and storage dtype; a mismatch (an executor bug) becomes a
/// diagnostic at the op rather than a wrong value.
mlir::LogicalResult checkResults(mlir::Operation *op, llvm::ArrayRef<Tensor> results,
                                 const ExecOptions &options);

/// Replaces `op` by constants when every operand is a `ppc.constant`, the
/// executor can run it and no result has more than `maxElements` elements;
/// returns true when it did, with the new constants in `replacements` when
/// given. Folding computes exactly as the program would (declared dtypes, no
/// f64 promotion).
mlir::FailureOr<bool> foldWithExecutor(mlir::Operation *op, mlir::OpBuilder &builder,
                                       llvm::SmallVectorImpl<mlir::Value> *replacements = nullptr,
                                       int64_t maxElements = int64_t(1) << 22);

} // namespace ppc

#endif // PPC_EXECUTOR_INTERPRETER_H
