//===- Fusion.h - elementwise fusion groups of a rank program ----*- C++ -*-===//
//
// Chains of elementwise ops (arithmetic, comparisons, logic, where, cast)
// that produce tensors of one shape run as one loop: each element is read
// once, every intermediate stays in a register, and only the values used
// outside the chain are written. A group runs at the place of its last op,
// so an op joins a group only when no value of the group is used outside it
// before that op; an op that reads several such groups joins them all into
// one (AdamW's update of a parameter: the chains of m and v and the decayed
// parameter, one loop reading p, g, m and v and writing p, m and v). Splat
// constants feeding a group are inlined as literals. A reduction of a group
// value used by nothing else ends the group: the loop runs over the reduced
// tensor and accumulates it, never storing it. A softmax over the last
// dimension reads through a widening cast and a window of rows feeding it
// (FusionPlan::foldedInto), which are never stored.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_FUSION_H
#define PPC_CODEGEN_FUSION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace ppc::codegen {

/// Whether `op` computes each result element from the operand elements at
/// the same (broadcast) position alone: the ops that declare
/// ElementwiseOpInterface (ir/PpcInterfaces.td).
bool isElementwise(mlir::Operation *op);

/// A splat constant's value when `value` is one (inlined into kernels).
std::optional<mlir::Attribute> splatValue(mlir::Value value);

struct FusionGroup {
  /// In program order; the group runs at the place of the last.
  llvm::SmallVector<mlir::Operation *> ops;
  /// A reduction (sum, mean, max, min) ending the group: the last op, whose
  /// input is a group value used by nothing else. The loop then runs over
  /// that input's shape and accumulates the reduction instead of storing it.
  mlir::Operation *reduction = nullptr;
  /// Values the group reads (not splat constants), in first-use order.
  llvm::SmallVector<mlir::Value> inputs;
  /// Values of the group used outside it (or returned).
  llvm::SmallVector<mlir::Value> outputs;
};

/// The shape a group's loop nest runs over: its values' (the reduction's
/// input's, when it ends in one).
llvm::ArrayRef<int64_t> loopShape(const FusionGroup &group);

/// Whether `op` is a reduction a fusion group can end in, and its kind's
/// name in ppcrt ("Sum", "Mean", "Max", "Min"); "" otherwise.
llvm::StringRef fusableReduction(mlir::Operation *op);

struct FusionPlan {
  std::vector<FusionGroup> groups;
  /// The group of each fused op.
  llvm::DenseMap<mlir::Operation *, unsigned> groupOf;
  /// Splat constants whose every use is inlined: never materialized.
  llvm::DenseSet<mlir::Operation *> inlinedConstants;

  /// Ops folded into the kernel of their only user, which reads their
  /// operand in their place (rowSourceOf): a softmax over the last
  /// dimension reads a widening cast's bf16 or f16 operand, and a slice's
  /// window of whole rows in place (the logits of a padded vocabulary).
  /// Each maps to that user, at whose place it runs.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> foldedInto;

  /// The op at whose place `op` runs.
  mlir::Operation *runsAt(mlir::Operation *op) const;
  /// Whether `value` is never stored (a group's internal value, an inlined
  /// constant, a folded op's result).
  bool unstored(mlir::Value value) const;
};

/// What a kernel reads for `operand` through the ops folded into it: the
/// stored value, where its first row starts (in elements) and the distance
/// between rows (the last dimension's size of that value). Without folded
/// ops, the operand itself at offset 0.
struct RowSource {
  mlir::Value value;
  int64_t offset = 0, rowStride = 0;
};
RowSource rowSourceOf(const FusionPlan &plan, mlir::Value operand);

/// Groups the elementwise ops of `func`; with `fuseReductions`, a reduction
/// of a group value used by nothing else ends that group.
FusionPlan planFusion(mlir::func::FuncOp func, bool fuseReductions = true);

/// The ppcrt/Scalar.h function computing an elementwise op ("add"), as the
/// op declares it (ElementwiseOpInterface), or "" for cast and ops that are
/// not elementwise.
llvm::StringRef scalarFunction(mlir::Operation *op);

/// The loop nest of a group over `shape`: dimensions collapsed as far as
/// every input's broadcasting allows (size-1 ones dropped), and each
/// input's stride per loop (0 where it broadcasts). The result is dense.
struct LoopNest {
  llvm::SmallVector<int64_t> sizes;
  std::vector<llvm::SmallVector<int64_t>> inputStrides;
};
/// `extra` are further stride vectors over `shape` (a reduction's output
/// strides: 0 where reduced) that the collapse must also respect; their
/// collapsed strides follow the inputs' in inputStrides.
LoopNest collapse(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<mlir::Value> inputs,
                  llvm::ArrayRef<llvm::SmallVector<int64_t>> extra = {});

} // namespace ppc::codegen

#endif // PPC_CODEGEN_FUSION_H
