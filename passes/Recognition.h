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

#include <optional>

namespace ppc {

/// The value of a one-element float constant, or nothing.
std::optional<double> floatScalarConstant(mlir::Value value);

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

} // namespace ppc

#endif // PPC_PASSES_RECOGNITION_H
