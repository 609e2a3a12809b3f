//===- ScaleLoss.cpp - --precision fp16: the loss times the loss scale ----===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_SCALELOSS
#include "passes/Passes.h.inc"

namespace {

struct ScaleLossPass : impl::ScaleLossBase<ScaleLossPass> {
  using ScaleLossBase::ScaleLossBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.getNumResults() != 1 ||
        llvm::cast<RankedTensorType>(forward.getResultTypes()[0]).getRank() != 0) {
      module.emitError() << "no @forward returning a scalar loss; run -ppc-append-loss first";
      return signalPassFailure();
    }
    OpBuilder b(&getContext());
    auto scaleType = RankedTensorType::get({}, b.getF64Type());
    unsigned index = forward.getNumArguments();
    forward.insertArgument(index, scaleType,
                           b.getDictionaryAttr(b.getNamedAttr(PpcDialect::kHyperAttrName,
                                                              b.getStringAttr("loss_scale"))),
                           forward.getLoc());
    Value scale = forward.getArgument(index);
    auto ret = llvm::cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    b.setInsertionPoint(ret);
    Location loc = NameLoc::get(b.getStringAttr("loss_scale"));
    Value loss = ret.getOperand(0);
    if (microBatches < 1) {
      module.emitError() << "micro-batches must be >= 1";
      return signalPassFailure();
    }
    // scale / M: each micro-batch's share of the mean, scaled, as torch
    // accumulates `scaler.scale(loss / M).backward()`.
    if (microBatches > 1)
      scale = b.create<DivOp>(
          loc, scale,
          b.create<ConstantOp>(loc,
                               DenseElementsAttr::get(scaleType, b.getF64FloatAttr(microBatches))));
    Value factor = b.create<CastOp>(loc, loss.getType(), scale);
    ret.setOperand(0, b.create<MulOp>(loc, loss, factor));
  }
};

} // namespace
} // namespace ppc
