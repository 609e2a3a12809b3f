//===- Interpreter.cpp - runs ppc IR on the CPU ---------------------------===//

#include "executor/Interpreter.h"
#include "ir/PpcOps.h"
#include "runtime/CheckedSize.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <array>
#include <unistd.h>

using namespace mlir;

namespace ppc {

LogicalResult checkResults(Operation *op, llvm::ArrayRef<Tensor> results,
                           const ExecOptions &options) {
  if (results.size() != op->getNumResults())
    return op->emitError() << "executor returned " << results.size() << " results, expected "
                           << op->getNumResults();
  for (auto [i, t] : llvm::enumerate(results)) {
    auto type = llvm::cast<ShapedType>(op->getResult(i).getType());
    if (t.shape() != type.getShape() || t.dtype() != resultDType(op, i, options))
      return op->emitError() << "executor result " << i << " has dtype " << dtypeName(t.dtype())
                             << " and " << t.rank() << " dims, expected " << type;
  }
  return success();
}

/// The machine's physical memory in bytes (INT64_MAX when unknown).
static int64_t hostMemoryBytes() {
  static const int64_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 && pages <= INT64_MAX / size ? int64_t(pages) * size : INT64_MAX;
  }();
  return bytes;
}

LogicalResult checkHostSizes(Operation *op) {
  for (auto [i, type] : llvm::enumerate(op->getResultTypes())) {
    auto shaped = llvm::dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasStaticShape())
      continue;
    std::string held = "elements held in 8 bytes each";
    if (auto dtype = dtypeOf(shaped.getElementType()); succeeded(dtype))
      held = (dtypeName(*dtype) + " held in 8 bytes each").str();
    llvm::Expected<int64_t> bytes = checkedTensorBytes(shaped.getShape(), 8, held);
    if (!bytes)
      return op->emitError() << "result " << i << ": " << llvm::toString(bytes.takeError());
    // Within the limit but past what this machine has: an allocation that
    // would fail (and abort) or drive the machine into swap.
    if (*bytes > hostMemoryBytes())
      return op->emitError() << "result " << i << ": shape " << shapeString(shaped.getShape())
                             << " of " << held << " takes " << *bytes
                             << " bytes, more than this machine's memory (" << hostMemoryBytes()
                             << " bytes)";
  }
  return success();
}

LogicalResult runKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                        llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &options) {
  if (failed(checkHostSizes(op)))
    return failure();
  const Kernel *kernel = KernelRegistry::get().lookup(op);
  if (!kernel && op->hasTrait<CollectiveTrait>())
    return op->emitError() << "'" << op->getName()
                           << "' combines the ranks of a mesh; run the program "
                              "with the SPMD executor";
  if (!kernel)
    return op->emitError() << "the reference executor has no kernel for '" << op->getName() << "'";
  if (failed((*kernel)(op, operands, results, options)))
    return failure();
  return checkResults(op, results, options);
}

/// Bytes of `tensor` in its storage dtype.
static int64_t storageBytes(const Tensor &tensor) {
  return tensor.numElements() * byteWidth(tensor.dtype());
}

FailureOr<ExecutionFrame> ExecutionFrame::create(func::FuncOp func,
                                                 llvm::ArrayRef<Tensor> arguments) {
  Block &body = func.getBody().front();
  if (arguments.size() != body.getNumArguments())
    return func.emitError() << "expected " << body.getNumArguments() << " arguments, got "
                            << arguments.size();
  ExecutionFrame frame;
  for (auto [arg, tensor] : llvm::zip(body.getArguments(), arguments)) {
    frame.values[arg] = tensor;
    frame.heldBytes[onHost(arg)] += storageBytes(tensor);
    unsigned i = arg.getArgNumber();
    if (func.getArgAttr(i, PpcDialect::kParamAttrName) ||
        func.getArgAttr(i, PpcDialect::kStateAttrName))
      frame.carried.insert(arg);
  }
  frame.bytesAtOp = frame.peak = frame.heldBytes;
  for (Operation &op : body)
    for (Value v : op.getOperands())
      ++frame.usesLeft[v];
  return frame;
}

