//===- Elementwise.cpp - sharding rules of constants and elementwise ops --===//
//
// Elementwise ops compute each result element from the operand elements at
// the same position, so every result dimension is a parallel factor that the
// operands share. Under numpy broadcasting an operand dimension of size 1
// that is stretched to a larger one has no factor: it stays whole (and
// replicated) on every shard.
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

/// Unary ops and casts: one parallel factor per dimension, shared by the
/// operand and the result.
static ShardingRule sameShapeRule(Operation *op) {
  ShardingRule rule;
  TensorFactors dims = addFactorPerDim(rule, shapeOf(op->getResult(0)));
  rule.operands.push_back(dims);
  rule.results.push_back(dims);
  return rule;
}

/// Binary ops and where: one parallel factor per result dimension; each
/// operand, aligned on the right, shares those of its dimensions that are
/// not broadcast.
static ShardingRule broadcastRule(Operation *op) {
  ShardingRule rule;
  llvm::ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  TensorFactors dims = addFactorPerDim(rule, shape);
  for (Value operand : op->getOperands())
    rule.operands.push_back(broadcastFactors(shapeOf(operand), shape, dims));
  rule.results.push_back(dims);
  return rule;
}

template <typename... OpTs>
static void addAll(ShardingRuleRegistry &registry, ShardingRuleFn fn) {
  (registry.add<OpTs>(fn), ...);
}

void registerElementwiseShardingRules(ShardingRuleRegistry &registry) {
  registry.add<ConstantOp>(constantRule);
  addAll<CastOp, NegOp, AbsOp, SqrtOp, ReciprocalOp, ExpOp, LogOp, ErfOp,
         TanhOp, SigmoidOp, ReluOp, SinOp, CosOp, FloorOp, CeilOp, NotOp>(
      registry, sameShapeRule);
  addAll<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, EqualOp, LessOp,
         GreaterOp, AndOp, OrOp, XorOp, WhereOp>(registry, broadcastRule);
}

} // namespace ppc
