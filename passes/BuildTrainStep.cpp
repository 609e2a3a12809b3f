//===- BuildTrainStep.cpp - micro-batches, gradients, optimizer -----------===//

#include "ir/PpcOps.h"
#include "passes/Optimizers.h"
#include "passes/Passes.h"
#include "passes/Provenance.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/Sequence.h"

#include <cmath>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_BUILDTRAINSTEP
#include "passes/Passes.h.inc"

namespace {

struct BuildTrainStepPass : impl::BuildTrainStepBase<BuildTrainStepPass> {
  using BuildTrainStepBase::BuildTrainStepBase;

  void runOnOperation() override;

private:
  FailureOr<OptimizerConfig> optimizerConfig(Operation *anchor);
  /// The hyper-parameters the step takes as arguments, with their values:
  /// those that are not structural zeros (momentum, weight decay and clipping
  /// compiled as 0 are left out of the update altogether).
  llvm::SmallVector<std::pair<llvm::StringRef, double>>
  hyperParameters(const OptimizerConfig &config);
  Value learningRate(OpBuilder &b, Location loc, Value stepF64, Value peak, Value minimum);
  Value microBatchSlice(OpBuilder &b, Location loc, Value batch, RankedTensorType microType,
                        int64_t j);
};

/// Micro-batch `j` of `batch` [dp * M * b, ...]: viewed as [dp, M, b, ...],
/// the slice [:, j] reshaped to [dp * b, ...] = `microType`.
Value BuildTrainStepPass::microBatchSlice(OpBuilder &b, Location loc, Value batch,
                                          RankedTensorType microType, int64_t j) {
  int64_t perRank = microType.getDimSize(0) / dataParallel;
  llvm::SmallVector<int64_t> view{dataParallel, microBatches, perRank};
  llvm::append_range(view, microType.getShape().drop_front());
  Value viewed = b.create<ReshapeOp>(loc, microType.clone(view), batch);
  llvm::SmallVector<int64_t> starts(view.size(), 0), limits(view), steps(view.size(), 1);
  starts[1] = j;
  limits[1] = j + 1;
  Value slice = b.create<SliceOp>(loc, viewed, starts, limits, steps);
  return b.create<ReshapeOp>(loc, microType, slice);
}

FailureOr<OptimizerConfig> BuildTrainStepPass::optimizerConfig(Operation *anchor) {
  OptimizerConfig config;
  if (optimizer == "sgd")
    config.kind = OptimizerConfig::Kind::Sgd;
  else if (optimizer != "adamw")
    return anchor->emitError() << "optimizer '" << optimizer << "' is not one of sgd, adamw";
  config.momentum = momentum;
  config.beta1 = beta1;
  config.beta2 = beta2;
  config.eps = eps;
  config.weightDecay = weightDecay;
  if (lrSchedule != "constant" && lrSchedule != "cosine")
    return anchor->emitError() << "lr schedule '" << lrSchedule
                               << "' is not one of constant, cosine";
  if (microBatches < 1 || dataParallel < 1 || warmupSteps < 0 || gradClip < 0)
    return anchor->emitError() << "micro-batches and data-parallel must be >= 1, "
                                  "warmup steps and grad clip >= 0";
  return config;
}

llvm::SmallVector<std::pair<llvm::StringRef, double>>
BuildTrainStepPass::hyperParameters(const OptimizerConfig &config) {
  llvm::SmallVector<std::pair<llvm::StringRef, double>> hypers{{"lr", lr}};
  if (lrSchedule == "cosine")
    hypers.push_back({"min_lr", minLr});
  if (config.kind == OptimizerConfig::Kind::AdamW) {
    hypers.push_back({"beta1", config.beta1});
    hypers.push_back({"beta2", config.beta2});
    hypers.push_back({"eps", config.eps});
  } else if (config.momentum != 0) {
    hypers.push_back({"momentum", config.momentum});
  }
  if (config.weightDecay != 0)
    hypers.push_back({"weight_decay", config.weightDecay});
  if (gradClip > 0)
    hypers.push_back({"grad_clip", gradClip});
  // Dynamic loss scaling: the scale, and the steps skipped so far (AdamW's
  // step count is the steps taken), both kept by the driver. The defaults
  // are the driver's starting values.
  if (lossScaling) {
    hypers.push_back({"loss_scale", 65536.0});
    hypers.push_back({"skipped_steps", 0.0});
  }
  return hypers;
}

/// lr(s) for the 0-based step s: linear warm-up over `warmupSteps` steps,
/// then constant or cosine decay to `minimum` at `totalSteps`.
Value BuildTrainStepPass::learningRate(OpBuilder &b, Location loc, Value s, Value peak,
                                       Value minimum) {
  auto c = [&](double v) { return f64Scalar(b, loc, v); };
  Value decayed = peak;
  if (lrSchedule == "cosine") {
    double span = std::max<int64_t>(1, totalSteps - warmupSteps);
    Value progress = b.create<DivOp>(loc, b.create<SubOp>(loc, s, c(warmupSteps)), c(span));
    Value cosine = b.create<CosOp>(loc, b.create<MulOp>(loc, progress, c(M_PI)));
    Value factor = b.create<MulOp>(loc, c(0.5), b.create<AddOp>(loc, c(1.0), cosine));
    decayed = b.create<AddOp>(loc, minimum,
                              b.create<MulOp>(loc, b.create<SubOp>(loc, peak, minimum), factor));
  }
  if (warmupSteps == 0)
    return decayed;
  Value warm = b.create<DivOp>(loc, b.create<MulOp>(loc, peak, b.create<AddOp>(loc, s, c(1.0))),
                               c(warmupSteps));
  Value inWarmup = b.create<LessOp>(loc, s, c(warmupSteps));
  return b.create<WhereOp>(loc, inWarmup, warm, decayed);
}

void BuildTrainStepPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto grad = module.lookupSymbol<func::FuncOp>("forward_grad");
  if (!grad) {
    module.emitError() << "no @forward_grad; run -ppc-autodiff first";
    return signalPassFailure();
  }
  auto config = optimizerConfig(grad);
  if (failed(config))
    return signalPassFailure();
  llvm::SmallVector<StringRef> stateKinds = optimizerStateKinds(*config);
  MLIRContext *ctx = &getContext();
  OpBuilder b(ctx);
  Location loc = NameLoc::get(b.getStringAttr("train_step"));

