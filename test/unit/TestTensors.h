//===- TestTensors.h - tensors written out in unit tests --------*- C++ -*-===//
//
// Building host tensors from values written as doubles, and comparing them
// with expected values, for the executor's tests.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_TESTTENSORS_H
#define PPC_TEST_UNIT_TESTTENSORS_H

#include "executor/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace ppc::test {

/// A tensor from values written as doubles (exact for the small integers
/// and binary fractions the tests use).
inline Tensor makeTensor(DType dtype, llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<double> values) {
  Tensor tensor(dtype, shape);
  EXPECT_EQ(tensor.numElements(), static_cast<int64_t>(values.size()));
  for (auto [i, v] : llvm::enumerate(values))
    tensor.setDouble(i, v);
  return tensor;
}

/// Expects `actual` to have `shape` and exactly the `expected` values (NaN
/// where a NaN is expected); `what` names it in failures.
inline void expectValues(const Tensor &actual, llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<double> expected, const std::string &what = "") {
  std::string prefix = what.empty() ? "" : what + ", ";
  ASSERT_EQ(actual.shape(), shape) << what;
  ASSERT_EQ(actual.numElements(), static_cast<int64_t>(expected.size())) << what;
  for (auto [i, e] : llvm::enumerate(expected)) {
    if (std::isnan(e))
      EXPECT_TRUE(std::isnan(actual.getDouble(i))) << prefix << "element " << i;
    else
      EXPECT_EQ(actual.getDouble(i), e) << prefix << "element " << i;
  }
}

} // namespace ppc::test

#endif // PPC_TEST_UNIT_TESTTENSORS_H
