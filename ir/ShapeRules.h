//===- ShapeRules.h - shape arithmetic shared by ops and importer -*- C++ -*-===//
//
// Pure shape computations. They report failure through an error callback so
// the same rule serves op verification (diagnostic at the op) and ONNX import
// (error naming the node).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_IR_SHAPERULES_H
#define PPC_IR_SHAPERULES_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

namespace ppc {

using Shape = llvm::SmallVector<int64_t, 6>;
using ErrorFn = llvm::function_ref<void(const llvm::Twine &)>;

/// Numpy/ONNX multidirectional broadcast of several shapes.
mlir::FailureOr<Shape> broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes,
                                       ErrorFn error);

/// True when `from` broadcasts to exactly `to` (unidirectional).
bool broadcastsTo(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to);

/// Shape of a batched matmul; both ranks >= 2.
mlir::FailureOr<Shape> matmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                                   ErrorFn error);

/// Shape of a reduction over sorted unique non-negative `axes`.
mlir::FailureOr<Shape> reduceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> axes,
                                   bool keepdims, ErrorFn error);

/// Number of elements of a strided slice of a dimension; fails on bounds.
mlir::FailureOr<int64_t> sliceSize(int64_t dim, int64_t start, int64_t limit, int64_t step,
                                   ErrorFn error);

/// A parsed explicit einsum equation: one label list per input and output.
struct EinsumSpec {
  llvm::SmallVector<std::string> inputs;
  std::string output;
};

/// Parses an explicit equation "ab,bc->ac" (letters only, no ellipsis).
mlir::FailureOr<EinsumSpec> parseEinsum(llvm::StringRef equation, ErrorFn error);

/// Output shape of an einsum; checks label counts and sizes.
mlir::FailureOr<Shape> einsumShape(const EinsumSpec &spec,
                                   llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes, ErrorFn error);

/// The product of a shape that is already bounded: an IR type (every ppc op
/// verifies its results, BoundedTensorsTrait) or a shape that passed
/// checkedTensorBytes (runtime/CheckedSize.h). Dimensions from anywhere else
/// go through those checks first.
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// Whether a transpose's permutation swaps the last two dimensions and
/// nothing else (what a GEMM can read in place with its transpose flag).
bool swapsLastTwo(llvm::ArrayRef<int64_t> perm);

} // namespace ppc

#endif // PPC_IR_SHAPERULES_H
