//===- Reduction.cpp - sharding rules of reduce_* -------------------------===//
//
// Kept dimensions are parallel factors shared by the input and the result.
// A reduced dimension appears in the input only. Sharding it leaves each
// shard with the reduction over its part: for a sum, a partial sum (a
// reduction factor); for a mean, a partial mean, which is a reduction factor
// too — the partitioner divides the summed partial means by the number of
// shards. The maximum, minimum and product of parts are not their sum, so
// those reduced dimensions need replication. With keepdims the result's
// reduced dimensions have size 1 and no factor.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/sharding/ShardingRules.h"

using namespace mlir;

namespace ppc {

template <typename OpT> static ShardingRuleFn reduceRule(FactorKind reduced) {
  return [reduced](Operation *op) {
    auto reduce = llvm::cast<OpT>(op);
    llvm::ArrayRef<int64_t> axes = reduce.getAxes();
    ShardingRule rule;
    TensorFactors inputDims, resultDims;
    for (auto [d, size] : llvm::enumerate(shapeOf(reduce.getInput()))) {
      bool isReduced = llvm::is_contained(axes, static_cast<int64_t>(d));
      int64_t factor = rule.addFactor(size, isReduced ? reduced : FactorKind::Parallel);
      inputDims.push_back({factor});
      if (!isReduced)
        resultDims.push_back({factor});
      else if (reduce.getKeepdims())
        resultDims.emplace_back();
    }
    rule.operands.push_back(std::move(inputDims));
    rule.results.push_back(std::move(resultDims));
    return rule;
  };
}

void registerReductionShardingRules(ShardingRuleRegistry &registry) {
  registry.add<ReduceSumOp>(reduceRule<ReduceSumOp>(FactorKind::Reduction));
  registry.add<ReduceMeanOp>(reduceRule<ReduceMeanOp>(FactorKind::Reduction));
  registry.add<ReduceMaxOp>(reduceRule<ReduceMaxOp>(FactorKind::NeedReplication));
  registry.add<ReduceMinOp>(reduceRule<ReduceMinOp>(FactorKind::NeedReplication));
  registry.add<ReduceProdOp>(reduceRule<ReduceProdOp>(FactorKind::NeedReplication));
}

} // namespace ppc
