//===- Interpreter.h - runs ppc IR on the CPU --------------------*- C++ -*-===//

#ifndef PPC_EXECUTOR_INTERPRETER_H
#define PPC_EXECUTOR_INTERPRETER_H

#include "executor/Kernels.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ppc {

/// Runs `func` op by op on `arguments` (one per function argument, already
/// in the storage dtypes of `options`) and returns its results. Errors (an op
/// without a kernel, an out-of-range index) are emitted at the op.
mlir::FailureOr<llvm::SmallVector<Tensor>>
runFunction(mlir::func::FuncOp func, llvm::ArrayRef<Tensor> arguments,
            const ExecOptions &options);

/// Replaces `op` by constants when every operand is a `ppc.constant`, the
/// executor can run it and no result has more than `maxElements` elements;
/// returns true when it did, with the new constants in `replacements` when
/// given. Folding computes exactly as the program would (declared dtypes, no
/// f64 promotion).
mlir::FailureOr<bool>
foldWithExecutor(mlir::Operation *op, mlir::OpBuilder &builder,
                 llvm::SmallVectorImpl<mlir::Value> *replacements = nullptr,
                 int64_t maxElements = int64_t(1) << 22);

} // namespace ppc

#endif // PPC_EXECUTOR_INTERPRETER_H
