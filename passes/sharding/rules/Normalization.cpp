//===- Normalization.cpp - sharding rules of softmax and the norms ---------===//
//
// A normalization reads every element along its normalized dimensions to
// compute each one (a maximum, a sum of exponentials, a mean and variance).
// Softmax's statistics combine across shards with one all-reduce each (the
// maximum, then the sum of exponentials), so its axis is a normalized
// factor (a vocabulary-parallel log_softmax). layer_norm's and rms_norm's
// normalized dimensions need replication. The other dimensions are parallel.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/sharding/ShardingRules.h"

using namespace mlir;

namespace ppc {

/// softmax and log_softmax: `axis` is normalized, the rest is parallel.
template <typename OpT> static ShardingRule softmaxRule(Operation *op) {
  auto softmax = llvm::cast<OpT>(op);
  int64_t axis = softmax.getAxis();
  ShardingRule rule;
  TensorFactors dims;
  for (auto [d, size] : llvm::enumerate(shapeOf(softmax.getInput())))
    dims.push_back({rule.addFactor(size, static_cast<int64_t>(d) == axis ? FactorKind::Normalized
                                                                         : FactorKind::Parallel)});
  rule.operands.push_back(dims);
  rule.results.push_back(dims);
  return rule;
}

/// log_sum_exp: `axis` needs replication (its partial results would
/// combine by a maximum and a sum of exponentials, two all-reduces; it is
/// made after partitioning, ppc-split-log-softmax, so none is built), the
/// result's kept dimension has no factor, the rest is parallel.
static ShardingRule logSumExpRule(Operation *op) {
  auto logSumExp = llvm::cast<LogSumExpOp>(op);
  int64_t axis = logSumExp.getAxis();
  ShardingRule rule;
  TensorFactors dims, kept;
  for (auto [d, size] : llvm::enumerate(shapeOf(logSumExp.getInput()))) {
    bool reduced = static_cast<int64_t>(d) == axis;
    dims.push_back(
        {rule.addFactor(size, reduced ? FactorKind::NeedReplication : FactorKind::Parallel)});
    kept.push_back(reduced ? llvm::SmallVector<int64_t, 1>{} : dims.back());
  }
  rule.operands.push_back(dims);
  rule.results.push_back(kept);
  return rule;
}

/// layer_norm and rms_norm: dimensions from `axis` on need replication;
/// scale and bias broadcast to them (aligned on the right), so they share
/// those factors where they are not broadcast. The leading dimensions are
/// parallel.
template <typename Op> static ShardingRule normalizationRule(Operation *op) {
  auto layerNorm = llvm::cast<Op>(op);
  llvm::ArrayRef<int64_t> shape = shapeOf(layerNorm.getInput());
  int64_t axis = layerNorm.getAxis();
  ShardingRule rule;
  TensorFactors dims;
  for (auto [d, size] : llvm::enumerate(shape))
    dims.push_back(
        {rule.addFactor(size, static_cast<int64_t>(d) < axis ? FactorKind::Parallel
                                                             : FactorKind::NeedReplication)});
  llvm::ArrayRef<int64_t> normalized = shape.drop_front(axis);
  TensorFactors normalizedDims(dims.begin() + axis, dims.end());
  rule.operands.push_back(dims);
  for (Value operand : layerNorm->getOperands().drop_front())
    rule.operands.push_back(broadcastFactors(shapeOf(operand), normalized, normalizedDims));
  rule.results.push_back(dims);
  return rule;
}

/// layer_norm_grad and rms_norm_grad: as layer_norm for the input, the
/// result's adjoint and the input's; the statistics keep the leading
/// dimensions.
template <typename Op> static ShardingRule normalizationGradRule(Operation *op) {
  auto grad = llvm::cast<Op>(op);
  llvm::ArrayRef<int64_t> shape = shapeOf(grad.getInput());
  int64_t axis = grad.getAxis();
  ShardingRule rule;
  TensorFactors dims, stats;
  for (auto [d, size] : llvm::enumerate(shape)) {
    bool leading = static_cast<int64_t>(d) < axis;
    dims.push_back(
        {rule.addFactor(size, leading ? FactorKind::Parallel : FactorKind::NeedReplication)});
    stats.push_back(leading ? dims.back() : llvm::SmallVector<int64_t, 1>{});
  }
  TensorFactors normalizedDims(dims.begin() + axis, dims.end());
  rule.operands = {
      dims, broadcastFactors(shapeOf(grad.getScale()), shape.drop_front(axis), normalizedDims),
      dims};
  rule.results = {dims};
  rule.results.append(grad->getNumResults() - 1, stats);
  return rule;
}

void registerNormalizationShardingRules(ShardingRuleRegistry &registry) {
  registry.add<SoftmaxOp>(softmaxRule<SoftmaxOp>);
  registry.add<LogSoftmaxOp>(softmaxRule<LogSoftmaxOp>);
  registry.add<LogSumExpOp>(logSumExpRule);
  registry.add<LayerNormOp>(normalizationRule<LayerNormOp>);
  registry.add<LayerNormGradOp>(normalizationGradRule<LayerNormGradOp>);
  registry.add<RmsNormOp>(normalizationRule<RmsNormOp>);
  registry.add<RmsNormGradOp>(normalizationGradRule<RmsNormGradOp>);
}

} // namespace ppc
