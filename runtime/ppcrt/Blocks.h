//===- Blocks.h - where ranks sit on the mesh and what they hold -*- C++ -*-===//
//
// DESIGN.md §3's rank layout over Program::meshAxes, and the block of a
// sharded tensor each rank holds (TensorInfo::sharding and ::blocks): what
// the executable reads from the initial weights, and what --export puts
// back together. Each is runtime/Layout.h's, for a compiled program.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_BLOCKS_H
#define PPC_RUNTIME_PPCRT_BLOCKS_H

#include "runtime/Layout.h"
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

/// The program's mesh and a tensor's layout on it (runtime/Layout.h).
MeshLayout meshLayout(const Program &program);
BlockLayout blockLayout(const TensorInfo &t);

/// Calls fn(local, global) with the flat index in the rank's block and in the
/// global tensor of every element of `t` the rank at `coordinates` holds.
template <typename Fn>
void forEachBlockElement(const Program &program, const TensorInfo &t,
                         const std::vector<int64_t> &coordinates, Fn &&fn) {
  forEachBlockRun(meshLayout(program), blockLayout(t), coordinates,
                  [&](int64_t local, int64_t global, int64_t count) {
                    for (int64_t i = 0; i < count; ++i)
                      fn(local + i, global + i);
                  });
}

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_BLOCKS_H
