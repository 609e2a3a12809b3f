//===- Recognition.h - helpers of the passes that recognise ops -*- C++ -*-===//
//
// What the passes that recognise compositions share (ppc-fuse-attention,
// ppc-fuse-rms-norm, ppc-concat-slice-sums, ppc-simplify-one-hots): reading
// a scalar or splat constant of the composition they match, and erasing
// what only the replaced composition read.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_RECOGNITION_H
#define PPC_PASSES_RECOGNITION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace ppc {

/// The value of a one-element float constant, or nothing.
std::optional<double> floatScalarConstant(mlir::Value value);

/// Whether `value` is a constant whose every element is zero (float or
/// integer).
bool isZerosConstant(mlir::Value value);

/// Erases the ppc ops of `func` that are pure and unread, users before their
/// operands: what only a replaced composition read.
void eraseUnreadPpcOps(mlir::func::FuncOp func);

} // namespace ppc

#endif // PPC_PASSES_RECOGNITION_H
