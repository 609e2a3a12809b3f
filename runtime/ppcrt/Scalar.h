//===- Scalar.h - the element operations of fused kernels ----------------===//
//
// One function per elementwise op, with the reference executor's semantics
// for every element type: float ops round once to the type (f32 arithmetic
// is correctly rounded, as the executor's double-then-round is; exp, erf,
// tanh and sigmoid of floats on the host are within 3 ulp, Math.h), integers
// wrap around in 64 bits, integer division by zero is 0, and max/min
// propagate NaN.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_SCALAR_H
#define PPC_RUNTIME_PPCRT_SCALAR_H

#include "runtime/ppcrt/Math.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

// Fused CUDA kernels call the same functions on the GPU.
#ifdef __CUDACC__
#define PPCRT_HD __host__ __device__
#else
#define PPCRT_HD
#endif

namespace ppcrt::scalar {

template <typename T> using Wide = std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>;

template <typename T> PPCRT_HD inline T add(T x, T y) {
  if constexpr (std::is_integral_v<T>)
    return T(uint64_t(x) + uint64_t(y));
  else
    return x + y;
}
template <typename T> PPCRT_HD inline T sub(T x, T y) {
  if constexpr (std::is_integral_v<T>)
    return T(uint64_t(x) - uint64_t(y));
  else
    return x - y;
}
template <typename T> PPCRT_HD inline T mul(T x, T y) {
  if constexpr (std::is_integral_v<T>)
    return T(uint64_t(x) * uint64_t(y));
  else
    return x * y;
}
template <typename T> PPCRT_HD inline T div(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0)
      return 0;
    if constexpr (std::is_signed_v<T>)
      if (y == -1)
        return sub(T(0), x);
  }
  return x / y;
}
template <typename T> PPCRT_HD inline T pow(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(x, y);
  } else {
    if constexpr (std::is_signed_v<T>)
      if (y < 0)
        return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
    T result = 1;
    for (; y > 0; y /= 2) {
      if (y % 2)
        result = mul(result, x);
      x = mul(x, x);
    }
    return result;
  }
}
template <typename T> PPCRT_HD inline bool isNaN(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
}
template <typename T> PPCRT_HD inline T max(T x, T y) { return isNaN(x) || x > y ? x : y; }
template <typename T> PPCRT_HD inline T min(T x, T y) { return isNaN(x) || x < y ? x : y; }
template <typename T> PPCRT_HD inline T neg(T x) { return sub(T(0), x); }
template <typename T> PPCRT_HD inline T abs(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return std::fabs(x);
  else if constexpr (std::is_unsigned_v<T>)
    return x;
  else
    return x < 0 ? neg(x) : x;
}
template <typename T> PPCRT_HD inline T relu(T x) {
  if constexpr (std::is_unsigned_v<T>)
    return x;
  else
    return x < 0 ? T(0) : x;
}
template <typename T> PPCRT_HD inline T logicalNot(T x) { return T(!x); }
template <typename T> PPCRT_HD inline T sign(T x) {
  if (!(x == x))
    return x; // NaN
  return T(int(T(0) < x) - int(x < T(0)));
}
template <typename T> PPCRT_HD inline T sqrt(T x) { return std::sqrt(x); }
template <typename T> PPCRT_HD inline T reciprocal(T x) { return T(1) / x; }
// exp, erf, tanh and sigmoid of floats on the host are Math.h's, which
// vectorize; GPUs, and doubles everywhere, take the library's.
template <typename T> PPCRT_HD constexpr bool hostFloat() {
#ifdef __CUDA_ARCH__
  return false;
#else
  return std::is_same_v<T, float>;
#endif
}
template <typename T> PPCRT_HD inline T exp(T x) {
  if constexpr (hostFloat<T>())
    return math::exp(x);
  else
    return std::exp(x);
}
template <typename T> PPCRT_HD inline T log(T x) { return std::log(x); }
template <typename T> PPCRT_HD inline T erf(T x) {
  if constexpr (hostFloat<T>())
    return math::erf(x);
  else
    return std::erf(x);
}
template <typename T> PPCRT_HD inline T tanh(T x) {
  if constexpr (hostFloat<T>())
    return math::tanh(x);
  else
    return std::tanh(x);
}
template <typename T> PPCRT_HD inline T sigmoid(T x) {
  if constexpr (hostFloat<T>())
    return math::sigmoid(x);
  else
    return T(1) / (T(1) + std::exp(-x));
}
template <typename T> PPCRT_HD inline T sin(T x) { return std::sin(x); }
template <typename T> PPCRT_HD inline T cos(T x) { return std::cos(x); }
template <typename T> PPCRT_HD inline T floor(T x) { return std::floor(x); }
template <typename T> PPCRT_HD inline T ceil(T x) { return std::ceil(x); }
template <typename T> PPCRT_HD inline uint8_t equal(T x, T y) { return x == y; }
template <typename T> PPCRT_HD inline uint8_t less(T x, T y) { return x < y; }
template <typename T> PPCRT_HD inline uint8_t greater(T x, T y) { return x > y; }
PPCRT_HD inline uint8_t logicalAnd(uint8_t x, uint8_t y) { return x && y; }
PPCRT_HD inline uint8_t logicalOr(uint8_t x, uint8_t y) { return x || y; }
PPCRT_HD inline uint8_t logicalXor(uint8_t x, uint8_t y) { return (x != 0) != (y != 0); }
template <typename T> PPCRT_HD inline T where(uint8_t c, T x, T y) { return c ? x : y; }

/// ONNX Cast: floats to integers truncate toward zero and wrap; to bool is
/// != 0.
template <typename To, typename From> PPCRT_HD inline To cast(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (!(x == x) || std::fabs(x) >= 9.2e18)
      return To(0);
    return To(int64_t(x));
  } else {
    return To(x);
  }
}

} // namespace ppcrt::scalar

#endif // PPC_RUNTIME_PPCRT_SCALAR_H
