//===- FoldConstants.cpp - evaluate constant subgraphs --------------------===//

#include "executor/Interpreter.h"
#include "ir/PpcOps.h"
#include "passes/Passes.h"

namespace ppc {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "passes/Passes.h.inc"

namespace {
struct FoldConstantsPass : impl::FoldConstantsBase<FoldConstantsPass> {
  using FoldConstantsBase::FoldConstantsBase;

  void runOnOperation() override {
    mlir::OpBuilder builder(&getContext());
    // Ops come in definition order, so a folded op's users see constants.
    llvm::SmallVector<mlir::Operation *> ops;
    getOperation().walk([&](mlir::Operation *op) {
      if (op->getDialect() && llvm::isa<PpcDialect>(op->getDialect()))
        ops.push_back(op);
    });
    for (mlir::Operation *op : ops)
      if (mlir::failed(foldWithExecutor(op, builder, nullptr, maxElements)))
        return signalPassFailure();
  }
};
} // namespace
} // namespace ppc
