//===- cuda_bf16.h - __nv_bfloat16, emulated ---------------------*- C++ -*-===//
//
// bf16 as the toolkit's header defines it for host and device code: 16 bits
// (the upper half of an IEEE single), conversions from and to float that
// round to nearest even, and the atomic add of sm_80.
//
//===----------------------------------------------------------------------===//

#ifndef PPCRT_EMULATOR_CUDA_BF16_H
#define PPCRT_EMULATOR_CUDA_BF16_H

#include <cstdint>
#include <cstring>
#include <type_traits>

struct __nv_bfloat16 {
  uint16_t __x;

  __nv_bfloat16() = default;
  __nv_bfloat16(float value) : __x(fromFloat(value)) {}
  __nv_bfloat16(double value) : __x(fromFloat(float(value))) {}
  template <typename I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  __nv_bfloat16(I value) : __x(fromFloat(float(value))) {}

  operator float() const {
    uint32_t bits = uint32_t(__x) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }

  static uint16_t fromFloat(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: quiet, sign kept
      return uint16_t((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u); // round to nearest even
    return uint16_t(bits >> 16);
  }
};
typedef __nv_bfloat16 nv_bfloat16;

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 value) { return value.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
  __nv_bfloat16 value;
  value.__x = bits;
  return value;
}
inline float __bfloat162float(__nv_bfloat16 value) { return float(value); }
inline __nv_bfloat16 __float2bfloat16(float value) { return __nv_bfloat16(value); }

/// Kernels run one thread at a time between synchronization points, so a
/// read-modify-write is atomic.
inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *address, __nv_bfloat16 value) {
  __nv_bfloat16 old = *address;
  *address = __nv_bfloat16(float(old) + float(value));
  return old;
}

#endif // PPCRT_EMULATOR_CUDA_BF16_H
