//===- ShardingRules.cpp - the sharding rule registry and rule checks -----===//
//
// The registry (one registration function per op family, rules/*.cpp), the
// consistency check every rule must pass against its op, and the Shardy-like
// text form used by tests and diagnostics.
//
//===----------------------------------------------------------------------===//

#include "passes/sharding/ShardingRules.h"
#include "ir/PpcOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>

using namespace mlir;

namespace ppc {

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

const ShardingRuleRegistry &ShardingRuleRegistry::get() {
  static const ShardingRuleRegistry registry = [] {
    ShardingRuleRegistry r;
    registerElementwiseShardingRules(r);
    registerContractionShardingRules(r);
    registerReductionShardingRules(r);
    registerNormalizationShardingRules(r);
    registerDataMovementShardingRules(r);
    registerLossShardingRules(r);
    return r;
  }();
  return registry;
}

std::optional<ShardingRule> ShardingRuleRegistry::lookup(Operation *op) const {
  auto name = op->getRegisteredInfo();
  if (!name)
    return std::nullopt;
  auto it = rules.find(name->getTypeID());
  if (it != rules.end())
    return it->second(op);
  if (llvm::isa<ElementwiseOpInterface>(op))
    return elementwiseShardingRule(op);
  return std::nullopt;
}

bool ShardingRuleRegistry::contains(OperationName name) const {
  auto info = name.getRegisteredInfo();
  return info &&
         (rules.contains(info->getTypeID()) || info->hasInterface<ElementwiseOpInterface>());
}

//===----------------------------------------------------------------------===//
// Helpers for rule writers
//===----------------------------------------------------------------------===//

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

TensorFactors addFactorPerDim(ShardingRule &rule, llvm::ArrayRef<int64_t> shape, FactorKind kind) {
  TensorFactors dims;
  for (int64_t size : shape)
    dims.push_back({rule.addFactor(size, kind)});
  return dims;
}

TensorFactors broadcastFactors(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> toShape,
                               const TensorFactors &to) {
  TensorFactors dims(shape.size());
  int64_t offset = toShape.size() - shape.size();
  for (auto [d, size] : llvm::enumerate(shape))
    if (offset + static_cast<int64_t>(d) >= 0 && size == toShape[offset + d])
      dims[d] = to[offset + d];
  return dims;
}

//===----------------------------------------------------------------------===//
// ShardingRule
//===----------------------------------------------------------------------===//

int64_t ShardingRule::addFactor(int64_t size, FactorKind kind) {
  factorSizes.push_back(size);
  factorKinds.push_back(kind);
  return factorSizes.size() - 1;
}

/// Shardy's factor names: i, j, ..., z, then z_1, z_2, ...
static std::string factorName(int64_t index) {
  constexpr int64_t kLetters = 'z' - 'i' + 1;
  if (index >= 0 && index < kLetters)
    return std::string(1, static_cast<char>('i' + index));
  return "z_" + std::to_string(index - kLetters + 1);
}

static llvm::StringRef kindName(FactorKind kind) {
  switch (kind) {
  case FactorKind::Parallel:
    return "parallel";
  case FactorKind::Reduction:
    return "reduction";
  case FactorKind::IndexedReduction:
    return "indexed-reduction";
  case FactorKind::Normalized:
    return "normalized";
  case FactorKind::NeedReplication:
    return "need-replication";
  }
  return "unknown";
}

std::string ShardingRule::verify(Operation *op) const {
  int64_t numFactors = factorSizes.size();
  if (static_cast<int64_t>(factorKinds.size()) != numFactors)
    return llvm::formatv("{0} factor sizes but {1} factor kinds", numFactors, factorKinds.size());
  for (auto [f, size] : llvm::enumerate(factorSizes))
    if (size < 0)
      return llvm::formatv("factor {0} has negative size {1}", factorName(f), size);
  if (operands.size() != op->getNumOperands() || results.size() != op->getNumResults())
    return llvm::formatv("rule has {0} operands and {1} results, the op {2} "
                         "and {3}",
                         operands.size(), results.size(), op->getNumOperands(),
                         op->getNumResults());

  llvm::SmallVector<bool> used(numFactors, false), inResult(numFactors, false);
  auto checkTensor = [&](llvm::StringRef what, unsigned index, Type type, const TensorFactors &dims,
                         bool isResult) -> std::string {
    auto tensor = llvm::dyn_cast<RankedTensorType>(type);
    int64_t rank = tensor ? tensor.getRank() : 0;
    if (static_cast<int64_t>(dims.size()) != rank)
      return llvm::formatv("{0} {1} has {2} dimension entries for rank {3}", what, index,
                           dims.size(), rank);
    llvm::SmallVector<int64_t> seen;
    for (auto [d, factors] : llvm::enumerate(dims)) {
      int64_t product = 1;
      for (int64_t f : factors) {
        if (f < 0 || f >= numFactors)
          return llvm::formatv("{0} {1} dimension {2} names factor #{3} of {4}", what, index, d, f,
                               numFactors);
        if (llvm::is_contained(seen, f) && factorKinds[f] != FactorKind::NeedReplication)
          return llvm::formatv("{0} factor {1} appears twice in {2} {3}", kindName(factorKinds[f]),
                               factorName(f), what, index);
        if (isResult && (factorKinds[f] == FactorKind::Reduction ||
                         factorKinds[f] == FactorKind::IndexedReduction))
          return llvm::formatv("{0} factor {1} appears in result {2}", kindName(factorKinds[f]),
                               factorName(f), index);
        seen.push_back(f);
        used[f] = true;
        inResult[f] = inResult[f] || isResult;
        product *= factorSizes[f];
      }
      if (product != tensor.getDimSize(d))
        return llvm::formatv("{0} {1} dimension {2} has size {3} but factors "
                             "of total size {4}",
                             what, index, d, tensor.getDimSize(d), product);
    }
    return "";
  };
  for (auto [i, dims] : llvm::enumerate(operands))
    if (std::string error = checkTensor("operand", i, op->getOperand(i).getType(), dims, false);
        !error.empty())
      return error;
  for (auto [i, dims] : llvm::enumerate(results))
    if (std::string error = checkTensor("result", i, op->getResult(i).getType(), dims, true);
        !error.empty())
      return error;

  for (int64_t f = 0; f < numFactors; ++f) {
    if (!used[f])
      return llvm::formatv("factor {0} appears in no operand or result", factorName(f));
    // Sharding a parallel factor must shard some result, or the op would
    // compute its whole result from partial operands.
    if ((factorKinds[f] == FactorKind::Parallel || factorKinds[f] == FactorKind::Normalized) &&
        !inResult[f] && op->getNumResults() > 0)
      return llvm::formatv("{0} factor {1} appears in no result", kindName(factorKinds[f]),
                           factorName(f));
  }
  return "";
}

std::string ShardingRule::str() const {
  // Sizes and kinds are listed in the order the factors first appear in the
  // mapping (operands, then results), which reads like the mapping itself.
  llvm::SmallVector<int64_t> order;
  llvm::SmallVector<bool> listed(factorSizes.size(), false);
  auto list = [&](int64_t f) {
    if (f >= 0 && f < static_cast<int64_t>(listed.size()) && !listed[f]) {
      listed[f] = true;
      order.push_back(f);
    }
  };
  for (const auto *side : {&operands, &results})
    for (const TensorFactors &dims : *side)
      for (const auto &factors : dims)
        llvm::for_each(factors, list);
  for (int64_t f = 0, e = factorSizes.size(); f < e; ++f)
    list(f);

  auto tensors = [](const llvm::SmallVector<TensorFactors> &side) {
    std::string text = "(";
    for (auto [t, dims] : llvm::enumerate(side)) {
      text += t ? ", [" : "[";
      for (auto [d, factors] : llvm::enumerate(dims)) {
        if (d)
          text += ", ";
        // A dimension with no factors has size 1 and is never split.
        if (factors.empty())
          text += "1";
        for (int64_t f : factors)
          text += factorName(f);
      }
      text += "]";
    }
    return text + ")";
  };
  auto factorsOfKind = [&](FactorKind kind) {
    std::string text;
    for (int64_t f : order)
      if (f < static_cast<int64_t>(factorKinds.size()) && factorKinds[f] == kind)
        text += (text.empty() ? "" : ", ") + factorName(f);
    return text;
  };

  std::string text = tensors(operands) + " -> " + tensors(results) + " {";
  for (auto [n, f] : llvm::enumerate(order))
    text += (n ? ", " : "") + factorName(f) + "=" + std::to_string(factorSizes[f]);
  text += "}";
  if (std::string reduction = factorsOfKind(FactorKind::Reduction); !reduction.empty())
    text += " reduction={" + reduction + "}";
  if (std::string indexed = factorsOfKind(FactorKind::IndexedReduction); !indexed.empty())
    text += " indexed={" + indexed + "}";
  if (std::string normalized = factorsOfKind(FactorKind::Normalized); !normalized.empty())
    text += " normalized={" + normalized + "}";
  if (std::string replicated = factorsOfKind(FactorKind::NeedReplication); !replicated.empty())
    text += " replicated={" + replicated + "}";
  return text;
}

int64_t sliceBlockLength(int64_t size, int64_t start, int64_t limit, int64_t step) {
  if (step != 1 || start < 0 || limit > size || start >= limit)
    return 1;
  return std::gcd(std::gcd(start, limit), size);
}

void localizeSliceBounds(llvm::SmallVectorImpl<int64_t> &starts,
                         llvm::SmallVectorImpl<int64_t> &limits, llvm::ArrayRef<int64_t> steps,
                         llvm::ArrayRef<int64_t> globalShape, llvm::ArrayRef<int64_t> localShape) {
  for (size_t d = 0; d < globalShape.size(); ++d) {
    if (localShape[d] == globalShape[d])
      continue;
    int64_t block = sliceBlockLength(globalShape[d], starts[d], limits[d], steps[d]);
    int64_t localBlock = block / (globalShape[d] / localShape[d]);
    starts[d] = starts[d] / block * localBlock;
    limits[d] = limits[d] / block * localBlock;
  }
}

} // namespace ppc
