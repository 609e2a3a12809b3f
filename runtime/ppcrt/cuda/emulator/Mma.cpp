//===- Mma.cpp - the emulated tensor-core product (mma.sync) --------------===//
//
// mma.h's mmaSync16x8x16, out of line: built with the library's
// optimisation (the generated code that calls it is built at -O1,
// Toolchain.cpp). A warp's lanes hold the fragments as PTX lays them out;
// the product is a warp shuffle: each lane leaves its fragments in its
// slot, and once the block has reached the shuffle, reads the rows of a and
// columns of b its own elements of d need from the lanes that hold them.
//
//===----------------------------------------------------------------------===//

#include "mma.h"

#include <cstdint>
#include <cstring>

namespace ppcrt::emu {

void mmaSync16x8x16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                    const float (&c)[4]) {
  struct Fragments {
    uint32_t a[4], b[2];
  };
  static_assert(sizeof(Fragments) <= kShuffleSlotBytes);
  const Fragments mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  std::memcpy(shuffleSlot(), &mine, sizeof(mine));
  const unsigned lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
  const unsigned g = lane / 4, t = lane % 4;
  synchronize(Sync::Mma); // not a shuffle's: a warp mixing the two is reported
  const auto *slots = static_cast<const unsigned char *>(warpShuffledSlots());
  auto of = [&](unsigned other) {
    Fragments f;
    std::memcpy(&f, slots + other * kShuffleSlotBytes, sizeof(f));
    return f;
  };
  auto low = [](uint32_t word) { return float(__ushort_as_bfloat16(uint16_t(word))); };
  auto high = [](uint32_t word) { return float(__ushort_as_bfloat16(uint16_t(word >> 16))); };
  // a's rows g and g + 8 come from the lanes 4g + q (q = 0..3), b's columns
  // 2t and 2t + 1 from the lanes 4n + q of column n.
  float rows[2][16], columns[2][16];
  for (unsigned q = 0; q < 4; ++q) {
    const Fragments f = of(4 * g + q);
    for (unsigned h = 0; h < 2; ++h) {
      rows[h][2 * q] = low(f.a[h]);
      rows[h][2 * q + 1] = high(f.a[h]);
      rows[h][2 * q + 8] = low(f.a[h + 2]);
      rows[h][2 * q + 9] = high(f.a[h + 2]);
    }
    for (unsigned h = 0; h < 2; ++h) {
      const Fragments column = of(4 * (2 * t + h) + q);
      columns[h][2 * q] = low(column.b[0]);
      columns[h][2 * q + 1] = high(column.b[0]);
      columns[h][2 * q + 8] = low(column.b[1]);
      columns[h][2 * q + 9] = high(column.b[1]);
    }
  }
  float out[4];
  for (unsigned e = 0; e < 4; ++e) {
    float sum = c[e];
    for (unsigned k = 0; k < 16; ++k)
      sum += rows[e / 2][k] * columns[e % 2][k];
    out[e] = sum;
  }
  std::memcpy(d, out, sizeof(out));
}

} // namespace ppcrt::emu
