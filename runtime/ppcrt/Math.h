//===- Math.h - exp, tanh, erf and sigmoid for floats, vectorizable -------===//
//
// The transcendental functions of the CPU target's fused kernels, written in
// plain float arithmetic and selects so that GCC vectorizes the loops that
// call them: libm's expf, tanhf and erff are calls the compiler does not
// vectorize without -ffast-math, and they were the largest part of a step's
// elementwise time (issue 19: a GELU layer spent most of its time in
// tanhf). glibc's libmvec has vector variants, but a loop's scalar tail
// (and a loop that does not vectorize) would call the scalar libm function,
// which rounds differently: a recomputed op in another fusion group would
// then not be bit-identical to its original. These functions give the same
// bits in a scalar loop and in every vector width (each op rounds once; the
// generated code is built with -ffp-contract=off).
//
// Accuracy against the exact value, measured over every 61st float
// (MathTest): exp within 1 ulp, tanh and erf within 2 ulp, sigmoid within
// 3 ulp, including subnormal results, and the IEEE special values (NaN,
// +-inf, -0) as libm. The polynomials are minimax fits (Lawson's
// iteration on 20000 points, in double, then rounded to float);
// exp's is Cephes', as the attention kernels used it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_MATH_H
#define PPC_RUNTIME_PPCRT_MATH_H

#include <cstdint>
#include <cstring>

namespace ppcrt::math {

namespace detail {

/// 2^n for an integral float n in [-126, 127].
inline float pow2(float n) {
  int32_t bits = (int32_t(n) + 127) << 23;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

/// c[0] + c[1] z + ... + c[N-1] z^(N-1), by Horner's rule.
template <int N> inline float horner(float z, const float (&c)[N]) {
  float p = c[N - 1];
  for (int i = N - 2; i >= 0; --i)
    p = p * z + c[i];
  return p;
}

} // namespace detail

/// e^x: 2^n e^r with |r| <= ln(2)/2 (r in two parts, Cody and Waite), e^r
/// by Cephes' polynomial, 2^n as two factors so that subnormal results
/// round once. +inf above 88.73, 0 below -103.98.
inline float exp(float x) {
  // Clamped first (a NaN to the lower bound) so that n stays an integer
  // in range; the result's select restores NaN.
  float c = x > -104.0f ? x : -104.0f;
  c = c < 89.0f ? c : 89.0f;
  // n = round(c / ln 2), by adding and subtracting 1.5 * 2^23.
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  static constexpr float kExp[] = {5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f,
                                   8.3334519073e-3f, 1.3981999507e-3f, 1.9875691500e-4f};
  float p = detail::horner(r, kExp) * (r * r) + r + 1.0f;
  // n in [-150, 128]: 2^n = 2^half 2^(n - half), each factor normal.
  float half = float(int32_t(n) / 2);
  float result = p * detail::pow2(half) * detail::pow2(n - half);
  return x != x ? x : result;
}

/// tanh(x): x + x^3 P(x^2) for |x| < 0.625, else 1 - 2 / (e^(2|x|) + 1)
/// with x's sign (1 from 9.02 up, where e^(2|x|) swamps the 1).
inline float tanh(float x) {
  float a = x < 0.0f ? -x : x;
  float z = x * x;
  static constexpr float kTanh[] = {-3.333328068e-01f, 1.333144158e-01f, -5.373971537e-02f,
                                    2.063908987e-02f, -5.704988725e-03f};
  // (-0 + the +0 that -0 * -0 gives would lose -0's sign.)
  float small = x == 0.0f ? x : x + x * z * detail::horner(z, kTanh);
  float large = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  large = x < 0.0f ? -large : large;
  return a < 0.625f ? small : x != x ? x : large;
}

/// erf(x): x P(x^2) for |x| <= 1, else 1 - e^(-x^2) G(1/|x|) with x's
/// sign, G fitting erfc(x) e^(x^2) on [1, 4]; |x| is taken as 4 above 4,
/// where erf rounds to 1.
inline float erf(float x) {
  float a = x < 0.0f ? -x : x;
  static constexpr float kSmall[] = {1.128379107e+00f,  -3.761262596e-01f, 1.128358543e-01f,
                                     -2.685381100e-02f, 5.188327283e-03f,  -8.010187885e-04f,
                                     7.853840361e-05f};
  float small = x * detail::horner(x * x, kSmall);
  static constexpr float kTail[] = {
      1.210914706e-04f, 5.617676973e-01f,  2.053773217e-02f, -3.758714795e-01f, 2.304184735e-01f,
      2.382919341e-01f, -5.368996859e-01f, 4.382044077e-01f, -1.796978563e-01f, 3.071126342e-02f};
  float b = a < 4.0f ? a : 4.0f;
  float large = 1.0f - exp(-(b * b)) * detail::horner(1.0f / b, kTail);
  large = x < 0.0f ? -large : large;
  return a <= 1.0f ? small : x != x ? x : large;
}

/// 1 / (1 + e^-x), as e^x / (1 + e^x) below 0 (where e^-x would
/// overflow before the result underflows).
inline float sigmoid(float x) {
  float e = exp(x < 0.0f ? x : -x);
  return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

} // namespace ppcrt::math

#endif // PPC_RUNTIME_PPCRT_MATH_H
