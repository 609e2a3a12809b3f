//===- StridedViews.h - attention operands read and written in place -*- C++ -*-===//
//
// An imported attention reads its heads through copies: the fused QKV
// projection [B, T, 3 d] is sliced into q, k and v, each reshaped to
// [B, T, H, dh] and transposed to [B, H, T, dh]; its output is transposed
// back and reshaped to [B, T, d]; its gradient's dq, dk and dv go the same
// way back and are concatenated (ppc-concat-slice-sums) into the QKV
// projection's gradient. Every one of those slices, transposes and concats
// is a kernel that copies a whole activation (GPT-2 124M: 1.85 ms of a
// predicted 25.1 ms step on an H100).
//
// The attention kernels take each operand's rows where they lie
// (ppcrt::lines::AttentionRows: the heads two runs of strides, the rows one
// stride, the elements of a row one apart), so none of those copies is
// needed: this layout step makes them views. The rotary kernels
// (ppc.rotary, between the projection and attention in LLaMA-style
// models) read their input and write their result by rows as well.
//
//  - Reading: a slice (steps 1 along the last dimension), a transpose that
//    keeps the last dimension last, or a reshape of either, is a view of
//    the buffer its chain starts from when every use of its result, through
//    such ops, is an operand the attention kernels read by rows (q, k, v;
//    the gradient's o and dO) and that operand's strides are rows, or an
//    operand of a concat whose pieces (the elements from the concat's axis
//    on) are dense and one pitch apart (rotary embedding's halves of q and
//    k, ppc-hoist-concat-negations).
//  - Writing: an attention's output, or its gradient's dq, dk or dv, whose
//    only other use is a transpose (keeping the last dimension last) or a
//    reshape, and so on, possibly ending in a concat all of whose operands
//    are written so, is written into the buffer of the chain's last value;
//    the ops of the chain emit no code, and that buffer's life begins at
//    the first kernel that writes into it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_STRIDEDVIEWS_H
#define PPC_CODEGEN_STRIDEDVIEWS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace ppc::codegen {

struct FusionPlan;

/// A tensor kept in another's buffer: its element at coordinates c is
/// element offset + sum c[d] * strides[d] of `stored`'s buffer.
struct StridedView {
  mlir::Value stored;
  int64_t offset = 0;
  llvm::SmallVector<int64_t> strides;
};

/// The views of one program (planStridedViews).
struct StridedViews {
  llvm::DenseMap<mlir::Value, StridedView> views;
  /// The slices, transposes, reshapes and concats that emit no code.
  llvm::DenseSet<mlir::Operation *> inPlace;
};

/// The attention operands of `program` read and written in place (see
/// above), given its fusion plan (fused ops are never views).
StridedViews planStridedViews(mlir::func::FuncOp program, const FusionPlan &fusion);

/// The pitch, in elements, at which a concat along `axis` reads the pieces
/// of an operand of shape `shape` held as `view`: each piece (the elements
/// from `axis` on) dense, the pieces one pitch apart; or nothing.
std::optional<int64_t> concatRows(llvm::ArrayRef<int64_t> shape, const StridedView &view,
                                  int64_t axis);

/// Batch dimensions (`sizes`, `strides`) as an attention kernel indexes
/// them: batch index n at (n / inner) * outerStride + (n % inner) *
/// innerStride. Runs of dimensions one stride apart (or all broadcast,
/// stride 0) merge; more than two runs do not fit.
struct BatchStrides {
  int64_t inner = 1, outerStride = 0, innerStride = 0;
};
std::optional<BatchStrides> collapseBatch(llvm::ArrayRef<int64_t> sizes,
                                          llvm::ArrayRef<int64_t> strides);

/// `ppcrt::lines::AttentionRows{...}` of a [..., rows, size] operand held
/// as `view`, or nullopt where its strides are not rows (more than two
/// runs of batch strides, or elements not one apart).
std::optional<std::string> attentionRows(llvm::ArrayRef<int64_t> shape, const StridedView &view);

} // namespace ppc::codegen

#endif // PPC_CODEGEN_STRIDEDVIEWS_H
