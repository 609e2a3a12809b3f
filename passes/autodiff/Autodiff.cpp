//===- Autodiff.cpp - reverse-mode differentiation of @forward ------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Provenance.h"
#include "passes/autodiff/Gradients.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

bool isLowPrecision(Type type) {
  Type element = getElementTypeOrSelf(type);
  return element.isBF16() || element.isF16();
}

/// Runs the op's gradient rule; for a bf16 or f16 op the registry computes
/// in f32, on an f32 copy of the op whose results stand for the op's own
/// rounded results cast to f32, with the result gradients cast to f32 and
/// the operand gradients cast back.
LogicalResult runRule(const GradientRegistry &registry, const GradientRequest &request,
                      llvm::SmallVectorImpl<Value> &operandGrads) {
  const GradientRule &rule = *registry.lookup(request.op);
  Operation *op = request.op;
  bool low = llvm::any_of(op->getOperandTypes(), isLowPrecision) ||
             llvm::any_of(op->getResultTypes(), isLowPrecision);
  if (!registry.isComputedInF32(op) || !low)
    return rule(request, operandGrads);
  OpBuilder &b = request.builder;
  Location loc = op->getLoc();
  auto toF32 = [&](Value v) -> Value {
    if (!v || !isLowPrecision(v.getType()))
      return v;
    return b.create<CastOp>(loc, llvm::cast<RankedTensorType>(v.getType()).clone(b.getF32Type()),
                            v);
  };
  llvm::SmallVector<Value> results;
  for (Value r : op->getResults())
    results.push_back(toF32(r));
  IRMapping mapping;
  for (Value v : op->getOperands())
    mapping.map(v, toF32(v));
  Operation *copy = b.clone(*op, mapping);
  for (Value r : copy->getResults())
    if (isLowPrecision(r.getType()))
      r.setType(llvm::cast<RankedTensorType>(r.getType()).clone(b.getF32Type()));
  llvm::SmallVector<Value> resultGrads;
  for (Value g : request.resultGrads)
    resultGrads.push_back(toF32(g));
  GradientRequest inner{b, copy, resultGrads, request.wanted};
  if (failed(rule(inner, operandGrads)))
    return failure();
  for (auto [copied, rounded] : llvm::zip(copy->getResults(), results))
    copied.replaceAllUsesWith(rounded);
  copy->erase();
  for (auto [grad, operand] : llvm::zip(operandGrads, op->getOperands()))
    if (grad && grad.getType() != operand.getType())
      grad = b.create<CastOp>(loc, operand.getType(), grad);
  return success();
}

bool isFloatTensor(Value v) { return llvm::isa<FloatType>(getElementTypeOrSelf(v.getType())); }

/// Values on a path from a parameter to the loss: only they need adjoints.
llvm::DenseSet<Value> activeValues(func::FuncOp func, Value loss,
                                   const GradientRegistry &registry) {
  Block &body = func.getBody().front();
  llvm::DenseSet<Value> varied, useful, active;
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    if (func.getArgAttr(i, PpcDialect::kParamAttrName) && isFloatTensor(arg))
      varied.insert(arg);
  for (Operation &op : body) {
    if (registry.isNonDifferentiable(&op))
      continue;
    if (llvm::any_of(op.getOperands(), [&](Value v) { return varied.contains(v); }))
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          varied.insert(r);
  }
  useful.insert(loss);
  for (Operation &op : llvm::reverse(body))
    if (llvm::any_of(op.getResults(), [&](Value r) { return useful.contains(r); }))
      for (Value v : op.getOperands())
        useful.insert(v);
  for (Value v : varied)
    if (useful.contains(v))
      active.insert(v);
  return active;
}

