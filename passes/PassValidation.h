//===- PassValidation.h - check passes against the executor ------*- C++ -*-===//
//
// Every pass is verifiable (DESIGN.md §5): the reference executor runs a
// function before and after the pass on the same random inputs and the
// results must agree. `compareFunctions` is the test utility;
// `PassValidationInstrumentation` applies it around every pass of a pass
// manager (`ppc-opt --ppc-validate-passes`).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_PASSVALIDATION_H
#define PPC_PASSES_PASSVALIDATION_H

#include "executor/Kernels.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassInstrumentation.h"

#include <memory>

namespace ppc {

/// Random values for `func`'s arguments: floats uniform in [-1, 1), integers
/// in [0, 3) (valid indices into any dimension of size >= 3), booleans.
llvm::SmallVector<Tensor> randomArguments(mlir::func::FuncOp func, uint64_t seed,
                                          const ExecOptions &options);

struct FunctionDifference {
  /// max |after - before| over all results and elements.
  double maxAbs = 0;
  /// maxAbs of each result divided by max |before| of that result.
  double maxRelative = 0;
};

/// Runs `before` and `after` (same signature) on the same random inputs and
/// measures how far their results are apart; fails (with a diagnostic) when
/// either cannot run or the signatures differ.
mlir::FailureOr<FunctionDifference> compareFunctions(mlir::func::FuncOp before,
                                                     mlir::func::FuncOp after, uint64_t seed,
                                                     const ExecOptions &options);

/// Compares every function before and after each pass and prints one line
/// per function on `os`; a relative difference above `tolerance` is an
/// error, remembered in the shared `anyFailed` flag.
class PassValidationInstrumentation : public mlir::PassInstrumentation {
public:
  PassValidationInstrumentation(double tolerance, llvm::raw_ostream &os,
                                std::shared_ptr<bool> anyFailed)
      : tolerance(tolerance), os(os), anyFailed(std::move(anyFailed)) {}

  void runBeforePass(mlir::Pass *pass, mlir::Operation *op) override;
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override;
  void runAfterPassFailed(mlir::Pass *pass, mlir::Operation *op) override;

private:
  double tolerance;
  llvm::raw_ostream &os;
  std::shared_ptr<bool> anyFailed;
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> snapshots;
};

} // namespace ppc

#endif // PPC_PASSES_PASSVALIDATION_H
