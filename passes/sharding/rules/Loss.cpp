//===- Loss.cpp - sharding rules of nll_loss ------------------------------===//
//
// nll_loss picks `input[n, target[n, ...], ...]`: the class dimension C is
// indexed by data, an indexed reduction as for gather (split, each shard
// picks the targets among its classes and the losses add up: a
// vocabulary-parallel loss), and the weight, indexed the same way, shares
// its factor. The batch and spatial dimensions are shared by input and
// target. With reduction `none` they are parallel and the result keeps
// them. With `sum` each shard's scalar is a partial sum: a reduction. With
// `mean` they are a reduction too, though the mean is not linear in the
// number of elements a shard holds (ignore_index changes each shard's
// divisor): each shard divides its sum by the global count of targets
// (LocalForms.cpp).
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/sharding/ShardingRules.h"

using namespace mlir;

namespace ppc {

static ShardingRule nllLossRule(Operation *op) {
  auto loss = llvm::cast<NllLossOp>(op);
  FactorKind batchKind =
      loss.getReduction() == LossReduction::None ? FactorKind::Parallel : FactorKind::Reduction;
  ShardingRule rule;
  TensorFactors inputDims;
  for (auto [d, size] : llvm::enumerate(shapeOf(loss.getInput())))
    inputDims.push_back({rule.addFactor(size, d == 1 ? FactorKind::IndexedReduction : batchKind)});
  // The target's dimensions are the input's without C.
  TensorFactors targetDims = inputDims;
  targetDims.erase(targetDims.begin() + 1);
  rule.operands = {inputDims, targetDims};
  if (loss.getWeight())
    rule.operands.push_back(TensorFactors{inputDims[1]});
  rule.results.push_back(batchKind == FactorKind::Parallel ? targetDims : TensorFactors());
  return rule;
}

void registerLossShardingRules(ShardingRuleRegistry &registry) {
  registry.add<NllLossOp>(nllLossRule);
}

} // namespace ppc
