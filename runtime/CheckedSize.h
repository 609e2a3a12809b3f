//===- CheckedSize.h - element and byte counts of untrusted shapes -*- C++
//-*-===//
//
// Every element count or byte count computed from dimensions someone else
// wrote (a model's initializers, graph inputs and constant shape operands,
// --dim, .npy headers) goes through checkedElementCount or
// checkedTensorBytes, never through a plain product: a product of int64
// dimensions wraps silently, and a wrapped count then sizes an allocation
// or passes a length check it should fail. Header-only, LLVM Support only:
// the IR, the importer, the executor and the runtime use it without linking
// one another.
//
// The limit: one tensor may take at most kMaxTensorBytes = 2^40 bytes (1 TiB),
// counted as ppc holds it: in its dtype in the IR and the executables, in 8
// bytes per element where the importer or the reference executor builds it
// in host memory. That is about 8 times the memory of the largest
// accelerator (an H200 holds 141 GB, about 2^37 bytes) and twice the size of
// a large training run's largest tensor (such as the f32 logits of a global
// micro-batch of 128 sequences of 8192 tokens over a 128k vocabulary: about
// 2^39 bytes), so no real model is refused; and sums of fewer than 2^23 such
// sizes (live bytes, arena offsets) cannot overflow an int64.
//
// Sums of sizes use llvm::checkedAdd (included here).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CHECKEDSIZE_H
#define PPC_RUNTIME_CHECKEDSIZE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdint>
#include <optional>
#include <string>

namespace ppc {

/// The most bytes one tensor may take (see the file comment for why).
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;

/// "[2,3]": how size errors show a shape.
inline std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// The number of elements of `shape`, or none when a dimension is negative
/// or the product of its non-zero dimensions overflows int64 (so that every
/// row-major stride of the shape fits in an int64 too, even when a zero
/// dimension makes the tensor empty).
inline std::optional<int64_t> checkedElementCount(llvm::ArrayRef<int64_t> shape) {
  int64_t extent = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    std::optional<int64_t> product = llvm::checkedMul(extent, d);
    if (!product)
      return std::nullopt;
    extent = *product;
  }
  return empty ? 0 : extent;
}

/// The bytes of a tensor of `shape` whose elements take `elementBytes` each;
/// an error when a dimension is negative, the element count overflows int64
/// (checkedElementCount), or the bytes exceed kMaxTensorBytes. The message
/// begins with the shape and names no tensor ("shape [4611686018427387904,4]
/// has more elements than an int64 holds"): the caller prefixes whose shape it
/// is. `elementName` says what the elements are ("f32", "i1 held in 8 bytes").
inline llvm::Expected<int64_t> checkedTensorBytes(llvm::ArrayRef<int64_t> shape,
                                                  int64_t elementBytes,
                                                  llvm::StringRef elementName) {
  auto fail = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "shape " + shapeString(shape) + " " + message);
  };
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      return fail(llvm::formatv("has a negative dimension {0} ({1})", i, shape[i]).str());
  std::optional<int64_t> elements = checkedElementCount(shape);
  if (!elements)
    return fail("has more elements than an int64 holds");
  std::optional<int64_t> bytes = llvm::checkedMul(*elements, elementBytes);
  if (!bytes || *bytes > kMaxTensorBytes)
    return fail(llvm::formatv("of {0} ({1} elements) takes {2} bytes; ppc allows one "
                              "tensor at most 2^40 (1 TiB)",
                              elementName, *elements,
                              bytes ? std::to_string(*bytes) : "more than 2^63")
                    .str());
  return *bytes;
}

} // namespace ppc

#endif // PPC_RUNTIME_CHECKEDSIZE_H
