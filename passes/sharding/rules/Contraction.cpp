//===- Contraction.cpp - sharding rules of matmul and einsum --------------===//
//
// A contraction sums products over its contracted dimensions. Sharding a
// contracted dimension leaves every shard with the sum over its part, a
// partial sum of the result: a reduction factor. Every other dimension is a
// parallel factor shared by the operands that have it and the result.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "passes/sharding/ShardingRules.h"

#include "llvm/ADT/DenseMap.h"

#include <type_traits>

using namespace mlir;

namespace ppc {

/// matmul `[..., m, k] @ [..., k, n]`: the result's batch dimensions are
/// parallel factors, which the operands share where they do not broadcast
/// (aligned on the right among the batch dimensions); m and n are parallel,
/// k is a reduction.
static ShardingRule matmulRule(Operation *op) {
  auto matmul = llvm::cast<MatMulOp>(op);
  llvm::ArrayRef<int64_t> lhs = shapeOf(matmul.getLhs()), result = shapeOf(matmul.getResult());
  llvm::ArrayRef<int64_t> batch = result.drop_back(2);
  ShardingRule rule;
  TensorFactors batchDims = addFactorPerDim(rule, batch);
  int64_t m = rule.addFactor(result[result.size() - 2]);
  int64_t n = rule.addFactor(result.back());
  int64_t k = rule.addFactor(lhs.back(), FactorKind::Reduction);
  auto matrix = [&](Value operand, int64_t rows, int64_t cols) {
    TensorFactors dims = broadcastFactors(shapeOf(operand).drop_back(2), batch, batchDims);
    dims.push_back({rows});
    dims.push_back({cols});
    return dims;
  };
  rule.operands = {matrix(matmul.getLhs(), m, k), matrix(matmul.getRhs(), k, n)};
  rule.results = {matrix(matmul.getResult(), m, n)};
  return rule;
}

/// einsum: one factor per label, output labels first. A label of the output
/// is parallel and one summed out is a reduction, except that a label
/// repeated within one operand (a diagonal) needs replication: sharding it
/// would shard two dimensions of one tensor the same way, which no layout
/// expresses.
static ShardingRule einsumRule(Operation *op) {
  auto einsum = llvm::cast<EinsumOp>(op);
  ShardingRule rule;
  // A verified op has a valid equation; otherwise the empty rule fails
  // `verify`.
  FailureOr<EinsumSpec> spec = parseEinsum(einsum.getEquation(), [](const llvm::Twine &) {});
  if (failed(spec))
    return rule;

  llvm::DenseMap<char, int64_t> factorOf;
  llvm::DenseMap<char, bool> diagonal;
  for (const std::string &labels : spec->inputs)
    for (char label : labels)
      if (llvm::count(labels, label) > 1)
        diagonal[label] = true;
  auto factor = [&](char label, int64_t size, FactorKind kind) {
    auto [it, inserted] = factorOf.try_emplace(label, 0);
    if (inserted)
      it->second =
          rule.addFactor(size, diagonal.lookup(label) ? FactorKind::NeedReplication : kind);
    return it->second;
  };
  llvm::ArrayRef<int64_t> result = shapeOf(einsum.getResult());
  TensorFactors resultDims;
  for (auto [d, label] : llvm::enumerate(spec->output))
    resultDims.push_back({factor(label, result[d], FactorKind::Parallel)});
  for (auto [labels, input] : llvm::zip(spec->inputs, einsum.getInputs())) {
    llvm::ArrayRef<int64_t> shape = shapeOf(input);
    TensorFactors dims;
    for (auto [d, label] : llvm::enumerate(labels))
      dims.push_back({factor(label, shape[d], FactorKind::Reduction)});
    rule.operands.push_back(std::move(dims));
  }
  rule.results.push_back(std::move(resultDims));
  return rule;
}

/// attention and attention_grad: batch dimensions (heads included) are
/// parallel; queries, keys and head sizes need replication (the scores
/// contract the head size inside a softmax over the keys, and a causal
/// mask depends on where a query is in the whole sequence). The bias
/// shares the factors of the scores' dimensions it is not broadcast along.
template <typename OpT> static ShardingRule attentionRule(Operation *op) {
  auto attention = llvm::cast<OpT>(op);
  llvm::ArrayRef<int64_t> q = shapeOf(attention.getQ()), k = shapeOf(attention.getK()),
                          v = shapeOf(attention.getV());
  ShardingRule rule;
  TensorFactors batch = addFactorPerDim(rule, q.drop_back(2));
  int64_t queries = rule.addFactor(q[q.size() - 2], FactorKind::NeedReplication);
  int64_t keys = rule.addFactor(k[k.size() - 2], FactorKind::NeedReplication);
  int64_t headDim = rule.addFactor(q.back(), FactorKind::NeedReplication);
  int64_t valueDim = rule.addFactor(v.back(), FactorKind::NeedReplication);
  auto tensor = [&](std::initializer_list<int64_t> last) {
    TensorFactors dims = batch;
    for (int64_t factor : last)
      dims.push_back({factor});
    return dims;
  };
  TensorFactors qDims = tensor({queries, headDim}), kDims = tensor({keys, headDim}),
                vDims = tensor({keys, valueDim}), oDims = tensor({queries, valueDim}),
                lseDims = tensor({queries}), scores = tensor({queries, keys});
  llvm::SmallVector<int64_t> scoreShape(q.drop_back());
  scoreShape.push_back(k[k.size() - 2]);
  rule.operands = {qDims, kDims, vDims};
  if constexpr (std::is_same_v<OpT, AttentionOp>) {
    rule.results = {oDims, lseDims};
  } else {
    rule.operands.append({oDims, lseDims, oDims});
    rule.results = {qDims, kDims, vDims};
  }
  if (Value bias = attention.getBias())
    rule.operands.push_back(broadcastFactors(shapeOf(bias), scoreShape, scores));
  return rule;
}

void registerContractionShardingRules(ShardingRuleRegistry &registry) {
  registry.add<MatMulOp>(matmulRule);
  registry.add<EinsumOp>(einsumRule);
  registry.add<AttentionOp>(attentionRule<AttentionOp>);
  registry.add<AttentionGradOp>(attentionRule<AttentionGradOp>);
}

} // namespace ppc
