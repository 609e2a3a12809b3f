//===- Layout.h - which block of a tensor each rank of a mesh holds -*- C++ -*-===//
//
// DESIGN.md §3's rank layout and a sharded tensor's blocks, described by
// value rather than by a compiled Program, so that code which never saw the
// program that wrote a checkpoint (a resharding executable, `ppc
// checkpoint`) can still say where each element of each shard belongs.
//
// Ranks are numbered over the mesh axes major first. A tensor's dimension d
// split over the axes A ("dp", "dp,tp" or "" when whole) is viewed as
// blocks[d] equal blocks (3 for a fused QKV weight), and the rank whose
// position in its group over A is i holds part i of every block:
//
//   global index = (l / perLocal) * perGlobal + i * perLocal + l % perLocal
//
// for local index l, where perGlobal = global[d] / blocks[d] and perLocal =
// local[d] / blocks[d].
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_LAYOUT_H
#define PPC_RUNTIME_LAYOUT_H

#include <cstdint>
#include <string>
#include <vector>

namespace ppcrt {

/// Rank arithmetic, row-major (the last axis varies fastest), written once
/// for the compiler's meshes (ir/ MeshOp) and the runtime's (MeshLayout):
/// the coordinates of `rank` on a mesh of `axes` axes of sizes `shape`, and
/// the rank at `coordinates`.
inline void meshCoordinates(int64_t rank, const int64_t *shape, size_t axes, int64_t *coordinates) {
  for (size_t a = axes; a-- > 0;) {
    coordinates[a] = rank % shape[a];
    rank /= shape[a];
  }
}
inline int64_t meshRank(const int64_t *coordinates, const int64_t *shape, size_t axes) {
  int64_t rank = 0;
  for (size_t a = 0; a < axes; ++a)
    rank = rank * shape[a] + coordinates[a];
  return rank;
}

/// A mesh: its axes, major first ("pp", "dp", "tp"), and their sizes.
struct MeshLayout {
  std::vector<std::string> axes;
  std::vector<int64_t> shape;

  /// Ranks in all.
  int64_t size() const;
  /// The coordinates of rank `rank`, one per axis.
  std::vector<int64_t> coordinates(int64_t rank) const;
  /// The rank at `coordinates`.
  int64_t rankAt(const std::vector<int64_t> &coordinates) const;
  /// The positions in `axes` of the comma-separated axes in `names`, in
  /// that order; axes the mesh lacks are left out.
  std::vector<int> axisIndices(const std::string &names) const;
  /// The coordinate on `axis` (0 when the mesh lacks it).
  int64_t coordinateOn(const std::vector<int64_t> &coordinates, const std::string &axis) const;
  /// The rank's position in its group over `names`, and the group's size.
  int64_t blockIndex(const std::vector<int64_t> &coordinates, const std::string &names) const;
  int64_t blockCount(const std::string &names) const;
  /// "dp=2 tp=2": the axes of more than one rank ("one rank" when none).
  std::string describe() const;
};

/// How a tensor is split: per dimension, the axes it is split over and the
/// blocks it is viewed as, with the local and the global shape.
struct BlockLayout {
  std::vector<int64_t> shape;
  std::vector<int64_t> globalShape;
  std::vector<std::string> sharding;
  std::vector<int64_t> blocks;
};

/// Calls fn(local, global, count) for each run of `count` consecutive
/// elements that the rank at `coordinates` holds at flat index `local` of
/// its block and `global` of the whole tensor (runs follow the innermost
/// dimension). A rank-0 tensor is one run of one element.
template <typename Fn>
void forEachBlockRun(const MeshLayout &mesh, const BlockLayout &t,
                     const std::vector<int64_t> &coordinates, Fn &&fn) {
  int rank = int(t.shape.size());
  if (rank == 0) {
    fn(int64_t(0), int64_t(0), int64_t(1));
    return;
  }
  // An empty block has no runs. Its other dimensions may be of any size (a
  // checkpoint's [0, 2^60] is 0 bytes), so nothing below may be sized by
  // them.
  for (int64_t size : t.shape)
    if (size == 0)
      return;
  std::vector<int64_t> strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * t.globalShape[d + 1];
  // Per dimension, the global offset of every local coordinate.
  std::vector<std::vector<int64_t>> map(rank);
  for (int d = 0; d < rank; ++d) {
    int64_t index = mesh.blockIndex(coordinates, t.sharding[d]);
    int64_t perGlobal = t.globalShape[d] / t.blocks[d], perLocal = t.shape[d] / t.blocks[d];
    map[d].reserve(t.shape[d]);
    for (int64_t l = 0; l < t.shape[d]; ++l)
      map[d].push_back(((l / perLocal) * perGlobal + index * perLocal + l % perLocal) * strides[d]);
  }
  // Innermost runs: perLocal consecutive local elements are consecutive
  // globally too.
  int last = rank - 1;
  int64_t run = t.shape[last] / t.blocks[last];
  int64_t outer = 1;
  for (int d = 0; d < last; ++d)
    outer *= t.shape[d];
  if (run == 0 || outer == 0)
    return;
  std::vector<int64_t> c(rank, 0);
  int64_t local = 0;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t base = 0;
    for (int d = 0; d < last; ++d)
      base += map[d][c[d]];
    for (int64_t l = 0; l < t.shape[last]; l += run, local += run)
      fn(local, base + map[last][l], run);
    for (int d = last - 1; d >= 0; --d) {
      if (++c[d] < t.shape[d])
        break;
      c[d] = 0;
    }
  }
}

} // namespace ppcrt

#endif // PPC_RUNTIME_LAYOUT_H
