//===- Interpreter.cpp - runs ppc IR on the CPU ---------------------------===//

#include "executor/Interpreter.h"
#include "ir/PpcOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace ppc {

static LogicalResult runOp(Operation *op, llvm::ArrayRef<Tensor> operands,
                           llvm::SmallVectorImpl<Tensor> &results,
                           const ExecOptions &options) {
  const Kernel *kernel = KernelRegistry::get().lookup(op);
  if (!kernel)
    return op->emitError() << "the reference executor has no kernel for '"
                           << op->getName() << "'";
  if (failed((*kernel)(op, operands, results, options)))
    return failure();
  if (results.size() != op->getNumResults())
    return op->emitError() << "kernel returned " << results.size()
                           << " results, expected " << op->getNumResults();
  // A kernel bug becomes a diagnostic at the op rather than a wrong value.
  for (auto [i, t] : llvm::enumerate(results)) {
    auto type = llvm::cast<ShapedType>(op->getResult(i).getType());
    if (t.shape() != type.getShape() || t.dtype() != resultDType(op, i, options))
      return op->emitError() << "kernel result " << i << " has dtype "
                             << dtypeName(t.dtype()) << " and " << t.rank()
                             << " dims, expected " << type;
  }
  return success();
}

FailureOr<llvm::SmallVector<Tensor>>
runFunction(func::FuncOp func, llvm::ArrayRef<Tensor> arguments,
            const ExecOptions &options) {
  Block &body = func.getBody().front();
  if (arguments.size() != body.getNumArguments())
    return func.emitError() << "expected " << body.getNumArguments()
                            << " arguments, got " << arguments.size();
  llvm::DenseMap<Value, Tensor> values;
  for (auto [arg, tensor] : llvm::zip(body.getArguments(), arguments))
    values[arg] = tensor;

  // Remaining uses per value, so each tensor is freed after its last use.
  llvm::DenseMap<Value, unsigned> usesLeft;
  for (Operation &op : body)
    for (Value v : op.getOperands())
      ++usesLeft[v];

  for (Operation &op : body) {
    llvm::SmallVector<Tensor> operands;
    for (Value v : op.getOperands()) {
      auto it = values.find(v);
      if (it == values.end())
        return op.emitError() << "operand has no value";
      // The last use takes the tensor; earlier uses copy it.
      if (--usesLeft[v] == 0) {
        operands.push_back(std::move(it->second));
        values.erase(it);
      } else {
        operands.push_back(it->second);
      }
    }
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(op))
      return llvm::SmallVector<Tensor>(operands);
    llvm::SmallVector<Tensor> results;
    if (failed(runOp(&op, operands, results, options)))
      return failure();
    for (auto [v, t] : llvm::zip(op.getResults(), results))
      if (!v.use_empty())
        values[v] = std::move(t);
  }
  return func.emitError() << "function has no return";
}

FailureOr<bool> foldWithExecutor(Operation *op, OpBuilder &builder,
                                 llvm::SmallVectorImpl<Value> *replacements,
                                 int64_t maxElements) {
  if (llvm::isa<ConstantOp>(op) || op->getNumResults() == 0 ||
      !KernelRegistry::get().lookup(op))
    return false;
  for (Type t : op->getResultTypes()) {
    auto shaped = llvm::dyn_cast<ShapedType>(t);
    if (!shaped || !shaped.hasStaticShape() || shaped.getNumElements() > maxElements)
      return false;
  }
  llvm::SmallVector<Tensor> operands;
  for (Value v : op->getOperands()) {
    auto constant = v.getDefiningOp<ConstantOp>();
    if (!constant)
      return false;
    auto tensor = Tensor::fromAttr(constant.getValue());
    if (failed(tensor))
      return false;
    operands.push_back(std::move(*tensor));
  }
  llvm::SmallVector<Tensor> results;
  if (failed(runOp(op, operands, results, ExecOptions{})))
    return failure();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(op);
  for (auto [v, t] : llvm::zip(op->getResults(), results)) {
    auto constant =
        builder.create<ConstantOp>(op->getLoc(), t.toAttr(op->getContext()));
    v.replaceAllUsesWith(constant.getResult());
    if (replacements)
      replacements->push_back(constant.getResult());
  }
  op->erase();
  return true;
}

} // namespace ppc
