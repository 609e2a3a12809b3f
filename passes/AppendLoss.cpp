//===- AppendLoss.cpp - make @forward return the training loss ------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "runtime/Printable.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_APPENDLOSS
#include "passes/Passes.h.inc"

namespace {

/// The name a function result or argument carries, for messages.
StringAttr attrName(func::FuncOp func, unsigned i, bool result, StringRef attr) {
  return result ? func.getResultAttrOfType<StringAttr>(i, attr)
                : func.getArgAttrOfType<StringAttr>(i, attr);
}

/// Appends mean token cross-entropy of `logits` [B, T, V] against a new
/// `labels` argument [B, T] placed after the graph input `tokens`.
LogicalResult appendCrossEntropy(func::FuncOp func, unsigned tokensIndex) {
  auto ret = llvm::cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value logits = ret.getOperand(0);
  auto logitsType = llvm::cast<RankedTensorType>(logits.getType());
  auto tokensType = llvm::cast<RankedTensorType>(func.getArgument(tokensIndex).getType());
  int64_t b = logitsType.getDimSize(0), t = logitsType.getDimSize(1), v = logitsType.getDimSize(2);
  OpBuilder builder(func.getContext());
  Location loc = NameLoc::get(builder.getStringAttr("cross_entropy"));
  func.insertArgument(tokensIndex + 1, tokensType,
                      builder.getDictionaryAttr(builder.getNamedAttr(
                          PpcDialect::kInputAttrName, builder.getStringAttr("labels"))),
                      loc);
  Value labels = func.getArgument(tokensIndex + 1);

  builder.setInsertionPoint(ret);
  Value logProbs = builder.create<LogSoftmaxOp>(loc, logits, 2);
  Value flatLogProbs = builder.create<ReshapeOp>(
      loc, RankedTensorType::get({b * t, v}, logitsType.getElementType()), logProbs);
  Value flatLabels = builder.create<ReshapeOp>(
      loc, RankedTensorType::get({b * t}, tokensType.getElementType()), labels);
  Value loss = builder.create<NllLossOp>(loc, flatLogProbs, flatLabels, Value(),
                                         LossReduction::Mean, IntegerAttr());
  ret->setOperands(loss);
  func.setType(builder.getFunctionType(func.getArgumentTypes(), loss.getType()));
  func.setResultAttr(0, PpcDialect::kOutputAttrName, builder.getStringAttr("loss"));
  return success();
}

struct AppendLossPass : impl::AppendLossBase<AppendLossPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      module.emitError() << "no @forward function to train";
      return signalPassFailure();
    }
    if (func.getNumResults() != 1) {
      func.emitError() << "the model has " << func.getNumResults()
                       << " outputs; training needs one (a scalar loss, or "
                          "logits [B, T, V])";
      return signalPassFailure();
    }
    auto type = llvm::cast<RankedTensorType>(func.getResultTypes()[0]);
    StringAttr output = attrName(func, 0, true, PpcDialect::kOutputAttrName);
    std::string outputName = output ? output.getValue().str() : "0";
    if (type.getRank() == 0 && llvm::isa<FloatType>(type.getElementType()))
      return; // The model computes its own loss.

    // Logits [B, T, V] from exactly one integer input [B, T].
    std::optional<unsigned> tokens;
    unsigned integerInputs = 0;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto argType = llvm::cast<RankedTensorType>(func.getArgument(i).getType());
      if (!attrName(func, i, false, PpcDialect::kInputAttrName) ||
          !llvm::isa<IntegerType>(argType.getElementType()))
        continue;
      ++integerInputs;
      tokens = i;
    }
    bool isLogits = type.getRank() == 3 && llvm::isa<FloatType>(type.getElementType());
    if (!isLogits || integerInputs != 1 ||
        llvm::cast<RankedTensorType>(func.getArgument(*tokens).getType()).getShape() !=
            type.getShape().drop_back()) {
      func.emitError() << "graph output '" << printable(outputName) << "' (" << type
                       << ") is neither a scalar loss nor logits [B, T, V] "
                          "computed from one integer input [B, T]";
      return signalPassFailure();
    }
    if (failed(appendCrossEntropy(func, *tokens)))
      return signalPassFailure();
  }
};
} // namespace
} // namespace ppc
