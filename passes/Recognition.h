//===- Recognition.h - helpers of the passes that recognise ops -*- C++ -*-===//
//
// What ppc-fuse-attention and ppc-fuse-rms-norm share: reading a scalar
// constant of the composition they match, and erasing what only the
// replaced composition read.
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

/// Erases the ppc ops of `func` that are pure and unread, users before their
/// operands: what only a replaced composition read.
void eraseUnreadPpcOps(mlir::func::FuncOp func);

} // namespace ppc

#endif // PPC_PASSES_RECOGNITION_H
