//===- Tensor.h - host tensors of the reference executor ---------*- C++ -*-===//
//
// The executor favours exactness and clarity over speed: float elements are
// held as double and integer/boolean elements as int64_t, whatever the dtype.
// The dtype says what the values represent; every kernel rounds its results
// to their dtype, so an f32 program computes each op exactly and rounds once.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_EXECUTOR_TENSOR_H
#define PPC_EXECUTOR_TENSOR_H

#include "ir/ShapeRules.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "runtime/ppcrt/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace ppc {

/// The project's one element-type enum (runtime/ppcrt/DType.h).
using DType = ppcrt::DType;

bool isFloat(DType dtype);
/// Bytes per element in the ONNX/numpy representation (1 for I1), as an
/// int64_t: ppcrt::dtypeBytes.
inline int64_t byteWidth(DType dtype) { return int64_t(ppcrt::dtypeBytes(dtype)); }
llvm::StringRef dtypeName(DType dtype);
mlir::FailureOr<DType> dtypeOf(mlir::Type elementType);
mlir::Type mlirType(DType dtype, mlir::MLIRContext *context);

/// Rounds `value` to what `dtype` can hold (floats: IEEE round-to-nearest;
/// integers: truncation toward zero, then two's-complement wrap; I1: != 0).
double roundFloat(DType dtype, double value);
int64_t wrapInteger(DType dtype, int64_t value);

/// The bytes of a tensor of `dtype` and `shape` in that dtype:
/// checkedTensorBytes (runtime/CheckedSize.h), an error beginning with the
/// shape when a dimension is negative or the size is not within
/// kMaxTensorBytes.
llvm::Expected<int64_t> tensorBytes(DType dtype, llvm::ArrayRef<int64_t> shape);

/// Row-major strides of `shape`, in elements.
Shape stridesOf(llvm::ArrayRef<int64_t> shape);

class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor. `shape` must be bounded (numElements); one
  /// computed from untrusted dimensions goes through `allocate`.
  Tensor(DType dtype, llvm::ArrayRef<int64_t> shape);
  /// Checks a shape not yet checked before a tensor of it is built: an error
  /// beginning with the shape when the tensor's bytes in `dtype`, or in the 8
  /// bytes per element the executor holds it in, are not within
  /// kMaxTensorBytes (runtime/CheckedSize.h).
  static llvm::Error checkShape(DType dtype, llvm::ArrayRef<int64_t> shape);
  /// A zero-filled tensor of a shape not yet checked (checkShape).
  static llvm::Expected<Tensor> allocate(DType dtype, llvm::ArrayRef<int64_t> shape);

  DType dtype() const { return dtype_; }
  llvm::ArrayRef<int64_t> shape() const { return shape_; }
  int64_t rank() const { return shape_.size(); }
  int64_t numElements() const { return numElements_; }
  bool isFloat() const { return ppc::isFloat(dtype_); }

  /// Element storage; `floats()` for float dtypes, `ints()` otherwise.
  llvm::MutableArrayRef<double> floats() { return floats_; }
  llvm::ArrayRef<double> floats() const { return floats_; }
  llvm::MutableArrayRef<int64_t> ints() { return ints_; }
  llvm::ArrayRef<int64_t> ints() const { return ints_; }

  /// Element `index` (flat) as a double, whatever the dtype.
  double getDouble(int64_t index) const;
  /// Stores `value` at `index`, converted and rounded to the dtype.
  void setDouble(int64_t index, double value);
  /// Element `index` as an integer (floats truncate toward zero).
  int64_t getInt(int64_t index) const;
  void setInt(int64_t index, int64_t value);

  /// Rounds every element to the dtype (after a kernel wrote raw values).
  void roundToDType();
  /// The same values as another dtype (ONNX Cast semantics).
  Tensor castTo(DType dtype) const;
  /// The same elements with another shape of equal size.
  Tensor reshaped(llvm::ArrayRef<int64_t> shape) const;

  /// A tensor from `numElements(shape) * byteWidth(dtype)` little-endian
  /// bytes in the ONNX/numpy layout (bool as one byte, f16/bf16 as bits).
  static Tensor fromBytes(DType dtype, llvm::ArrayRef<int64_t> shape, const char *data);
  /// The tensor's bytes in that layout.
  std::string toBytes() const;

  static mlir::FailureOr<Tensor> fromAttr(mlir::ElementsAttr attr);
  mlir::DenseElementsAttr toAttr(mlir::MLIRContext *context) const;

private:
  DType dtype_ = DType::F32;
  Shape shape_;
  int64_t numElements_ = 0;
  std::vector<double> floats_;
  std::vector<int64_t> ints_;
};

} // namespace ppc

#endif // PPC_EXECUTOR_TENSOR_H
