//===- LocalForms.h - what one shard runs for an op ---------------*- C++ -*-===//
//
// The partitioner runs most ops on local shards unchanged: a clone with
// local types. The ops here need more, and their local form is built in one
// table (LocalForms.cpp), op by op, each entry with its price:
//  - attributes that name global positions (slice bounds) become local;
//  - a mean over a split dimension is scaled to a partial sum of the mean;
//  - nll_loss divides each shard's sum by the global target count;
//  - a split indexed dimension (gather rows, nll_loss classes) offsets the
//    indices into the shard's part and masks the others;
//  - a split normalized axis (softmax) all-reduces its statistics.
// The planner prices the collectives a local form adds (`localCollectives`,
// from the same entry) as it prices layout conversions.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_SHARDING_LOCALFORMS_H
#define PPC_PASSES_SHARDING_LOCALFORMS_H

#include "ir/PpcOps.h"
#include "passes/sharding/Layout.h"

#include "mlir/IR/Builders.h"

#include <functional>

namespace ppc {

/// What a local form sees: the global op, its rule and the partitioner's
/// decisions, and the collectives it may emit.
struct LocalFormContext {
  mlir::OpBuilder &builder;
  /// The op of the global program.
  mlir::Operation *op;
  const ShardingRule &rule;
  const OpLayouts &decided;
  const AxisSizes &sizes;
  /// An all-reduce of `value` over `axes` (recorded in the report as caused
  /// by `op`).
  std::function<mlir::Value(mlir::Value value, llvm::ArrayRef<std::string> axes,
                            ReductionKind kind)>
      allReduce;
  /// This rank's position in its group over `axes` (a tensor<i64>).
  std::function<mlir::Value(llvm::ArrayRef<std::string> axes)> axisIndex;
};

/// One op class's local form: how the partitioner builds it (`build`, as
/// buildLocalForm below) and the collectives it adds, for the planner's
/// price (`collectives`; null when it adds none), written side by side in
/// one table entry (LocalForms.cpp) so that neither changes alone.
struct LocalForm {
  using BuildFn = mlir::LogicalResult (*)(LocalFormContext &context, mlir::Operation *clone,
                                          llvm::SmallVectorImpl<mlir::Value> &results);
  using CollectivesFn = llvm::SmallVector<ConversionStep> (*)(mlir::Operation *op,
                                                              const ShardingRule &rule,
                                                              const OpLayouts &decided,
                                                              const AxisSizes &sizes);
  BuildFn build;
  CollectivesFn collectives;
};

/// The local form of `op`'s class, or null when a clone on local shards is
/// all it needs (ShardingRulesTest checks that every op with an indexed or
/// normalized factor has one).
const LocalForm *lookupLocalForm(mlir::Operation *op);

/// Turns `clone` (the op with local operands and local result types, just
/// built) into what one shard runs. Ops may be inserted before the clone
/// (operands) or after it (results); the clone may be erased. `results`
/// starts as the clone's results and ends as the local values of the
/// global op's results. Fails with an error on the op where a sharding has
/// no local form.
mlir::LogicalResult buildLocalForm(LocalFormContext &context, mlir::Operation *clone,
                                   llvm::SmallVectorImpl<mlir::Value> &results);

/// The all-reduces that `buildLocalForm` adds for `op` under `decided`,
/// for pricing (elements per rank).
llvm::SmallVector<ConversionStep> localCollectives(mlir::Operation *op, const ShardingRule &rule,
                                                   const OpLayouts &decided,
                                                   const AxisSizes &sizes);

} // namespace ppc

#endif // PPC_PASSES_SHARDING_LOCALFORMS_H
