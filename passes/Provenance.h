//===- Provenance.h - where the ops of @train_step come from ----*- C++ -*-===//
//
// The training passes record on each op which part of the step it belongs
// to, as discardable attributes, so that later passes need not rediscover
// it from the dataflow:
//  - ppc.fwd = i: the op is forward op i of @forward (its position in
//    @forward's body, 0-based);
//  - ppc.bwd = i: the op was built by the gradient rule of forward op i
//    (the backward of that op);
//  - ppc.mb = j: the op belongs to micro-batch j of @train_step;
//  - ppc.mb_grad = [p per result] / ppc.step_grad = [p per result]: the
//    result is the gradient of parameter p (its index among the step's
//    parameters; -1: none) of one micro-batch, or of the whole step (the
//    micro-batch mean, before clipping).
// Stage assignment (pipeline parallelism) puts forward op i and its
// backward on one stage; ZeRO reduces gradients where they are marked. The
// attributes keep apart ops that CSE would otherwise merge across
// micro-batches; an op without them (a folded constant) goes with its uses.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_PROVENANCE_H
#define PPC_PASSES_PROVENANCE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace ppc {

constexpr llvm::StringLiteral kForwardOpAttrName = "ppc.fwd";
constexpr llvm::StringLiteral kBackwardOfAttrName = "ppc.bwd";
constexpr llvm::StringLiteral kMicroBatchAttrName = "ppc.mb";
constexpr llvm::StringLiteral kMicroBatchGradAttrName = "ppc.mb_grad";
constexpr llvm::StringLiteral kStepGradAttrName = "ppc.step_grad";
/// A collective: why ppc-partition put it there (the layout change it makes
/// and what asked for it), as `ppc explain` prints it.
constexpr llvm::StringLiteral kWhyAttrName = "ppc.why";

/// The integer attribute `name` of `op`, if present.
inline std::optional<int64_t> intAttrOf(mlir::Operation *op, llvm::StringRef name) {
  if (!op)
    return std::nullopt;
  if (auto attr = op->getAttrOfType<mlir::IntegerAttr>(name))
    return attr.getInt();
  return std::nullopt;
}

/// Marks `value` (an op result) as the gradient of parameter `param` under
/// `name` (kMicroBatchGradAttrName or kStepGradAttrName). Block arguments
/// are not marked.
void markGradient(mlir::Value value, llvm::StringRef name, int64_t param);

/// The parameter `value` is marked the gradient of under `name`, if any.
std::optional<int64_t> gradientOf(mlir::Value value, llvm::StringRef name);

} // namespace ppc

#endif // PPC_PASSES_PROVENANCE_H
