//===- mma.h - warp matrix multiply-accumulate (WMMA), emulated --*- C++ -*-===//
//
// The subset of CUDA's nvcuda::wmma that ppc's kernels use: 16x16x16
// fragments of bf16 (matrix_a, matrix_b) and float (accumulator), loaded,
// filled, multiplied and stored by a warp together.
//
// On a GPU a fragment's elements are spread over the warp's 32 lanes in an
// order CUDA does not specify, the same for every fragment of one type; the
// emulator gives every lane the whole 16x16 matrix instead, element
// r * 16 + c in x[r * 16 + c]. Code that touches x[] only through
// operations that do not depend on the order (scaling every element, or
// looking each element's row up in a fragment loaded from a matrix of row
// numbers) runs the same on both.
//
// What the emulator checks: the pointer of a load or store is 32-byte
// aligned and its leading dimension a multiple of 16 bytes (CUDA's
// requirements; a GPU reads garbage otherwise). A store writes only the
// calling lane's share of the elements (every 32nd), so a lane that reads
// a stored matrix before the lanes that write it have stored (a missing
// __syncwarp()) reads stale values, as it could on a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef PPCRT_EMULATOR_MMA_H
#define PPCRT_EMULATOR_MMA_H

#include "cuda_bf16.h"
#include "cuda_runtime.h"

#include <cstdint>
#include <string>

namespace ppcrt::emu {

/// d = a b + c for row-major 16x16 matrices, each element of d summing its
/// 16 products in k's order from c's. In the emulator's library, built
/// with optimisation, as generated code is not (Toolchain.cpp: -O1), and
/// every lane of every warp calls it (each holds the whole matrix): it was
/// four fifths of a bf16 GPT step's time when inline. d may be c.
void multiplyAccumulate(float *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c);

} // namespace ppcrt::emu

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has 16x16x16 fragments");
  static constexpr int num_elements = 256;
  T x[256];
};

namespace detail {

inline unsigned lane() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
}

template <typename T> void checkMatrix(const char *what, const void *pointer, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(pointer) % 32 != 0)
    ppcrt::emu::emulatorError(std::string("wmma::") + what +
                              ": the matrix's pointer is not 32-byte aligned");
  if ((ldm * sizeof(T)) % 16 != 0)
    ppcrt::emu::emulatorError(std::string("wmma::") + what + ": leading dimension " +
                              std::to_string(ldm) + " is not a multiple of 16 bytes");
}

template <typename T> void load(T *x, const T *p, unsigned ldm, bool rowMajor) {
  checkMatrix<T>("load_matrix_sync", p, ldm);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      x[r * 16 + c] = rowMajor ? p[r * ldm + c] : p[c * ldm + r];
}

} // namespace detail

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &a, const T *p, unsigned ldm) {
  static_assert(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>,
                "matrix_a and matrix_b fragments name their layout");
  detail::load(a.x, p, ldm, std::is_same_v<Layout, row_major>);
}

template <typename T>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, T> &a, const T *p, unsigned ldm,
                      layout_t layout) {
  detail::load(a.x, p, ldm, layout == mem_row_major);
}

template <typename T>
void store_matrix_sync(T *p, const fragment<accumulator, 16, 16, 16, T> &a, unsigned ldm,
                       layout_t layout) {
  detail::checkMatrix<T>("store_matrix_sync", p, ldm);
  for (int e = int(detail::lane()); e < 256; e += 32) {
    int r = e / 16, c = e % 16;
    p[layout == mem_row_major ? r * ldm + c : c * ldm + r] = a.x[e];
  }
}

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &a, const T &value) {
  for (T &x : a.x)
    x = value;
}

/// d = a b + c in float (the products of bf16 values are exact in float).
template <typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> &a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  ppcrt::emu::multiplyAccumulate(d.x, a.x, b.x, c.x);
}

} // namespace nvcuda::wmma

#endif // PPCRT_EMULATOR_MMA_H
