//===- Layout.h - how values are split over the mesh, op by op ---*- C++ -*-===//
//
// A Layout is a value's sharding during planning and partitioning; the
// #ppc.sharding attribute records it in IR. `layoutsForOp` is the one place
// that decides, from an op's sharding rule and its operands' layouts, which
// layout each operand must be converted to and which layouts the results
// get. The planner (PlanShardings.cpp) runs it to price candidate plans, the
// partitioner (Partition.cpp) to rewrite the program: both see the same
// decisions.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_SHARDING_LAYOUT_H
#define PPC_PASSES_SHARDING_LAYOUT_H

#include "ir/PpcAttrs.h"
#include "passes/sharding/ShardingRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace ppc {

using AxisList = llvm::SmallVector<std::string, 1>;

/// A value's sharding: for each dimension the mesh axes it is split over
/// (major to minor) and the blocks it is viewed as (1: split contiguously;
/// B: each of B equal blocks split over the axes), and the axes over which
/// it is a partial sum.
struct Layout {
  llvm::SmallVector<AxisList> dims;
  llvm::SmallVector<int64_t> blocks;
  AxisList partial;

  static Layout replicated(int64_t rank) {
    Layout layout;
    layout.dims.resize(rank);
    layout.blocks.assign(rank, 1);
    return layout;
  }
  bool isReplicated() const {
    return partial.empty() && llvm::all_of(dims, [](const auto &axes) { return axes.empty(); });
  }
  /// Whether dimension `d` is split the same way in both.
  bool sameDim(const Layout &other, size_t d) const {
    return dims[d] == other.dims[d] && (dims[d].empty() || blocks[d] == other.blocks[d]);
  }
  bool operator==(const Layout &other) const {
    if (dims.size() != other.dims.size() || partial != other.partial)
      return false;
    for (size_t d = 0; d < dims.size(); ++d)
      if (!sameDim(other, d))
        return false;
    return true;
  }
  bool operator!=(const Layout &other) const { return !(*this == other); }
  /// "[[dp], [], 3 * [tp]] partial [tp]", for diagnostics, reports and keys.
  std::string str() const;
};

/// The attribute that records `layout` on mesh @mesh, and back.
ShardingAttr toAttr(mlir::MLIRContext *context, const Layout &layout);
Layout fromAttr(ShardingAttr sharding);

/// Mesh axis sizes by name.
using AxisSizes = llvm::StringMap<int64_t>;

/// The module's `ppc.mesh @mesh` (pp, dp, tp), declared with sizes
/// (pp, dp, tp) unless present; its axis sizes. Fails, with an error on the
/// module, when sizes are not positive or an existing mesh differs.
mlir::FailureOr<AxisSizes> declareMesh(mlir::ModuleOp module, int64_t dp, int64_t tp,
                                       int64_t pp = 1);

int64_t groupSize(const AxisSizes &sizes, llvm::ArrayRef<std::string> axes);

/// The local shape of a value of `shape` laid out as `layout`, or none when
/// a dimension does not divide by its parts and blocks.
std::optional<llvm::SmallVector<int64_t>> localShape(llvm::ArrayRef<int64_t> shape,
                                                     const Layout &layout, const AxisSizes &sizes);

/// ZeRO: the dimension along which a model state of `shape` laid out as
/// `layout` is split over dp: its first dimension that no axis splits and
/// dp divides. None when dp is 1, the layout uses dp already, or no
/// dimension qualifies (the state stays replicated over dp).
std::optional<int64_t> zeroShardDim(llvm::ArrayRef<int64_t> shape, const Layout &layout,
                                    int64_t dp);

/// What partitioning decides for one op.
struct OpLayouts {
  /// The layout each operand is converted to before the op runs.
  llvm::SmallVector<Layout> operands;
  /// The layout of each result, as the op computes it on local shards.
  llvm::SmallVector<Layout> results;
  /// The axes of sharded reduction and indexed-reduction factors (results
  /// are partial over them).
  AxisList reductionAxes;
  /// For each factor of the rule, the axes it is split over (none: whole)
  /// and the blocks it is split in.
  llvm::SmallVector<AxisList> factorAxes;
  llvm::SmallVector<int64_t> factorBlocks;
};

/// What the partitioner knows about an op's operands beyond their layouts.
struct OperandInfo {
  /// Whether the operand is computed from parameters and constants only
  /// (not from data inputs): its layout is the plan's, and on a conflict
  /// the other operands are converted to it.
  llvm::SmallVector<bool> stationary;
  /// Sequence parallelism (empty: off): the dimension along which a partial
  /// sum over tp that the op cannot keep is reduce-scattered instead of
  /// all-reduced (-1: none); the op then runs split along it.
  llvm::SmallVector<int64_t> scatterDims;
};

