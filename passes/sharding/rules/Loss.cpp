//===- Loss.cpp - sharding rules of nll_loss ------------------------------===//
//
// nll_loss picks `input[n, target[n, ...], ...]`: the class dimension C is
// indexed by data, so it needs replication (as for gather; a
// vocabulary-parallel loss is partitioned specially later), and the weight,
// indexed the same way, shares its factor. The batch and spatial dimensions
// are shared by input and target. With reduction `none` they are parallel
// and the result keeps them. With `sum` each shard's scalar is a partial sum:
// a reduction. With `mean` they are a reduction too, though the mean is not
// linear in the number of elements a shard holds (weights and ignore_index
// change each shard's divisor): the partitioner computes it as the sum of
// the per-shard weighted sums over the sum of the per-shard weight totals.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/sharding/ShardingRules.h"

using namespace mlir;

namespace ppc {

static ShardingRule nllLossRule(Operation *op) {
  auto loss = llvm::cast<NllLossOp>(op);
  FactorKind batchKind = loss.getReduction() == LossReduction::None
                             ? FactorKind::Parallel
                             : FactorKind::Reduction;
  ShardingRule rule;
  TensorFactors inputDims;
  for (auto [d, size] : llvm::enumerate(shapeOf(loss.getInput())))
    inputDims.push_back({rule.addFactor(
        size, d == 1 ? FactorKind::NeedReplication : batchKind)});
  // The target's dimensions are the input's without C.
  TensorFactors targetDims = inputDims;
  targetDims.erase(targetDims.begin() + 1);
  rule.operands = {inputDims, targetDims};
  if (loss.getWeight())
    rule.operands.push_back(TensorFactors{inputDims[1]});
  rule.results.push_back(batchKind == FactorKind::Parallel ? targetDims
                                                           : TensorFactors());
  return rule;
}

void registerLossShardingRules(ShardingRuleRegistry &registry) {
  registry.add<NllLossOp>(nllLossRule);
}

} // namespace ppc