LogicalResult differentiate(func::FuncOp func) {
  const GradientRegistry &registry = GradientRegistry::get();
  Block &body = func.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  llvm::DenseSet<Value> active = activeValues(func, loss, registry);

  // Every op the gradient flows through needs a rule; report all at once.
  bool missing = false;
  for (Operation &op : body) {
    if (registry.lookup(&op) || registry.isNonDifferentiable(&op))
      continue;
    if (llvm::any_of(op.getResults(), [&](Value r) { return active.contains(r); })) {
      op.emitError() << "'" << op.getName() << "' has no gradient rule, and it "
                     << "lies on a path from a parameter to the loss";
      missing = true;
    }
  }
  if (missing)
    return failure();

  OpBuilder builder(ret);
  llvm::SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator()) {
    op.setAttr(kForwardOpAttrName, builder.getI64IntegerAttr(forwardOps.size()));
    forwardOps.push_back(&op);
  }
  llvm::DenseMap<Value, Value> adjoint;
  adjoint[loss] = builder.create<ConstantOp>(
      loss.getLoc(), DenseElementsAttr::get(llvm::cast<RankedTensorType>(loss.getType()),
                                            builder.getFloatAttr(getElementTypeOrSelf(loss), 1.0)));
  // Everything built from here on is the backward of one forward op (the
  // seed, of the op that computes the loss).
  auto markBackward = [&](Operation *from, int64_t index) {
    for (Operation *op = from; op != ret.getOperation(); op = op->getNextNode())
      op->setAttr(kBackwardOfAttrName, builder.getI64IntegerAttr(index));
  };
  if (Operation *def = loss.getDefiningOp())
    markBackward(adjoint[loss].getDefiningOp(), *intAttrOf(def, kForwardOpAttrName));
  for (int64_t index = forwardOps.size() - 1; index >= 0; --index) {
    Operation *op = forwardOps[index];
    if (registry.isNonDifferentiable(op))
      continue;
    Operation *last = ret->getPrevNode();
    llvm::SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(active.contains(r) ? adjoint.lookup(r) : Value());
      any |= static_cast<bool>(resultGrads.back());
    }
    if (!any)
      continue;
    llvm::SmallVector<bool> wanted;
    for (Value v : op->getOperands())
      wanted.push_back(active.contains(v));
    if (llvm::none_of(wanted, [](bool w) { return w; }))
      continue;
    llvm::SmallVector<Value> operandGrads;
    GradientRequest request{builder, op, resultGrads, wanted};
    if (failed(runRule(registry, request, operandGrads)))
      return failure();
    for (auto [operand, grad, want] : llvm::zip(op->getOperands(), operandGrads, wanted)) {
      if (!grad || !want)
        continue;
      if (grad.getType() != operand.getType())
        return op->emitError() << "gradient rule produced " << grad.getType()
                               << " for an operand of type " << operand.getType();
      Value &acc = adjoint[operand];
      acc = acc ? builder.create<AddOp>(op->getLoc(), acc, grad).getResult() : grad;
    }
    if (last->getNextNode() != ret.getOperation())
      markBackward(last->getNextNode(), index);
  }

  llvm::SmallVector<Value> results{loss};
  llvm::SmallVector<DictionaryAttr> resultAttrs{builder.getDictionaryAttr(
      builder.getNamedAttr(PpcDialect::kOutputAttrName, builder.getStringAttr("loss")))};
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    auto name = func.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName);
    if (!name || !isFloatTensor(arg))
      continue;
    Value grad = adjoint.lookup(arg);
    if (!grad)
      grad = zerosLike(builder, func.getLoc(), llvm::cast<RankedTensorType>(arg.getType()));
    results.push_back(grad);
    resultAttrs.push_back(
        builder.getDictionaryAttr(builder.getNamedAttr(PpcDialect::kGradAttrName, name)));
  }
  ret->setOperands(results);
  func.setType(builder.getFunctionType(func.getArgumentTypes(), ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  return success();
}

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError() << "no @forward function to differentiate";
      return signalPassFailure();
    }
    auto resultType = forward.getNumResults() == 1
                          ? llvm::dyn_cast<RankedTensorType>(forward.getResultTypes()[0])
                          : RankedTensorType();
    if (!resultType || resultType.getRank() != 0 ||
        !llvm::isa<FloatType>(resultType.getElementType())) {
      forward.emitError() << "@forward must return one float scalar (the loss); "
                             "run -ppc-append-loss first";
      return signalPassFailure();
    }
    auto grad = llvm::cast<func::FuncOp>(forward->clone());
    grad.setSymName("forward_grad");
    SymbolTable(module).insert(grad, std::next(Block::iterator(forward)));
    if (failed(differentiate(grad)))
      return signalPassFailure();
  }
};
} // namespace
} // namespace ppc