/// The layouts for `op` with sharding rule `rule`, given its operands'
/// layouts `in`. Factor shardings come from the operands, stationary ones
/// (weights) first, then in operand order: a dimension split over axes
/// shards the factor its blocks fall on, if that factor may be sharded,
/// divides, and the axes are still free. Partial sums stay partial through
/// ops linear in them.
OpLayouts layoutsForOp(mlir::Operation *op, const ShardingRule &rule,
                       llvm::ArrayRef<const Layout *> in, const AxisSizes &sizes,
                       const OperandInfo *info = nullptr);

/// Facts about the values of a step that `layoutsForOp` uses, computed once.
class OperandFacts {
public:
  OperandFacts(mlir::func::FuncOp step,
               llvm::function_ref<const ShardingRule *(mlir::Operation *)> ruleOf,
               bool sequenceParallel);
  OperandInfo of(mlir::Operation *op) const;

private:
  bool sequenceParallel;
  /// Values computed from a data input.
  llvm::DenseSet<mlir::Value> fromData;
  /// For each value derived from a data input's dimension 1 (the sequence
  /// of a [batch, seq, ...] input), the dimension that carries it: followed
  /// through every op's rule by the factor of that dimension (the minor one
  /// where a dimension has several, as in [batch * seq]).
  llvm::DenseMap<mlir::Value, int64_t> sequence;
};

/// For each result of `step`, the argument it is the updated value of (a
/// parameter or optimizer state of the same name), or none (outputs).
llvm::SmallVector<std::optional<unsigned>> updatedArguments(mlir::func::FuncOp step);

/// The layout each result of `step` is returned in, given the arguments':
/// an updated parameter or state in its argument's, everything else whole.
llvm::SmallVector<Layout> returnLayouts(mlir::func::FuncOp step, llvm::ArrayRef<Layout> arguments);

/// Layouts values should take as soon as they are computed, from where
/// they end up: an updated parameter (or optimizer state) returns in its
/// argument's layout, and the values it is computed from elementwise (its
/// gradient, through the optimizer update and the accumulation of
/// micro-batches) are wanted in that layout too. `returnLayouts` holds the
/// layout each result of `step` returns in (replicated for outputs).
llvm::DenseMap<mlir::Value, Layout>
layoutHints(mlir::Block &body, llvm::ArrayRef<Layout> returnLayouts,
            llvm::function_ref<const ShardingRule *(mlir::Operation *)> ruleOf);

/// The steps of layoutHints, for a caller that repeats the propagation
/// (the planner's pricer): `layout` as a hint (its partial sums dropped;
/// none when that is replicated), and the operands of `op` (with `rule`,
/// or null) that take the hint of its result: for a single-result op whose
/// factors are all parallel, the operands with exactly the result's
/// factors (not broadcast ones).
std::optional<Layout> asHint(const Layout &layout);
llvm::SmallVector<unsigned, 2> hintedOperands(mlir::Operation *op, const ShardingRule *rule);

/// A result computed with layout `computed` but hinted `hint`: the layout to
/// slice it to right away (dimensions split where the hint splits them and
/// the result is whole; partial sums stay), or `computed`. Slicing is local,
/// and a partial gradient sliced before its reduction is reduced in shards.
Layout applyHint(const Layout &computed, const Layout &hint);

/// One collective a layout conversion needs.
struct ConversionStep {
  /// ToPartial is local: the ranks off position 0 of the axes zero their
  /// copy, so that the copies sum to the value.
  enum Kind { AllReduce, AllGather, AllSlice, ReduceScatter, ToPartial } kind;
  AxisList axes;
  /// The dimension gathered, sliced or scattered.
  int64_t dim = -1;
  /// The blocks of that dimension.
  int64_t blocks = 1;
  /// Elements of the full (gathered) or reduced tensor on one rank (for a
  /// reduce-scatter, the tensor before scattering).
  int64_t elements = 0;
};

/// The collectives that turn a value of global `shape` from layout `from`
/// into `to`, in order: dimensions split over axes the value is not partial
/// over are sliced first (less to reduce); partial sums are reduced, with a
/// reduce-scatter where a dimension is to be split over exactly the partial
/// axes; then dimension by dimension gathered from `from`'s axes and sliced
/// to `to`'s. A whole value that is to become a partial sum comes last.
llvm::SmallVector<ConversionStep> conversionSteps(llvm::ArrayRef<int64_t> shape, const Layout &from,
                                                  const Layout &to, const AxisSizes &sizes);

} // namespace ppc

#endif // PPC_PASSES_SHARDING_LAYOUT_H