FailureOr<llvm::SmallVector<Tensor>> ExecutionFrame::takeOperands(Operation &op) {
  opTaken = &op;
  bytesAtOp = heldBytes;
  for (int side : {0, 1})
    peak[side] = std::max(peak[side], bytesAtOp[side]);
  llvm::SmallVector<Tensor> operands;
  for (Value v : op.getOperands()) {
    auto it = values.find(v);
    if (it == values.end())
      return op.emitError() << "operand has no value";
    if (--usesLeft[v] == 0) {
      if (!carried.contains(v))
        heldBytes[onHost(v)] -= storageBytes(it->second);
      operands.push_back(std::move(it->second));
      values.erase(it);
    } else {
      operands.push_back(it->second);
    }
  }
  return operands;
}

void ExecutionFrame::setResults(Operation &op, llvm::MutableArrayRef<Tensor> results) {
  // An op without operands (ppc.recv) may skip takeOperands.
  if (opTaken != &op)
    bytesAtOp = heldBytes;
  std::array<int64_t, 2> resultBytes{};
  for (auto [v, t] : llvm::zip(op.getResults(), results)) {
    resultBytes[onHost(v)] += storageBytes(t);
    if (!v.use_empty()) {
      heldBytes[onHost(v)] += storageBytes(t);
      values[v] = std::move(t);
    }
  }
  for (int side : {0, 1})
    peak[side] = std::max(peak[side], bytesAtOp[side] + resultBytes[side]);
}

LogicalResult ExecutionFrame::runOp(Operation &op, const ExecOptions &options) {
  auto operands = takeOperands(op);
  if (failed(operands))
    return failure();
  llvm::SmallVector<Tensor> results;
  if (failed(runKernel(&op, *operands, results, options)))
    return failure();
  setResults(op, results);
  return success();
}

FailureOr<llvm::SmallVector<Tensor>> runFunction(func::FuncOp func,
                                                 llvm::ArrayRef<Tensor> arguments,
                                                 const ExecOptions &options, RunStats *stats) {
  auto frame = ExecutionFrame::create(func, arguments);
  if (failed(frame))
    return failure();
  for (Operation &op : func.getBody().front()) {
    if (llvm::isa<func::ReturnOp>(op)) {
      auto results = frame->takeOperands(op);
      if (succeeded(results) && stats) {
        stats->peakBytes = frame->peakBytes();
        stats->hostPeakBytes = frame->hostPeakBytes();
      }
      return results;
    }
    if (failed(frame->runOp(op, options)))
      return failure();
  }
  return func.emitError() << "function has no return";
}

FailureOr<bool> foldWithExecutor(Operation *op, OpBuilder &builder,
                                 llvm::SmallVectorImpl<Value> *replacements, int64_t maxElements) {
  if (llvm::isa<ConstantOp>(op) || op->getNumResults() == 0 || !KernelRegistry::get().lookup(op))
    return false;
  for (Type t : op->getResultTypes()) {
    auto shaped = llvm::dyn_cast<ShapedType>(t);
    if (!shaped || !shaped.hasStaticShape() || shaped.getNumElements() > maxElements)
      return false;
  }
  llvm::SmallVector<Tensor> operands;
  for (Value v : op->getOperands()) {
    auto constant = v.getDefiningOp<ConstantOp>();
    // Operands are held at 8 bytes per element too: a huge splat reduced to
    // a small result is left to the program.
    if (!constant || llvm::cast<ShapedType>(v.getType()).getNumElements() > maxElements)
      return false;
    auto tensor = Tensor::fromAttr(constant.getValue());
    if (failed(tensor))
      return false;
    operands.push_back(std::move(*tensor));
  }
  llvm::SmallVector<Tensor> results;
  if (failed(runKernel(op, operands, results, ExecOptions{})))
    return failure();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(op);
  for (auto [v, t] : llvm::zip(op->getResults(), results)) {
    auto constant = builder.create<ConstantOp>(op->getLoc(), t.toAttr(op->getContext()));
    v.replaceAllUsesWith(constant.getResult());
    if (replacements)
      replacements->push_back(constant.getResult());
  }
  op->erase();
  return true;
}

} // namespace ppc
