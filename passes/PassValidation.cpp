//===- PassValidation.cpp - check passes against the executor -------------===//

#include "passes/PassValidation.h"
#include "executor/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <random>

using namespace mlir;

namespace ppc {

llvm::SmallVector<Tensor> randomArguments(func::FuncOp func, uint64_t seed,
                                          const ExecOptions &options) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> index(0, 2);
  llvm::SmallVector<Tensor> args;
  for (Type type : func.getArgumentTypes()) {
    auto shaped = llvm::cast<ShapedType>(type);
    Tensor t(options.storage(type), shaped.getShape());
    for (int64_t i = 0; i < t.numElements(); ++i) {
      if (t.isFloat())
        t.setDouble(i, real(rng));
      else
        t.setInt(i, t.dtype() == DType::I1 ? index(rng) % 2 : index(rng));
    }
    args.push_back(std::move(t));
  }
  return args;
}

FailureOr<FunctionDifference> compareFunctions(func::FuncOp before, func::FuncOp after,
                                               uint64_t seed, const ExecOptions &options) {
  if (before.getFunctionType() != after.getFunctionType())
    return after.emitError() << "signature changed from " << before.getFunctionType();
  llvm::SmallVector<Tensor> args = randomArguments(before, seed, options);
  auto expected = runFunction(before, args, options);
  if (failed(expected))
    return failure();
  auto actual = runFunction(after, args, options);
  if (failed(actual))
    return failure();
  FunctionDifference diff;
  for (auto [e, a] : llvm::zip(*expected, *actual)) {
    double maxAbs = 0, scale = 0;
    for (int64_t i = 0; i < e.numElements(); ++i) {
      double x = e.getDouble(i), y = a.getDouble(i);
      scale = std::max(scale, std::abs(x));
      // Equal infinities and NaN in the same place agree.
      if (x == y || (std::isnan(x) && std::isnan(y)))
        continue;
      maxAbs = std::max(maxAbs, std::isfinite(x - y) ? std::abs(x - y) : INFINITY);
    }
    diff.maxAbs = std::max(diff.maxAbs, maxAbs);
    diff.maxRelative = std::max(diff.maxRelative, scale > 0 ? maxAbs / scale : maxAbs);
  }
  return diff;
}

/// The functions of `op`: itself, or those directly in it (a module).
static llvm::SmallVector<func::FuncOp> functionsOf(Operation *op) {
  if (auto func = llvm::dyn_cast<func::FuncOp>(op))
    return {func};
  llvm::SmallVector<func::FuncOp> funcs;
  if (auto module = llvm::dyn_cast<ModuleOp>(op))
    llvm::append_range(funcs, module.getOps<func::FuncOp>());
  return funcs;
}

void PassValidationInstrumentation::runBeforePass(Pass *pass, Operation *op) {
  // Pass adaptors (nested pipelines) have no argument; their passes are
  // checked one by one.
  if (pass->getArgument().empty() || functionsOf(op).empty())
    return;
  snapshots[op] = op->clone();
}

void PassValidationInstrumentation::runAfterPassFailed(Pass *, Operation *op) {
  if (Operation *snapshot = snapshots.lookup(op)) {
    snapshot->erase();
    snapshots.erase(op);
  }
}

void PassValidationInstrumentation::runAfterPass(Pass *pass, Operation *op) {
  Operation *snapshot = snapshots.lookup(op);
  if (!snapshot)
    return;
  snapshots.erase(op);
  llvm::StringMap<func::FuncOp> after;
  for (func::FuncOp f : functionsOf(op))
    after[f.getSymName()] = f;
  for (func::FuncOp before : functionsOf(snapshot)) {
    func::FuncOp f = after.lookup(before.getSymName());
    if (!f)
      continue;
    std::string diagnostic;
    ScopedDiagnosticHandler handler(op->getContext(), [&](Diagnostic &d) {
      if (diagnostic.empty())
        diagnostic = d.str();
      return success();
    });
    auto diff = compareFunctions(before, f, /*seed=*/0, ExecOptions{});
    os << "ppc-validate: after " << pass->getArgument() << ": @" << f.getSymName();
    if (failed(diff)) {
      os << ": not compared (" << diagnostic << ")\n";
      continue;
    }
    bool ok = diff->maxRelative <= tolerance;
    os << llvm::formatv(": max abs diff {0:e2}, max relative diff {1:e2}{2}\n", diff->maxAbs,
                        diff->maxRelative,
                        ok ? "" : llvm::formatv(" exceeds {0:e1}", tolerance).str());
    if (!ok)
      *anyFailed = true;
  }
  snapshot->erase();
}

} // namespace ppc
