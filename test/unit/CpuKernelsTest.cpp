//===- CpuKernelsTest.cpp - library kernels of the CPU target -------------===//
//
// The kernels of runtime/ppcrt/CpuKernels.h that the end-to-end runs do not
// reach with every option, against a direct computation in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/CpuKernels.h"
#include "test/unit/ArgMaxReference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

// Every line's arg_max against a scan in double: largest and smallest, first
// and last of equal elements (the values repeat), along a middle axis.
TEST(CpuKernels, ArgMaxMatchesAScan) {
  const int64_t outer = 4, n = 9, inner = 3;
  std::vector<float> in = ppc::test::argMaxInput(outer * n * inner);
  std::vector<int64_t> out(outer * inner);
  for (bool largest : {true, false})
    for (bool last : {false, true}) {
      ppcrt::cpu::argMax(in.data(), out.data(), outer, n, inner, largest, last);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j)
          ASSERT_EQ(out[o * inner + j], ppc::test::argMaxOfLine(in, n, inner, o, j, largest, last))
              << "largest " << largest << " last " << last << " line " << o << "," << j;
    }
}

// NaN is the extreme either way, the first (last) of several NaNs.
TEST(CpuKernels, ArgMaxTakesNaNFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> in = {1, nan, 5, nan, -2};
  int64_t out;
  ppcrt::cpu::argMax(in.data(), &out, 1, 5, 1, true, false);
  EXPECT_EQ(out, 1);
  ppcrt::cpu::argMax(in.data(), &out, 1, 5, 1, false, true);
  EXPECT_EQ(out, 3);
}

} // namespace
