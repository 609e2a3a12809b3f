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
// value ends the group: the loop runs over the reduced tensor and
// accumulates it, storing it only where later ops read it too (the gradient
// of a bias before the product that reads the value). A softmax (or log_sum_exp)
// over the last dimension and an nll_loss read through a widening cast and
// a window of rows feeding them, the loss also through a per-row shift
// (FusionPlan::foldedInto), which are never stored. On targets whose GEMMs
// have epilogues (CUDA: cuBLASLt's), a product whose only reader adds a
// row-broadcast bias, a tensor of its shape (a residual), or both, computes
// those adds in the GEMM (FusionPlan::epilogues) and is never stored. A
// LayerNorm's or RMSNorm's gradient read only by an add of a tensor computed
// before it (the residual stream's gradient) adds it in its own kernel
// (FusionPlan::normGradAdd), and sums over its rows the bias's and the
// scale's gradients and that of the bias of the product before it
// (FusionPlan::normGradSums). A log_sum_exp of rows that a group reads
// per row (the logits' gradient) is computed in that group's kernel, which
// reads each row once (FusionPlan::rowLogSumExpOf).
// The optimizer step's groups that are alike (AdamW's update of every
// parameter) run as one kernel over a table of their buffers
// (FusionPlan::batches): one call on CPUs, a few launches on CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_FUSION_H
#define PPC_CODEGEN_FUSION_H

#include "passes/Recognition.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <vector>

namespace ppc::codegen {

/// Whether `op` computes each result element from the operand elements at
/// the same (broadcast) position alone: the ops that declare
/// ElementwiseOpInterface (ir/PpcInterfaces.td).
bool isElementwise(mlir::Operation *op);

struct FusionGroup {
  /// In program order; the group runs at the place of the last.
  llvm::SmallVector<mlir::Operation *> ops;
  /// A reduction (sum, mean, max, min) ending the group: the last op, whose
  /// input is a group value that nothing reads before it. The loop then runs
  /// over that input's shape and accumulates the reduction, storing the
  /// input only where it is an output (read after the reduction).
  mlir::Operation *reduction = nullptr;
  /// Values the group reads (not splat constants), in first-use order.
  llvm::SmallVector<mlir::Value> inputs;
  /// Values of the group used outside it (or returned).
  llvm::SmallVector<mlir::Value> outputs;
};

/// The shape a group's loop nest runs over: its values' (the reduction's
/// input's, when it ends in one).
llvm::ArrayRef<int64_t> loopShape(const FusionGroup &group);

/// A GEMM that computes the adds reading its product: `adds` in program
/// order, each the only reader of the previous value (the product first),
/// adding `bias` (a row vector broadcast over the rows: one element per
/// column) or `addend` (a tensor of the product's type, read as the GEMM's
/// C with beta 1). The product and every add's result but the last are
/// never stored; the GEMM runs at the last add's place and writes its result.
struct GemmEpilogue {
  mlir::Operation *matmul = nullptr;
  llvm::SmallVector<mlir::Operation *, 2> adds;
  mlir::Value bias, addend;
  mlir::Value result() const { return adds.back()->getResult(0); }
  /// What the GEMM reads: the product's operands, then the bias and the
  /// addend where there are.
  llvm::SmallVector<mlir::Value, 4> inputs() const {
    llvm::SmallVector<mlir::Value, 4> values(matmul->getOperands());
    for (mlir::Value v : {bias, addend})
      if (v)
        values.push_back(v);
    return values;
  }
};

/// Fusion groups of the optimizer step (the step's own ops, outside every
/// micro-batch) that run as one kernel (horizontal fusion): the same ops
/// with the same constants on inputs of the same types, each input either
/// dense over its group's loop shape or one element, every group a loop
/// over its own shape (AdamW's update of each parameter: p, g, m and v, and
/// the step's factors), or every group a reduction of all its elements to
/// one (the gradient norm's sum of squares of each, which in bf16 programs
/// also writes the gradient cast to f32). They
/// run together at the last one's place: none reads another's values, and
/// nothing reads theirs before that place.
struct GroupBatch {
  /// The groups (FusionPlan::groups), in the order of their places.
  llvm::SmallVector<unsigned> groups;
  /// Whether the batch runs at its first group's place rather than its
  /// last: a batch of small groups that read only the program's arguments
  /// (the bf16 copies of a model's biases and norm weights), ready from the
  /// start, which would otherwise be a launch each.
  bool early = false;
  /// Per input (the first group's inputs' order): whether it is one
  /// element in every group (read at index 0), and whether it is the same
  /// value in every group (passed once).
  llvm::SmallVector<bool> scalar, shared;
};

/// A sum over the rows of what a LayerNorm's or RMSNorm's gradient kernel
/// reads or writes (FusionPlan::normGradSums), which the gradient's rule
/// (passes/autodiff/gradients/Normalization.cpp) and the bias before the
/// norm leave as reductions over every dimension before the normalized
/// ones: the kernel adds each row into per-block partial sums, and a second
/// launch adds those. The reduction reads, each operand x, dy widened or
/// not by a cast read by nothing else (and so every op of the chain):
///   ResultGrad: dy (the norm's bias's gradient);
///   ScaleGrad:  dy * ((x - mean) * rstd) (its scale's; rms_norm: x * rstd),
///               mean and rstd the gradient's own results;
///   InputGrad:  what the kernel writes, the input's gradient or its add
///               (the gradient of the bias of the product the norm reads).
struct NormGradSum {
  enum class Kind { ResultGrad, ScaleGrad, InputGrad };
  Kind kind;
  mlir::Operation *reduction;
};

struct FusionPlan {
  std::vector<FusionGroup> groups;
  /// The group of each fused op.
  llvm::DenseMap<mlir::Operation *, unsigned> groupOf;
  /// Splat constants whose every use is inlined: never materialized.
  llvm::DenseSet<mlir::Operation *> inlinedConstants;

