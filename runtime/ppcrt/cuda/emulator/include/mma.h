//===- mma.h - the tensor cores' warp product (mma.sync), emulated -*- C++ -*-===//
//
// What ppc's kernels use of the tensor cores: PTX's mma.sync for m16n8k16
// bf16 products into float, which a GPU build writes as inline assembly
// (Kernels.cuh, mmaBf16) and the emulator runs as the function below. It
// takes the place of the toolkit's <mma.h> (WMMA, which ppc's kernels no
// longer use: its fragments' layout is unspecified, so the softmax of
// attention could not stay in registers).
//
//===----------------------------------------------------------------------===//

#ifndef PPCRT_EMULATOR_MMA_H
#define PPCRT_EMULATOR_MMA_H

#include "cuda_bf16.h"
#include "cuda_runtime.h"

#include <cstdint>

namespace ppcrt::emu {

/// PTX's mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, which no
/// header declares (kernels write it as inline assembly): d = a b + c for the
/// calling warp's 16x16 bf16 a, 16x8 bf16 b and 16x8 float c, each spread
/// over the 32 lanes as PTX lays the fragments out (the PTX ISA, "Matrix
/// Fragments for mma.m16n8k16 with floating point type"). Lane 4g + t holds a's
/// rows g and g + 8 and columns 2t, 2t + 1, 2t + 8, 2t + 9 (a[0] = (g, 2t
/// and 2t + 1), a[1] = (g + 8, same), a[2] = (g, 2t + 8 and 2t + 9), a[3] =
/// (g + 8, same)), b's column g and rows 2t, 2t + 1 (b[0]) and 2t + 8,
/// 2t + 9 (b[1]), c's and d's rows g (c[0], c[1]) and g + 8 (c[2], c[3])
/// and columns 2t and 2t + 1; each register's lower column (of a) or row
/// (of b) in its low half. Every lane of the warp calls it together (a
/// shuffle: the lanes exchange their fragments); each element of d sums its
/// 16 products in k's order from c's, in float. d may be c.
void mmaSync16x8x16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                    const float (&c)[4]);

} // namespace ppcrt::emu

#endif // PPCRT_EMULATOR_MMA_H
