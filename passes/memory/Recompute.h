//===- Recompute.h - activation recomputation -------------------*- C++ -*-===//
//
// Activation recomputation (rematerialisation, "activation checkpointing"):
// a value the backward needs is either kept from the forward until its
// backward use, or computed again from kept values right before that use.
//
// The unit of recomputation is a *region*: the forward ops of one block of
// one micro-batch (`full`); or (`selective`) the attention core of one block
// of one micro-batch, and apart from it the block's elementwise chains whose
// activation inputs the backward keeps anyway (an exported GELU's
// x/√2 → erf → +1 → ·x chain, which a fused GELU never stores: recomputing
// it keeps nothing more and costs one memory-bound pass). A region's values that backward ops use
// are recomputed together, by clones of the region's ops inserted just before the first backward
// use of any of them (as torch.utils.checkpoint and Megatron-LM do it: a block's forward runs again
// when its backward begins). The clones run the same ops on the same operands in the same order, so
// the losses are bit-for-bit those of no recomputation.
//
// Blocks are found from the graph, not from model names:
//  - the scopes of the ONNX node names: the prefix of a node name up to its
//    first numbered scope ("/transformer/h.3/attn/MatMul" is in block
//    "/transformer/h.3"), the numbered module lists that torch.onnx.export
//    records and every transformer stacks its layers in;
//  - without any such scope, the segments between the cut points of the
//    forward (after an op whose result is the only activation the rest of
//    the forward reads: the residual stream between half-blocks), each
//    segment with at least two GEMMs a block.
// The attention core is the ops on the paths from one GEMM of two
// activations (Q·Kᵀ) to the next (P·V): the scores and probabilities, whose
// size grows with the square of the sequence.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_MEMORY_RECOMPUTE_H
#define PPC_PASSES_MEMORY_RECOMPUTE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace ppc {

/// The unit attribute on the clones that recompute a value.
inline constexpr llvm::StringLiteral kRecomputedAttrName = "ppc.recomputed";
/// The function attribute recording the level chosen per block, a
/// dictionary {block: "selective" | "full"} (blocks with none are left out).
inline constexpr llvm::StringLiteral kRecomputeAttrName = "ppc.recompute";

enum class RecomputePolicy { None, Selective, Full, Auto };

/// "none", "selective", "full" or "auto".
std::optional<RecomputePolicy> parseRecomputePolicy(llvm::StringRef name);

/// Recomputes in every block of `program` (a training program, partitioned
/// or not) as `policy` says, `Selective` or `Full` (`None` and `Auto` change
/// nothing): what the ppc-recompute pass does with that policy, and what the
/// planner prices a plan with.
void recomputeEveryBlock(mlir::func::FuncOp program, RecomputePolicy policy);

/// What the backward keeps of one block's forward, for one micro-batch.
struct BlockActivations {
  std::string block;
  /// Bytes of the activations of micro-batch 0 (values computed from the
  /// batch) that the block's backward, or its recomputing clones, read:
  /// what the forward keeps for the block, its input included. A value
  /// read by several blocks counts for the first.
  int64_t keptBytes = 0;
  /// Ops of micro-batch 0 recomputed for the block, and the bytes of what
  /// they compute again for the backward to read (what is not kept).
  int64_t recomputedOps = 0;
  int64_t recomputedBytes = 0;
  /// "none", "selective" or "full".
  std::string level = "none";
};

/// The blocks of `program` (a training program after the training pipeline,
/// partitioned or not) in forward order, and what each keeps.
std::vector<BlockActivations> describeBlockActivations(mlir::func::FuncOp program);

/// Prints `blocks` as `activations kept for the backward, per block
/// (micro-batch 0): ...`, runs of blocks alike folded into one line.
void printBlockActivations(llvm::ArrayRef<BlockActivations> blocks, llvm::StringRef title,
                           llvm::raw_ostream &os);

} // namespace ppc

#endif // PPC_PASSES_MEMORY_RECOMPUTE_H