  /// Ops folded into the kernel of their only user, which reads their
  /// operand in their place (rowSourceOf): a softmax, log-softmax or
  /// log_sum_exp over the last dimension, or an nll_loss, reads a widening
  /// cast's bf16 or f16 operand, and a slice's window of whole rows in
  /// place (the logits of a padded vocabulary); an nll_loss also reads
  /// through a reshape keeping the last dimension and a difference x -
  /// shift, one shift per row (ppc-split-log-softmax). Each maps to that
  /// user, at whose place it runs.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> foldedInto;

  /// GEMMs with epilogues, and the epilogue of each matmul and add in one.
  std::vector<GemmEpilogue> epilogues;
  llvm::DenseMap<mlir::Operation *, unsigned> epilogueOf;
  /// The epilogue `op` (a matmul or one of its adds) is part of, or null.
  const GemmEpilogue *epilogue(mlir::Operation *op) const;

  /// Norm gradients that add their input's gradient to another value in
  /// their kernel (the residual stream's gradient, a tensor of its type
  /// computed before it): the add of each such layer_norm_grad or
  /// rms_norm_grad, the only reader of its input_grad, which is never
  /// stored. The add runs at the gradient's place; its other operand is the
  /// kernel's addend (normGradAddend).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> normGradAdd, normGradOfAdd;
  /// The value a norm gradient with an add adds, or null.
  mlir::Value normGradAddend(mlir::Operation *grad) const;

  /// The column sums each norm gradient's kernel computes (NormGradSum),
  /// and for every op of their chains (the reductions included) the
  /// gradient at whose place it runs. A chain's values are never stored but
  /// its reduction's, which the kernel's last step writes.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<NormGradSum, 3>> normGradSums;
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> normGradOfSum;

  /// Log_sum_exps over the last dimension computed in the kernel of the
  /// group that reads their result per row (the logits' gradient, which
  /// ppc-hoist-logits-gradient moves next to them): the group's kernel
  /// computes each row's log_sum_exp as it reads the row, writes it, then
  /// the row's elements. Each log_sum_exp maps to the group's last op, at
  /// whose place it runs, and that op back to it.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> rowLogSumExpPlace, rowLogSumExpOf;

  /// Sums over rows that a GEMM computes in its epilogue (CUDA: cuBLASLt's
  /// BGRADA and BGRADB): a reduce_sum of a value over every dimension but
  /// the last, where that value (through its reshape to 2-D) is the second
  /// operand of a later product of one matrix by another, or transposed its
  /// first, the other operand ready at the sum's place: a bias's gradient
  /// beside its weight's (`x^T dy`, Hugging Face's Conv1D; `dy^T x`, a
  /// Linear's). The product runs at the sum's place and writes both
  /// (falling back to the sum's own kernel where cuBLASLt has no such
  /// algorithm); each maps to the other, and `sumsOfB` holds the products
  /// whose second operand is summed.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> sumsGemm, sumsOf;
  llvm::DenseSet<mlir::Operation *> sumsOfB;

  /// Batches of alike groups (at least two each), and the batch of each
  /// group in one.
  std::vector<GroupBatch> batches;
  llvm::DenseMap<unsigned, unsigned> batchOf;
  /// The batch group `g` runs in, or null.
  const GroupBatch *batch(unsigned g) const;
  /// The op at whose place a batch runs: its last group's last op, or its
  /// first group's if early.
  mlir::Operation *place(const GroupBatch &batch) const;

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
  /// A folded difference's per-row shift (nll_loss's), or null.
  mlir::Value shift;
};
RowSource rowSourceOf(const FusionPlan &plan, mlir::Value operand);

struct FusionOptions {
  /// A reduction of a group value ends that group.
  bool fuseReductions = true;
  /// Products take the adds of a bias and a residual that read them into
  /// their GEMMs first (GemmEpilogue).
  bool gemmEpilogues = false;
  /// Products compute the sums of an operand over k where those are a
  /// bias's gradient (FusionPlan::sumsGemm).
  bool gemmSums = false;
  /// Norm gradients compute the sums over their rows (NormGradSum).
  bool normGradSums = true;
  /// A group computes the log_sum_exp of the rows it reads its result by
  /// (FusionPlan::rowLogSumExpOf).
  bool rowLogSumExps = true;
  /// The optimizer step's alike groups run as one kernel (GroupBatch).
  bool batchOptimizer = false;
  /// Alike small groups that read only the program's arguments run as one
  /// kernel at the first one's place (GroupBatch::early).
  bool batchArgumentGroups = false;
  /// With batchArgumentGroups, groups of any size (a model's bf16 weight
  /// copies too, then all made at the first one's place).
  bool batchLargeArgumentGroups = false;
};

/// Groups the elementwise ops of `func`.
FusionPlan planFusion(mlir::func::FuncOp func, const FusionOptions &options = {});

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