  // The signature: step, parameters, state per parameter, then the graph
  // inputs with their batch dimension multiplied by the micro-batch count.
  llvm::SmallVector<Type> argTypes{RankedTensorType::get({}, b.getI64Type())};
  llvm::SmallVector<DictionaryAttr> argAttrs{
      b.getDictionaryAttr(b.getNamedAttr(PpcDialect::kStepAttrName, b.getUnitAttr()))};
  llvm::SmallVector<unsigned> paramArgs, inputArgs, hyperArgs;
  for (unsigned i = 0; i < grad.getNumArguments(); ++i) {
    if (grad.getArgAttr(i, PpcDialect::kParamAttrName))
      paramArgs.push_back(i);
    else if (grad.getArgAttr(i, PpcDialect::kHyperAttrName))
      hyperArgs.push_back(i); // The loss scale (ppc-scale-loss).
    else
      inputArgs.push_back(i);
  }
  if (lossScaling != !hyperArgs.empty()) {
    grad.emitError() << (lossScaling ? "loss scaling without a loss_scale argument; run "
                                       "-ppc-scale-loss first"
                                     : "@forward_grad takes a hyper-parameter, but loss "
                                       "scaling is off");
    return signalPassFailure();
  }
  for (unsigned i : paramArgs) {
    argTypes.push_back(grad.getArgument(i).getType());
    argAttrs.push_back(grad.getArgAttrDict(i));
  }
  for (StringRef kind : stateKinds) {
    for (unsigned i : paramArgs) {
      argTypes.push_back(grad.getArgument(i).getType());
      auto name = grad.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName);
      argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          PpcDialect::kStateAttrName, b.getStringAttr(kind + ":" + name.getValue()))));
    }
  }
  for (unsigned i : inputArgs) {
    auto type = llvm::cast<RankedTensorType>(grad.getArgument(i).getType());
    if (type.getRank() == 0) {
      grad.emitError() << "graph input " << i << " is a scalar; a batch needs dimension 0";
      return signalPassFailure();
    }
    if (type.getDimSize(0) % dataParallel != 0) {
      grad.emitError() << "graph input " << i << " has a batch of " << type.getDimSize(0)
                       << ", which the " << dataParallel << " data-parallel ranks cannot share";
      return signalPassFailure();
    }
    llvm::SmallVector<int64_t> shape(type.getShape());
    shape[0] *= microBatches;
    argTypes.push_back(type.clone(shape));
    argAttrs.push_back(grad.getArgAttrDict(i));
  }
  // Hyper-parameters last, as rank-0 f64 arguments.
  auto hypers = hyperParameters(*config);
  unsigned firstHyper = argTypes.size();
  for (auto [name, value] : hypers) {
    (void)value;
    argTypes.push_back(RankedTensorType::get({}, b.getF64Type()));
    argAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(PpcDialect::kHyperAttrName, b.getStringAttr(name))));
  }

  b.setInsertionPointAfter(grad);
  auto step = b.create<func::FuncOp>(loc, "train_step", b.getFunctionType(argTypes, {}));
  step.setAllArgAttrs(argAttrs);
  Block *body = step.addEntryBlock();
  b.setInsertionPointToEnd(body);
  unsigned numParams = paramArgs.size();
  auto param = [&](unsigned p) { return body->getArgument(1 + p); };
  auto stateArg = [&](unsigned k, unsigned p) {
    return body->getArgument(1 + numParams + k * numParams + p);
  };
  auto input = [&](unsigned n) {
    return body->getArgument(1 + numParams * (1 + stateKinds.size()) + n);
  };

  auto hyper = [&](StringRef name) -> Value {
    for (auto [k, entry] : llvm::enumerate(hypers))
      if (entry.first == name)
        return body->getArgument(firstHyper + k);
    return nullptr;
  };

  // Loss and gradients of each micro-batch, summed.
  auto gradReturn = llvm::cast<func::ReturnOp>(grad.getBody().front().getTerminator());
  Value lossSum;
  llvm::SmallVector<Value> gradSums(numParams);
  for (int64_t j = 0; j < microBatches; ++j) {
    Operation *last = body->empty() ? nullptr : &body->back();
    IRMapping mapping;
    for (auto [p, i] : llvm::enumerate(paramArgs))
      mapping.map(grad.getArgument(i), param(p));
    for (unsigned i : hyperArgs) {
      auto name = grad.getArgAttrOfType<StringAttr>(i, PpcDialect::kHyperAttrName);
      Value value = hyper(name);
      if (!value) {
        grad.emitError() << "@forward_grad takes the hyper-parameter '" << name.getValue()
                         << "', which the step does not have";
        return signalPassFailure();
      }
      mapping.map(grad.getArgument(i), value);
    }
    for (auto [n, i] : llvm::enumerate(inputArgs)) {
      Value whole = input(n);
      if (microBatches > 1)
        whole = microBatchSlice(b, loc, whole,
                                llvm::cast<RankedTensorType>(grad.getArgument(i).getType()), j);
      mapping.map(grad.getArgument(i), whole);
    }
    for (Operation &op : grad.getBody().front().without_terminator())
      b.clone(op, mapping);
    for (Operation *op = last ? last->getNextNode() : &body->front(); op; op = op->getNextNode())
      op->setAttr(kMicroBatchAttrName, b.getI64IntegerAttr(j));
    Value loss = mapping.lookup(gradReturn.getOperand(0));
    lossSum = lossSum ? b.create<AddOp>(loc, lossSum, loss).getResult() : loss;
    for (unsigned p = 0; p < numParams; ++p) {
      Value g = mapping.lookup(gradReturn.getOperand(1 + p));
      markGradient(g, kMicroBatchGradAttrName, p);
      gradSums[p] = gradSums[p] ? b.create<AddOp>(loc, gradSums[p], g).getResult() : g;
    }
  }
  // The mean over micro-batches (with loss scaling, each micro-batch's
  // loss is already its share of it: ppc-scale-loss).
  auto mean = [&](Value sum) -> Value {
    if (microBatches == 1 || lossScaling)
      return sum;
    Type element = getElementTypeOrSelf(sum.getType());
    return b.create<DivOp>(loc, sum, castScalar(b, loc, f64Scalar(b, loc, microBatches), element));
  };
  Value loss = mean(lossSum);
  llvm::SmallVector<Value> grads;
  for (auto [p, g] : llvm::enumerate(gradSums)) {
    grads.push_back(mean(g));
    markGradient(grads.back(), kStepGradAttrName, p);
  }

  Type lossType = getElementTypeOrSelf(loss.getType());
  // The sum, as a loss-typed scalar, of every element of `term(g)` over the
  // gradients (null without parameters).
  auto sumOverGradients = [&](llvm::function_ref<Value(Value)> term) {
    Value total;
    for (Value g : grads) {
      auto type = llvm::cast<RankedTensorType>(g.getType());
      auto axes = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
      Value s = castScalar(b, loc, b.create<ReduceSumOp>(loc, term(g), axes, false), lossType);
      total = total ? b.create<AddOp>(loc, total, s).getResult() : s;
    }
    return total;
  };
  // Loss scaling (torch's GradScaler): the loss and the gradients divided
  // by the scale again (times its f32 reciprocal, as unscale_ does), and
  // whether any gradient is not finite: the sum over every gradient of
  // g * 0 is 0, or NaN when one is inf or NaN. One sum, reduced over every
  // mesh axis the gradients are split on, as the gradient norm is.
  Value overflow;
  if (lossScaling) {
    Value scale = hyper("loss_scale");
    loss = b.create<DivOp>(loc, loss, castScalar(b, loc, scale, lossType));
    Value inverse = b.create<DivOp>(loc, f64Scalar(b, loc, 1.0), scale);
    for (Value &g : grads)
      g = b.create<MulOp>(loc, g, castScalar(b, loc, inverse, getElementTypeOrSelf(g.getType())));
    Value nonFinite = sumOverGradients([&](Value g) -> Value {
      Type element = getElementTypeOrSelf(g.getType());
      return b.create<MulOp>(loc, g, castScalar(b, loc, f64Scalar(b, loc, 0.0), element));
    });
    if (nonFinite)
      overflow = b.create<NotOp>(loc, b.create<EqualOp>(loc, nonFinite, nonFinite));
  }

  // Global gradient norm (reported, and used for clipping), in f32 like
  // torch.nn.utils.clip_grad_norm_.
  Value sumSquares = sumOverGradients([&](Value g) -> Value { return b.create<MulOp>(loc, g, g); });
  Value gradNorm = sumSquares ? b.create<SqrtOp>(loc, sumSquares).getResult()
                              : castScalar(b, loc, f64Scalar(b, loc, 0), lossType);
  if (Value clip = hyper("grad_clip"); clip && numParams > 0) {
    Value coef = b.create<DivOp>(
        loc, castScalar(b, loc, clip, lossType),
        b.create<AddOp>(loc, gradNorm, castScalar(b, loc, f64Scalar(b, loc, 1e-6), lossType)));
    coef = b.create<MinOp>(loc, coef, castScalar(b, loc, f64Scalar(b, loc, 1.0), lossType));
    for (Value &g : grads)
      g = b.create<MulOp>(loc, g, castScalar(b, loc, coef, getElementTypeOrSelf(g.getType())));
  }

  Value stepF64 =
      b.create<CastOp>(loc, RankedTensorType::get({}, b.getF64Type()), body->getArgument(0));
  // AdamW's t counts the updates taken: with loss scaling, not the skipped.
  Value taken = stepF64;
  if (lossScaling)
    taken = b.create<SubOp>(loc, stepF64, hyper("skipped_steps"));
  StepScalars scalars{learningRate(b, loc, stepF64, hyper("lr"), hyper("min_lr")),
                      b.create<AddOp>(loc, taken, f64Scalar(b, loc, 1.0)),
                      hyper("beta1"),
                      hyper("beta2"),
                      hyper("eps"),
                      hyper("weight_decay"),
                      hyper("momentum")};
  llvm::SmallVector<Type> elementTypes;
  for (unsigned p = 0; p < numParams; ++p)
    elementTypes.push_back(getElementTypeOrSelf(param(p).getType()));
  llvm::DenseMap<Type, UpdateFactors> factors =
      buildUpdateFactors(b, loc, *config, scalars, elementTypes);
  llvm::SmallVector<Value> newParams, newStates(numParams * stateKinds.size());
  for (unsigned p = 0; p < numParams; ++p) {
    llvm::SmallVector<Value> state, updated;
    for (unsigned k = 0; k < stateKinds.size(); ++k)
      state.push_back(stateArg(k, p));
    Operation *before = &b.getInsertionBlock()->back();
    buildParameterUpdate(b, loc, *config, factors.at(elementTypes[p]), param(p), grads[p], state,
                         updated);
    // A step with a gradient not finite updates nothing (GradScaler.step).
    if (overflow) {
      updated[0] = b.create<WhereOp>(loc, overflow, param(p), updated[0]);
      for (unsigned k = 0; k < stateKinds.size(); ++k)
        updated[1 + k] = b.create<WhereOp>(loc, overflow, state[k], updated[1 + k]);
    }
    // The update's ops are the optimizer step that ppc-offload moves to
    // the host; each names its parameter.
    auto name = grad.getArgAttrOfType<StringAttr>(paramArgs[p], PpcDialect::kParamAttrName);
    for (Operation *op = before->getNextNode(); op; op = op->getNextNode())
      op->setAttr(PpcDialect::kOptimizerAttrName, name);
    newParams.push_back(updated[0]);
    for (unsigned k = 0; k < stateKinds.size(); ++k)
      newStates[k * numParams + p] = updated[1 + k];
  }

  llvm::SmallVector<Value> results(newParams);
  llvm::append_range(results, newStates);
  results.push_back(loss);
  results.push_back(gradNorm);
  results.push_back(castScalar(b, loc, scalars.lr, lossType));
  llvm::SmallVector<StringRef> outputs{"loss", "grad_norm", "lr"};
  if (lossScaling) {
    results.push_back(
        overflow ? b.create<CastOp>(loc, RankedTensorType::get({}, lossType), overflow).getResult()
                 : castScalar(b, loc, f64Scalar(b, loc, 0.0), lossType));
    outputs.push_back("overflow");
  }
  b.create<func::ReturnOp>(loc, results);
  step.setType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  llvm::SmallVector<DictionaryAttr> resultAttrs(
      argAttrs.begin() + 1, argAttrs.begin() + 1 + newParams.size() + newStates.size());
  for (StringRef name : outputs)
    resultAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(PpcDialect::kOutputAttrName, b.getStringAttr(name))));
  step.setAllResultAttrs(resultAttrs);

  // The step function is the program now.
  for (StringRef name : {"forward_grad", "forward"})
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      f.erase();
}

} // namespace
} // namespace ppc
