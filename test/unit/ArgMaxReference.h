//===- ArgMaxReference.h - arg_max's lines by a scan in double ----*- C++ -*-===//
//
// The reference both targets' arg_max kernels are checked against
// (CpuKernelsTest.cpp, cuda/EmulatedKernelsTest.cpp): a plain scan of each
// line of [outer, n, inner] in double, independent of runtime/ppcrt/Lines.h.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_ARGMAXREFERENCE_H
#define PPC_TEST_UNIT_ARGMAXREFERENCE_H

#include <cstdint>
#include <vector>

namespace ppc::test {

/// The values the kernel tests search: repeating, so ties occur on every line.
inline std::vector<float> argMaxInput(int64_t elements) {
  std::vector<float> in(elements);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(int64_t(i * 5) % 7);
  return in;
}

/// The position of the largest (smallest) element of line (o, j), the first
/// of equals (the last with `last`). No NaN: the tests of NaN are separate.
inline int64_t argMaxOfLine(const std::vector<float> &in, int64_t n, int64_t inner, int64_t o,
                            int64_t j, bool largest, bool last) {
  auto at = [&](int64_t i) { return double(in[(o * n + i) * inner + j]); };
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (largest ? at(i) > at(best) || (last && at(i) == at(best))
                : at(i) < at(best) || (last && at(i) == at(best)))
      best = i;
  return best;
}

} // namespace ppc::test

#endif // PPC_TEST_UNIT_ARGMAXREFERENCE_H
