//===- ShardingRules.h - per-op sharding rules as data -----------*- C++ -*-===//
//
// How an op may be split over a mesh, as data (Shardy-style factors): every
// dimension of every operand and result is a list of factors (most
// dimensions have one; a reshape's merged or split dimensions have several,
// major to minor), each factor has a size and a kind. Sharding a factor over
// mesh axes shards every dimension it appears in the same way; the op then
// runs unchanged on local shards, except that
//  - a Reduction factor (it appears in operands only: matmul's k, a reduced
//    axis) leaves each result a partial sum over those axes;
//  - an IndexedReduction factor (a dimension indexed by data: a gather's
//    rows, nll_loss's classes) appears in operands only too and leaves
//    results partial sums: each shard serves the indices that fall in its
//    part and contributes zeros for the others (a vocabulary-parallel
//    embedding or loss);
//  - a Normalized factor (softmax's axis) stays split in the results, and
//    the shards exchange the statistics they normalize by (the maximum and
//    the sum of exponentials: two small all-reduces); and
//  - a NeedReplication factor (layer_norm's normalized dims, a slice of a
//    dimension that is not made of whole blocks) must not be sharded.
// IndexedReduction and Normalized factors are not sharded by cloning the op:
// LocalForms.cpp builds what each shard runs instead.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_SHARDING_SHARDINGRULES_H
#define PPC_PASSES_SHARDING_SHARDINGRULES_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <optional>
#include <string>

namespace ppc {

enum class FactorKind { Parallel, Reduction, IndexedReduction, Normalized, NeedReplication };

struct ShardingRule {
  /// Factor sizes and kinds, by factor index.
  llvm::SmallVector<int64_t> factorSizes;
  llvm::SmallVector<FactorKind> factorKinds;
  /// For each operand / result, for each dimension, its factors (major to
  /// minor; the product of their sizes is the dimension's size). Operands
  /// that are not tensors, or that every factor leaves whole, may have empty
  /// lists per dimension only where the dimension has size 1.
  llvm::SmallVector<llvm::SmallVector<llvm::SmallVector<int64_t, 1>>> operands;
  llvm::SmallVector<llvm::SmallVector<llvm::SmallVector<int64_t, 1>>> results;

  /// Adds a factor and returns its index.
  int64_t addFactor(int64_t size, FactorKind kind = FactorKind::Parallel);
  /// Checks sizes and indices against the op's types; a human-readable
  /// description of the first problem, or "" when consistent.
  std::string verify(mlir::Operation *op) const;
  /// "([i, k], [k, j]) -> ([i, j]) {i=8, k=4, j=2} reduction={k}" for tests
  /// and diagnostics (factors named i, j, k, ... in index order).
  std::string str() const;
};

using ShardingRuleFn = std::function<ShardingRule(mlir::Operation *op)>;

class ShardingRuleRegistry {
public:
  static const ShardingRuleRegistry &get();

  template <typename OpT> void add(ShardingRuleFn fn) {
    rules[mlir::TypeID::get<OpT>()] = std::move(fn);
  }
  /// The rule of `op`, or none when the op has no rule.
  std::optional<ShardingRule> lookup(mlir::Operation *op) const;
  /// Whether ops named `name` have a rule. Unlike `lookup`, this needs no
  /// well-formed op (tests compare the registry with the ops they check).
  bool contains(mlir::OperationName name) const;

private:
  llvm::DenseMap<mlir::TypeID, ShardingRuleFn> rules;
};

/// The rule of every elementwise op (ElementwiseOpInterface), which the
/// registry gives them without an entry (rules/Elementwise.cpp).
ShardingRule elementwiseShardingRule(mlir::Operation *op);

// One registration function per op family (passes/sharding/rules/*.cpp).
void registerElementwiseShardingRules(ShardingRuleRegistry &registry);
void registerContractionShardingRules(ShardingRuleRegistry &registry);
void registerReductionShardingRules(ShardingRuleRegistry &registry);
void registerNormalizationShardingRules(ShardingRuleRegistry &registry);
void registerDataMovementShardingRules(ShardingRuleRegistry &registry);
void registerLossShardingRules(ShardingRuleRegistry &registry);

// Helpers shared by the rule files.

/// The factors of one tensor: for each dimension, its factors major to minor.
using TensorFactors = llvm::SmallVector<llvm::SmallVector<int64_t, 1>>;

/// The static shape of a ranked tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value value);

/// One new factor of `kind` per dimension of `shape`, of that dimension's
/// size.
TensorFactors addFactorPerDim(ShardingRule &rule, llvm::ArrayRef<int64_t> shape,
                              FactorKind kind = FactorKind::Parallel);

/// The factors of a tensor of `shape` that broadcasts (numpy rules, aligned
/// on the right) to a tensor of `toShape` with factors `to`: a dimension of
/// the same size shares its factors, a broadcast one (size 1 against a larger
/// size) has none, so it stays whole on every shard.
TensorFactors broadcastFactors(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> toShape,
                               const TensorFactors &to);

/// The block length a slice along one dimension is made of: the dimension's
/// size when it is taken whole; for step 1, the gcd of start, limit and size
/// (the slice takes whole blocks of that length); 1 otherwise.
int64_t sliceBlockLength(int64_t size, int64_t start, int64_t limit, int64_t step);

/// A slice's (or insert_slice's) starts and limits on a shard, given the
/// global and local shapes of its input (insert_slice: its dest). A
/// dimension split by the partitioner is split within each block
/// (`sliceBlockLength`), so the slice takes the same blocks' local parts.
void localizeSliceBounds(llvm::SmallVectorImpl<int64_t> &starts,
                         llvm::SmallVectorImpl<int64_t> &limits, llvm::ArrayRef<int64_t> steps,
                         llvm::ArrayRef<int64_t> globalShape, llvm::ArrayRef<int64_t> localShape);

} // namespace ppc

#endif // PPC_PASSES_SHARDING_SHARDINGRULES_H
