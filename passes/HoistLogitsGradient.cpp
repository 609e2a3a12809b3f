//===- HoistLogitsGradient.cpp - the logits' gradient after their lse -----===//
//
// After ppc-split-log-softmax, a language model's loss reads the logits
// twice over the whole vocabulary: ppc.log_sum_exp of each row for the
// loss, and, after the loss, the gradient's elementwise kernel, which
// computes exp(x - lse) from the logits again (GPT-2 124M, 8 x 1024 tokens
// in bf16: 0.82 GB each, 0.28 ms of an H100's bandwidth). The gradient
// depends on the loss only through constants (the mean's 1/N, a loss
// scale argument), so it can run as soon as the log_sum_exp has: this pass
// moves the elementwise chain that reads the log_sum_exp and has the
// logits' rows (the gradient), with what it reads that comes later (the
// one-hot's targets), to just after the log_sum_exp. The loss's own
// difference x - lse, which only the nll_loss reads (code generation folds
// it into the loss's kernel), stays with the loss: moved up, it would be
// held, at the logits' size, across the gradient's ops. Code generation then computes each row's
// log_sum_exp in the gradient's kernel as it reads the row (FusionPlan::rowLogSumExpOf), and the
// loss, which now follows, reads the log_sum_exp written there.
//
// Only ops without side effects that do not communicate move, in their
// order; nothing moves when the chain depends on what must stay after (the
// loss, or anything else computed from the log_sum_exp outside the chain;
// a collective). The values are the same, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Provenance.h"
#include "passes/memory/Recompute.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_HOISTLOGITSGRADIENT
#include "passes/Passes.h.inc"

namespace {

/// Whether `op` may run earlier than it does: no side effects, no regions,
/// no communication; outside the chain only what the gradient reads besides
/// the logits (the one-hot's targets and classes: elementwise ops,
/// constants, reshapes and slices), nothing ppc-recompute or ppc-offload
/// placed (a recomputed clone, a transfer), and all of the sum's
/// micro-batch.
bool movable(Operation *op, bool inChain, Operation *sum) {
  if (!isPure(op) || op->getNumRegions() != 0 || op->hasTrait<CommunicatesTrait>() ||
      op->hasAttr(kRecomputedAttrName) || llvm::isa<TransferOp>(op))
    return false;
  if (op->getAttr(kMicroBatchAttrName) != sum->getAttr(kMicroBatchAttrName))
    return false;
  return inChain || llvm::isa<ElementwiseOpInterface, ConstantOp, ReshapeOp, SliceOp>(op);
}

/// Whether only nll_losses read `op`'s result, directly or through
/// reshapes: the loss's difference, which stays where it is.
bool readByLossOnly(Operation *op) {
  return !op->use_empty() && llvm::all_of(op->getUsers(), [](Operation *user) {
    return llvm::isa<NllLossOp>(user) || (llvm::isa<ReshapeOp>(user) && readByLossOnly(user));
  });
}

struct HoistLogitsGradient : impl::HoistLogitsGradientBase<HoistLogitsGradient> {
  void runOnOperation() override {
    llvm::SmallVector<LogSumExpOp> sums;
    getOperation().walk([&](LogSumExpOp op) { sums.push_back(op); });
    for (LogSumExpOp sum : sums)
      hoist(sum);
  }

  void hoist(LogSumExpOp sum) {
    auto rows = llvm::cast<RankedTensorType>(sum.getType()).getShape();
    if (rows.empty() ||
        static_cast<int64_t>(sum.getAxis()) + 1 != static_cast<int64_t>(rows.size()))
      return;
    // The chain: elementwise readers of the sum whose results have its rows
    // (its shape but the last dimension), but for the loss's difference, and
    // their elementwise readers of the same shape, transitively.
    auto ofRows = [&](Value v) {
      auto shape = llvm::cast<RankedTensorType>(v.getType()).getShape();
      return shape.size() == rows.size() && shape.drop_back() == rows.drop_back();
    };
    llvm::SetVector<Operation *> chain;
    llvm::SmallVector<Operation *> pending;
    for (Operation *user : sum->getUsers())
      if (llvm::isa<ElementwiseOpInterface>(user) && user->getNumResults() == 1 &&
          ofRows(user->getResult(0)) && !readByLossOnly(user))
        pending.push_back(user);
    while (!pending.empty()) {
      Operation *op = pending.pop_back_val();
      if (op->getBlock() != sum->getBlock() || !chain.insert(op))
        continue;
      for (Operation *user : op->getUsers())
        if (llvm::isa<ElementwiseOpInterface>(user) && user->getNumResults() == 1 &&
            ofRows(user->getResult(0)))
          pending.push_back(user);
    }
    // The ops after the sum that depend on it.
    llvm::DenseSet<Operation *> dependent{sum};
    for (Operation *op = sum->getNextNode(); op; op = op->getNextNode())
      if (llvm::any_of(op->getOperands(), [&](Value v) {
            return v.getDefiningOp() && dependent.contains(v.getDefiningOp());
          }))
        dependent.insert(op);
    // What the chain reads from after the sum, transitively: it all moves,
    // but for what reads the sum outside the chain (the loss), which stays
    // after it.
    llvm::SetVector<Operation *> moving;
    pending.assign(chain.begin(), chain.end());
    while (!pending.empty()) {
      Operation *op = pending.pop_back_val();
      if (op == sum || op->getBlock() != sum->getBlock() || !sum->isBeforeInBlock(op) ||
          !moving.insert(op))
        continue;
      if (!movable(op, chain.contains(op), sum) || (!chain.contains(op) && dependent.contains(op)))
        return;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          pending.push_back(def);
    }
    // In program order, each after the last: their order among themselves
    // is kept, so each still follows what it reads.
    llvm::SmallVector<Operation *> ordered(moving.begin(), moving.end());
    llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    Operation *after = sum;
    for (Operation *op : ordered) {
      op->moveAfter(after);
      after = op;
    }
  }
};

} // namespace
} // namespace ppc
