//===- MathTest.cpp - runtime/ppcrt/Math.h against libm in double ---------===//
//
// Each function over a sweep of float bit patterns (every 509th, both
// signs, subnormals to infinities, then every float near the branch points)
// against the double-precision libm value, in units in the last place of
// the float nearest it; the IEEE special values exactly; and a loop the
// compiler vectorizes against the same calls one by one, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/Math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

namespace math = ppcrt::math;

float fromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

/// |got - want| in ulps of the float nearest `want` (subnormals: 2^-149);
/// an overflow to infinity counts from the largest float.
double ulpError(float got, double want) {
  float nearest = float(want);
  if (got == nearest || (std::isnan(got) && std::isnan(want)))
    return 0.0;
  if (std::isnan(got) || std::isnan(want))
    return std::numeric_limits<double>::infinity();
  const double largest = std::numeric_limits<float>::max();
  double g = std::isinf(got) ? std::copysign(largest * (1 + 0x1p-23), got) : double(got);
  double w = std::isinf(want) ? std::copysign(largest * (1 + 0x1p-23), want) : want;
  double magnitude = std::fabs(std::isinf(nearest) ? largest : double(nearest));
  double ulp = 0x1p-149;
  if (magnitude >= std::numeric_limits<float>::min()) {
    int exponent;
    std::frexp(magnitude, &exponent);
    ulp = std::ldexp(1.0, exponent - 24);
  }
  return std::fabs(g - w) / ulp;
}

struct Case {
  const char *name;
  float (*fn)(float);
  double (*exact)(double);
  double ulps;                     // the bound the header's comment states
  std::vector<float> branchPoints; // swept float by float around each
};

std::vector<Case> cases() {
  return {
      {"exp", math::exp, [](double x) { return std::exp(x); }, 1.0, {-103.97f, -87.34f, 88.72f}},
      {"tanh", math::tanh, [](double x) { return std::tanh(x); }, 2.0, {0.625f, 9.02f}},
      {"erf", math::erf, [](double x) { return std::erf(x); }, 3.0, {1.0f, 4.0f}},
      {"sigmoid",
       math::sigmoid,
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
       3.0,
       {0.0f, -87.34f, -103.97f}},
  };
}

TEST(Math, WithinTheStatedUlpsOfLibmInDouble) {
  for (const Case &c : cases()) {
    double worst = 0.0;
    float at = 0.0f;
    auto check = [&](float x) {
      double error = ulpError(c.fn(x), c.exact(double(x)));
      if (error > worst)
        worst = error, at = x;
    };
    for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 509)
      check(fromBits(uint32_t(bits)));
    for (float point : c.branchPoints)
      for (float sign : {1.0f, -1.0f}) {
        float x = sign * point;
        for (int i = 0; i < 20000; ++i)
          x = std::nextafter(x, -std::numeric_limits<float>::infinity());
        for (int i = 0; i < 40000;
             ++i, x = std::nextafter(x, std::numeric_limits<float>::infinity()))
          check(x);
      }
    EXPECT_LE(worst, c.ulps) << c.name << " at " << at;
  }
}

TEST(Math, SpecialValuesAsLibm) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case &c : cases())
    for (float x : {0.0f, -0.0f, inf, -inf, nan, -nan, 1e-45f, -1e-45f, 1e38f, -1e38f}) {
      float got = c.fn(x);
      double want = c.exact(double(x));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c.name << "(" << x << ") = " << got;
        continue;
      }
      EXPECT_LE(ulpError(got, want), c.ulps) << c.name << "(" << x << ") = " << got;
      if (want == 0.0 || std::isinf(want))
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << c.name << "(" << x << ")";
    }
}

// Generated code calls these in loops that GCC vectorizes, with a scalar
// tail; a recomputed op must round alike in either (e2e-recompute).
__attribute__((optimize("no-tree-vectorize"))) void scalarLoop(float (*fn)(float), const float *in,
                                                               float *out, int n) {
  for (int i = 0; i < n; ++i)
    out[i] = fn(in[i]);
}

template <float (*Fn)(float)>
void vectorLoop(const float *__restrict in, float *__restrict out, int n) {
  for (int i = 0; i < n; ++i)
    out[i] = Fn(in[i]);
}

TEST(Math, VectorizedLoopsGiveTheScalarBits) {
  std::vector<float> in;
  for (uint64_t bits = 7; bits <= 0xffffffffu; bits += 65521)
    in.push_back(fromBits(uint32_t(bits)));
  const int n = int(in.size());
  std::vector<float> scalar(n), vector(n);
  struct Loop {
    const char *name;
    float (*fn)(float);
    void (*vectorized)(const float *, float *, int);
  };
  for (const Loop &loop : {Loop{"exp", math::exp, vectorLoop<math::exp>},
                           Loop{"tanh", math::tanh, vectorLoop<math::tanh>},
                           Loop{"erf", math::erf, vectorLoop<math::erf>},
                           Loop{"sigmoid", math::sigmoid, vectorLoop<math::sigmoid>}}) {
    scalarLoop(loop.fn, in.data(), scalar.data(), n);
    loop.vectorized(in.data(), vector.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(std::memcmp(&scalar[i], &vector[i], sizeof(float)), 0)
          << loop.name << "(" << in[i] << "): " << scalar[i] << " one by one, " << vector[i]
          << " in the loop";
  }
}

} // namespace
