//===- Blocks.h - where ranks sit on the mesh and what they hold -*- C++ -*-===//
//
// DESIGN.md §3's rank layout over Program::meshAxes, and the block of a
// sharded tensor each rank holds (TensorInfo::sharding and ::blocks): what
// the executable reads from the initial weights, and what --export puts
// back together.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_BLOCKS_H
#define PPC_RUNTIME_PPCRT_BLOCKS_H

#include "runtime/ppcrt/Program.h"

#include <string>
#include <vector>

namespace ppcrt {

/// The coordinates of world rank `rank`, one per mesh axis (major first).
std::vector<int64_t> meshCoordinates(const Program &program, int64_t rank);
/// The world rank at `coordinates`.
int64_t meshRankAt(const Program &program, const std::vector<int64_t> &coordinates);
/// The positions in Program::meshAxes of the axes in `axes` ("dp,tp"), in
/// that order; axes the mesh lacks are left out.
std::vector<int> meshAxisIndices(const Program &program, const std::string &axes);
/// The coordinate on `axis` (0 when the mesh lacks it).
int64_t coordinateOn(const Program &program, const std::vector<int64_t> &coordinates,
                     const std::string &axis);
/// The block of a dimension split over `axes` that the rank at `coordinates`
/// holds (its position in its group over `axes`), and how many there are.
int64_t blockIndex(const Program &program, const std::vector<int64_t> &coordinates,
                   const std::string &axes);
int64_t blockCount(const Program &program, const std::string &axes);

/// Calls fn(local, global) with the flat index in the rank's block and in the
/// global tensor of every element of `t` the rank at `coordinates` holds.
template <typename Fn>
void forEachBlockElement(const Program &program, const TensorInfo &t,
                         const std::vector<int64_t> &coordinates, Fn &&fn) {
  if (t.rank == 0) {
    fn(0, 0);
    return;
  }
  // Per dimension, the global coordinate of every local one: dimension d
  // is viewed as t.blocks[d] blocks, each split over the group.
  std::vector<std::vector<int64_t>> map(t.rank);
  std::vector<int64_t> strides(t.rank, 1);
  for (int d = t.rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * t.globalShape[d + 1];
  int64_t total = 1;
  for (int d = 0; d < t.rank; ++d) {
    int64_t index = blockIndex(program, coordinates, t.sharding[d]);
    int64_t perGlobal = t.globalShape[d] / t.blocks[d], perLocal = t.shape[d] / t.blocks[d];
    for (int64_t l = 0; l < t.shape[d]; ++l)
      map[d].push_back(((l / perLocal) * perGlobal + index * perLocal + l % perLocal) *
                       strides[d]);
    total *= t.shape[d];
  }
  std::vector<int64_t> c(t.rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t g = 0;
    for (int d = 0; d < t.rank; ++d)
      g += map[d][c[d]];
    fn(i, g);
    for (int d = t.rank - 1; d >= 0; --d) {
      if (++c[d] < t.shape[d])
        break;
      c[d] = 0;
    }
  }
}

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_BLOCKS_H
