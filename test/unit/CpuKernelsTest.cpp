//===- CpuKernelsTest.cpp - library kernels of the CPU target -------------===//
//
// The kernels of runtime/ppcrt/CpuKernels.h that the end-to-end runs do not
// reach with every option, against a direct computation in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

// Every line's arg_max against a scan in double: largest and smallest, first
// and last of equal elements (the values repeat), along a middle axis.
TEST(CpuKernels, ArgMaxMatchesAScan) {
  const int64_t outer = 4, n = 9, inner = 3;
  std::vector<float> in(outer * n * inner);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(int64_t(i * 5) % 7);
  std::vector<int64_t> out(outer * inner);
  for (bool largest : {true, false})
    for (bool last : {false, true}) {
      ppcrt::cpu::argMax(in.data(), out.data(), outer, n, inner, largest, last);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
          auto at = [&](int64_t i) { return double(in[(o * n + i) * inner + j]); };
          int64_t best = 0;
          for (int64_t i = 1; i < n; ++i)
            if (largest ? at(i) > at(best) || (last && at(i) == at(best))
                        : at(i) < at(best) || (last && at(i) == at(best)))
              best = i;
          ASSERT_EQ(out[o * inner + j], best)
              << "largest " << largest << " last " << last << " line " << o << "," << j;
        }
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
