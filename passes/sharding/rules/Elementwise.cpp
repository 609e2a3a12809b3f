//===- Elementwise.cpp - sharding rules of constants and elementwise ops --===//
//
// Elementwise ops compute each result element from the operand elements at
// the same position, so every result dimension is a parallel factor that the
// operands share. Under numpy broadcasting an operand dimension of size 1
// that is stretched to a larger one has no factor: it stays whole (and
// replicated) on every shard. Every op that declares ElementwiseOpInterface
// (ir/PpcInterfaces.td) has this rule without an entry here
// (ShardingRuleRegistry::lookup): a new elementwise op needs none.
// rotary, elementwise but for the partner each element reads in the other
// half of the last dimension, has its own.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/sharding/ShardingRules.h"

using namespace mlir;

namespace ppc {

/// ppc.constant: its result's dimensions are parallel factors and it has
/// no operand; the partitioner shards the value itself.
static ShardingRule constantRule(Operation *op) {
  ShardingRule rule;
  rule.results.push_back(addFactorPerDim(rule, shapeOf(op->getResult(0))));
  return rule;
}

/// Elementwise ops: one parallel factor per result dimension; each operand,
/// aligned on the right, shares those of its dimensions that are not
/// broadcast (all of them for unary ops and casts).
ShardingRule elementwiseShardingRule(Operation *op) {
  ShardingRule rule;
  llvm::ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  TensorFactors dims = addFactorPerDim(rule, shape);
  for (Value operand : op->getOperands())
    rule.operands.push_back(broadcastFactors(shapeOf(operand), shape, dims));
  rule.results.push_back(dims);
  return rule;
}

/// rotary: an elementwise op whose last dimension needs replication (each
/// element reads its partner in the other half); cos and sin broadcast.
static ShardingRule rotaryRule(Operation *op) {
  ShardingRule rule;
  llvm::ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  TensorFactors dims;
  for (auto [d, size] : llvm::enumerate(shape))
    dims.push_back({rule.addFactor(size, d + 1 == shape.size() ? FactorKind::NeedReplication
                                                               : FactorKind::Parallel)});
  for (Value operand : op->getOperands())
    rule.operands.push_back(broadcastFactors(shapeOf(operand), shape, dims));
  rule.results.push_back(dims);
  return rule;
}

void registerElementwiseShardingRules(ShardingRuleRegistry &registry) {
  registry.add<ConstantOp>(constantRule);
  registry.add<RotaryOp>(rotaryRule);
}

} // namespace ppc
