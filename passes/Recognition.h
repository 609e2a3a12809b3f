//===- Recognition.h - helpers of the passes that recognise ops -*- C++ -*-===//
//
// What the passes that recognise compositions share (ppc-fuse-attention,
// ppc-fuse-rms-norm, ppc-concat-slice-sums, ppc-simplify-one-hots, and the
// rewrites at the end of the parallelize pipeline): reading a scalar or
// splat constant of the composition they match, whether a float type holds
// a value exactly, carrying an op's place in the schedule to the ops made
// in its place, and erasing what only the replaced composition read.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_RECOGNITION_H
#define PPC_PASSES_RECOGNITION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace ppc {

/// The value of a one-element float constant, or nothing.
std::optional<double> floatScalarConstant(mlir::Value value);

/// The value of every element of `value` when it is a splat ppc.constant:
/// what kernels inline (codegen), what the partitioner makes in any layout
/// without a collective, and what the planner prices so.
std::optional<mlir::Attribute> splatValue(mlir::Value value);

/// Whether `op` is a reduction a fusion group can end in (codegen), and its
/// kind's name in ppcrt ("Sum", "Mean", "Max", "Min"); "" otherwise.
llvm::StringRef fusableReduction(mlir::Operation *op);

/// Whether `value` is a constant whose every element is zero (float or
/// integer).
bool isZerosConstant(mlir::Value value);

/// Whether `type` holds `value` exactly (2/sqrt(pi) is 1.125 in bf16).
bool holdsExactly(mlir::FloatType type, llvm::APFloat value);

/// Where `from` sat in the schedule (ppc.fwd, ppc.bwd, ppc.mb: its
/// discardable attributes but its layout, ppc.shardings, which described
/// its own result), set on the ops `made` in its place.
void copySchedule(mlir::Operation *from, llvm::ArrayRef<mlir::Operation *> made);

/// Erases the ppc ops of `func` that are pure and unread, users before their
/// operands: what only a replaced composition read.
void eraseUnreadPpcOps(mlir::func::FuncOp func);

/// The operand of the binary `op` other than `value`, or null when `op`
/// does not read `value` (or reads it twice).
mlir::Value otherOperand(mlir::Operation *op, mlir::Value value);

/// Calls `fuse` (returning how many compositions it replaced) on each op of
/// type OpT in `func`, collected before the first call, then erases what
/// only the replaced compositions read (eraseUnreadPpcOps) if any was.
template <typename OpT, typename Fn> void fuseEach(mlir::func::FuncOp func, Fn &&fuse) {
  llvm::SmallVector<OpT> ops;
  func.walk([&](OpT op) { ops.push_back(op); });
  int fused = 0;
  for (OpT op : ops)
    fused += fuse(op);
  if (fused)
    eraseUnreadPpcOps(func);
}

} // namespace ppc

#endif // PPC_PASSES_RECOGNITION_H
