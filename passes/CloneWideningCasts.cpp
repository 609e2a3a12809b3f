//===- CloneWideningCasts.cpp - a widening cast computed in each reader ---===//
//
// Under bf16 a weight's gradient comes out of its GEMM in bf16 and is cast
// to f32 once; the gradient norm's square and the optimizer's update both
// read that f32 copy, so codegen stores it (4 bytes an element, written
// once and read once more) where the bf16 gradient (2 bytes) could be read
// by each reader and widened in its own kernel. This pass gives each
// elementwise reader of a widening float cast its own cast, placed just
// before it and carrying the reader's attributes (its micro-batch, its
// optimizer tag), so that each joins its reader's fused kernel and the f32
// copy is never stored. The same holds for a norm's output gradient, read by
// its scale's gradient (elementwise, then a sum) and its bias's (a sum): a
// reduction of a cast is one kernel reading the narrow values. Widening is
// exact, so the results are the same bit for bit. Casts read by anything
// that does not fuse with its operands (a GEMM, a collective) are left as
// they are: that reader needs the f32 copy anyway.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_CLONEWIDENINGCASTS
#include "passes/Passes.h.inc"

namespace {

/// Whether `cast` converts a float type to a wider one.
bool widens(CastOp cast) {
  auto from = llvm::dyn_cast<FloatType>(getElementTypeOrSelf(cast.getOperand().getType()));
  auto to = llvm::dyn_cast<FloatType>(getElementTypeOrSelf(cast.getType()));
  return from && to && from.getWidth() < to.getWidth();
}

/// Whether codegen computes `op` in the fused kernel of its operands:
/// elementwise ops, and the reductions that end a fused group.
bool fusesWithItsOperands(Operation *op) {
  return llvm::isa<ElementwiseOpInterface>(op) || !fusableReduction(op).empty();
}

struct CloneWideningCasts : impl::CloneWideningCastsBase<CloneWideningCasts> {
  void runOnOperation() override {
    llvm::SmallVector<CastOp> casts;
    getOperation().walk([&](CastOp cast) {
      if (widens(cast))
        casts.push_back(cast);
    });
    for (CastOp cast : casts) {
      if (llvm::any_of(cast->getUsers(), [&](Operation *user) {
            return !fusesWithItsOperands(user) || user->getBlock() != cast->getBlock();
          }))
        continue;
      // The readers, each once, in program order.
      llvm::SmallVector<Operation *> readers(cast->getUsers());
      llvm::sort(readers, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
      for (Operation *reader : llvm::drop_begin(readers)) {
        OpBuilder builder(reader);
        auto copy = builder.create<CastOp>(cast.getLoc(), cast.getType(), cast.getOperand());
        copy->setDiscardableAttrs(reader->getDiscardableAttrDictionary());
        reader->replaceUsesOfWith(cast.getResult(), copy.getResult());
      }
    }
  }
};

} // namespace
} // namespace ppc
