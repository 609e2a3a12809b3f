//===- SplitLogSoftmax.cpp - a loss's log-softmax as x - log_sum_exp(x) ---===//
//
// The loss of a language model is nll_loss(log_softmax(logits)): the
// log-softmax writes a [tokens, vocabulary] tensor in f32, the loss reads
// one element of each row, and the gradient reads it all again for
// exp(log_softmax) (GPT-2 124M at 8 x 1024 tokens: 1.65 GB written and read
// back, about 1.1 ms of a 20.5 ms step on an H100). Where every reader of a
// log-softmax is an nll_loss (through reshapes) or elementwise, this pass
// computes the per-row ppc.log_sum_exp instead and gives each reader x -
// log_sum_exp(x): an nll_loss picks its elements from the logits in place
// (codegen folds the difference, a widening cast and a window of wider rows
// into its kernel, FusionPlan::foldedInto), and the gradient's elementwise
// kernel computes exp(x - lse) from the logits it reads anyway. Each reader
// gets its own copy of the widening cast and window its logits come through,
// so that each kernel reads them in place.
//
// The values are the log-softmax's up to the rounding of x - (max + log
// sum) against (x - max) - log sum, in the log-softmax's type (f32 for bf16
// logits).
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_SPLITLOGSOFTMAX
#include "passes/Passes.h.inc"

namespace {

/// The reshape chain from a log-softmax's result to an nll_loss's input, its
/// ops each read by the next alone: the first reshape, or null when the
/// log-softmax's `use` is not one.
Operation *lossThroughReshapes(OpOperand &use) {
  Operation *user = use.getOwner();
  Operation *first = user;
  while (auto reshape = llvm::dyn_cast<ReshapeOp>(user)) {
    if (!reshape->hasOneUse())
      return nullptr;
    OpOperand &next = *reshape->getUses().begin();
    user = next.getOwner();
    if (llvm::isa<NllLossOp>(user) && next.getOperandNumber() != 0)
      return nullptr;
  }
  auto loss = llvm::dyn_cast<NllLossOp>(user);
  if (!loss || (user == first && use.getOperandNumber() != 0))
    return nullptr;
  return first;
}

struct SplitLogSoftmax : impl::SplitLogSoftmaxBase<SplitLogSoftmax> {
  void runOnOperation() override {
    llvm::SmallVector<LogSoftmaxOp> candidates;
    getOperation().walk([&](LogSoftmaxOp op) { candidates.push_back(op); });
    for (LogSoftmaxOp op : candidates)
      split(op);
  }

  /// Whether codegen reads `op` in place in a kernel that reads rows of the
  /// last dimension (codegen/Fusion.h, FusionPlan::foldedInto): a cast
  /// widening bf16 or f16 to f32, or a window of whole rows.
  static bool foldsIntoRowReaders(Operation *op) {
    if (auto cast = llvm::dyn_cast<CastOp>(op)) {
      Type from = getElementTypeOrSelf(cast.getInput().getType());
      return (from.isBF16() || from.isF16()) && getElementTypeOrSelf(cast.getType()).isF32();
    }
    auto slice = llvm::dyn_cast<SliceOp>(op);
    if (!slice)
      return false;
    llvm::ArrayRef<int64_t> in =
        llvm::cast<RankedTensorType>(slice.getInput().getType()).getShape();
    if (in.empty() || slice.getSteps().back() != 1)
      return false;
    for (size_t d = 0; d + 1 < in.size(); ++d)
      if (slice.getStarts()[d] != 0 || slice.getLimits()[d] != in[d] || slice.getSteps()[d] != 1)
        return false;
    return true;
  }

  /// The chain of widening casts and row windows `x` is read through,
  /// outermost first, that codegen folds into a reader reading `x` alone
  /// (a copy of anything else would be a copy of the logits per reader).
  static llvm::SmallVector<Operation *> viewChain(Value x) {
    llvm::SmallVector<Operation *> chain;
    while (Operation *def = x.getDefiningOp()) {
      if (!foldsIntoRowReaders(def))
        break;
      chain.push_back(def);
      x = def->getOperand(0);
    }
    return chain;
  }

  /// `x` as read by a new reader: a copy of its view chain, built before
  /// `at` with `at`'s schedule (the original itself when it has none).
  static Value readerCopy(Value x, Operation *at) {
    llvm::SmallVector<Operation *> chain = viewChain(x);
    if (chain.empty())
      return x;
    OpBuilder b(at);
    IRMapping mapping;
    Operation *copy = nullptr;
    for (Operation *op : llvm::reverse(chain)) {
      copy = b.clone(*op, mapping);
      // Where `at` sits in the schedule, not where the original did.
      for (NamedAttribute attr : llvm::to_vector(copy->getDiscardableAttrs()))
        if (attr.getName() != PpcDialect::kShardingsAttrName)
          copy->removeDiscardableAttr(attr.getName());
      copySchedule(at, {copy});
    }
    return copy->getResult(0);
  }

  void split(LogSoftmaxOp logSoftmax) {
    // In f32 or f64 only: a bf16 or f16 shift (max + log sum, ~10 for a
    // large vocabulary) would be rounded by up to 0.03, and exp(x - lse)
    // could exceed 1 (MixedPrecision computes the log-softmax in f32).
    Type element = getElementTypeOrSelf(logSoftmax.getType());
    if (!element.isF32() && !element.isF64())
      return;
    llvm::SmallVector<Operation *> losses;
    llvm::SmallVector<OpOperand *> elementwise;
    for (OpOperand &use : logSoftmax->getUses()) {
      if (Operation *first = lossThroughReshapes(use))
        losses.push_back(first);
      else if (llvm::isa<ElementwiseOpInterface>(use.getOwner()))
        elementwise.push_back(&use);
      else
        return;
    }
    if (losses.empty())
      return;
    Value x = logSoftmax.getInput();
    int64_t axis = logSoftmax.getAxis();
    OpBuilder b(logSoftmax);
    Location loc = logSoftmax.getLoc();
    auto lse = b.create<LogSumExpOp>(loc, readerCopy(x, logSoftmax), axis);
    copySchedule(logSoftmax, {lse});

    // x - lse before `at`, with its schedule.
    auto difference = [&](Operation *at) {
      OpBuilder before(at);
      auto sub = before.create<SubOp>(loc, readerCopy(x, at), lse.getResult());
      copySchedule(at, {sub});
      return sub.getResult();
    };
    for (Operation *first : losses)
      first->setOperand(0, difference(first));
    if (!elementwise.empty()) {
      // One difference for all: the first reader's place (program order).
      Operation *earliest = elementwise.front()->getOwner();
      for (OpOperand *use : elementwise)
        if (use->getOwner()->isBeforeInBlock(earliest))
          earliest = use->getOwner();
      Value shared = difference(earliest);
      for (OpOperand *use : elementwise)
        use->set(shared);
    }
    logSoftmax.erase();
    // The original view chain, as far as nothing else reads it.
    for (Operation *op : viewChain(x)) {
      if (!op->use_empty())
        break;
      op->erase();
    }
  }
};

} // namespace
} // namespace ppc
