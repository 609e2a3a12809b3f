//===- CheckedSizeTest.cpp - element and byte counts of untrusted shapes --===//
//
// checkedElementCount and checkedTensorBytes: exact where the product fits,
// none or a one-line error where a dimension is negative, the product
// overflows int64 (at any position of the shape, zeros included) or the bytes
// pass kMaxTensorBytes; and the IR's sizes of types built on them.
//
//===----------------------------------------------------------------------===//

#include "runtime/CheckedSize.h"
#include "ir/PpcOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace ppc;

namespace {

constexpr int64_t kTwo62 = int64_t(1) << 62;

std::string errorOf(llvm::Expected<int64_t> bytes) {
  if (bytes)
    return "no error: " + std::to_string(*bytes);
  return llvm::toString(bytes.takeError());
}

TEST(CheckedElementCount, CountsWhatFits) {
  EXPECT_EQ(checkedElementCount({}), 1);
  EXPECT_EQ(checkedElementCount({2, 3, 4}), 24);
  EXPECT_EQ(checkedElementCount({INT64_MAX}), INT64_MAX);
  EXPECT_EQ(checkedElementCount({int64_t(1) << 31, int64_t(1) << 31}), int64_t(1) << 62);
  EXPECT_EQ(checkedElementCount({3, 0, 5}), 0);
}

TEST(CheckedElementCount, RefusesNegativeAndOverflow) {
  EXPECT_EQ(checkedElementCount({2, -1}), std::nullopt);
  EXPECT_EQ(checkedElementCount({kTwo62, 2}), std::nullopt);
  EXPECT_EQ(checkedElementCount({kTwo62, 4}), std::nullopt); // wraps to 0
  EXPECT_EQ(checkedElementCount({int64_t(1e12), int64_t(1e12)}), std::nullopt);
  EXPECT_EQ(checkedElementCount({INT64_MAX, INT64_MAX}), std::nullopt);
  // The strides of an empty tensor must fit too.
  EXPECT_EQ(checkedElementCount({0, kTwo62, 4}), std::nullopt);
  EXPECT_EQ(checkedElementCount({kTwo62, 4, 0}), std::nullopt);
}

TEST(CheckedTensorBytes, CountsBytesUpToTheLimit) {
  EXPECT_EQ(*checkedTensorBytes({2, 3}, 4, "f32"), 24);
  EXPECT_EQ(*checkedTensorBytes({}, 8, "f64"), 8);
  EXPECT_EQ(*checkedTensorBytes({0, 7}, 4, "f32"), 0);
  EXPECT_EQ(*checkedTensorBytes({int64_t(1) << 38}, 4, "f32"), kMaxTensorBytes);
  EXPECT_EQ(*checkedTensorBytes({kMaxTensorBytes}, 1, "u8"), kMaxTensorBytes);
}

TEST(CheckedTensorBytes, ErrorsNameTheShape) {
  EXPECT_EQ(errorOf(checkedTensorBytes({2, -3}, 4, "f32")),
            "shape [2,-3] has a negative dimension 1 (-3)");
  EXPECT_EQ(errorOf(checkedTensorBytes({kTwo62, 2}, 4, "f32")),
            "shape [4611686018427387904,2] has more elements than an int64 holds");
  EXPECT_EQ(errorOf(checkedTensorBytes({int64_t(1) << 38, 2}, 4, "f32")),
            "shape [274877906944,2] of f32 (549755813888 elements) takes "
            "2199023255552 "
            "bytes; ppc allows one tensor at most 2^40 (1 TiB)");
  EXPECT_EQ(errorOf(checkedTensorBytes({kMaxTensorBytes + 1}, 1, "u8")),
            "shape [1099511627777] of u8 (1099511627777 elements) takes "
            "1099511627777 "
            "bytes; ppc allows one tensor at most 2^40 (1 TiB)");
  // Elements that fit, bytes that do not.
  EXPECT_EQ(errorOf(checkedTensorBytes({int64_t(1) << 61}, 8, "f64")),
            "shape [2305843009213693952] of f64 (2305843009213693952 elements) takes "
            "more than 2^63 bytes; ppc allows one tensor at most 2^40 (1 TiB)");
}

TEST(TensorTypeBytes, CountsElementBytesOfEachType) {
  mlir::MLIRContext context;
  mlir::Builder b(&context);
  auto type = [&](llvm::ArrayRef<int64_t> shape, mlir::Type element) {
    return mlir::RankedTensorType::get(shape, element);
  };
  EXPECT_EQ(*tensorTypeBytes(type({2, 3}, b.getF32Type())), 24);
  EXPECT_EQ(*tensorTypeBytes(type({5}, b.getI1Type())), 5);
  EXPECT_EQ(*tensorTypeBytes(type({4}, b.getBF16Type())), 8);
  EXPECT_EQ(errorOf(tensorTypeBytes(type({kTwo62, 4}, b.getF32Type()))),
            "shape [4611686018427387904,4] has more elements than an int64 holds");
  EXPECT_EQ(errorOf(tensorTypeBytes(type({int64_t(1) << 38}, b.getF64Type()))),
            "shape [274877906944] of f64 (274877906944 elements) takes "
            "2199023255552 bytes; "
            "ppc allows one tensor at most 2^40 (1 TiB)");
}

TEST(BoundedTensorBytes, SaturatesWhatTheVerifierWouldRefuse) {
  mlir::MLIRContext context;
  mlir::Builder b(&context);
  EXPECT_EQ(boundedTensorBytes(mlir::RankedTensorType::get({2, 3}, b.getF32Type())), 24);
  EXPECT_EQ(boundedTensorBytes(mlir::RankedTensorType::get({kTwo62, 4}, b.getF32Type())),
            kMaxTensorBytes + 1);
  EXPECT_EQ(boundedTensorBytes(b.getF32Type()), 0);
}

} // namespace
