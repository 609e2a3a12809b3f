//===- Blocks.cpp - where ranks sit on the mesh and what they hold --------===//

#include "runtime/ppcrt/Blocks.h"

namespace ppcrt {

MeshLayout meshLayout(const Program &program) {
  MeshLayout mesh;
  mesh.axes.assign(program.meshAxes, program.meshAxes + program.meshRank);
  mesh.shape.assign(program.meshShape, program.meshShape + program.meshRank);
  return mesh;
}

BlockLayout blockLayout(const TensorInfo &t) {
  BlockLayout layout;
  layout.shape.assign(t.shape, t.shape + t.rank);
  layout.globalShape.assign(t.globalShape, t.globalShape + t.rank);
  layout.sharding.assign(t.sharding, t.sharding + t.rank);
  layout.blocks.assign(t.blocks, t.blocks + t.rank);
  return layout;
}

std::vector<int64_t> meshCoordinates(const Program &program, int64_t rank) {
  return meshLayout(program).coordinates(rank);
}

int64_t meshRankAt(const Program &program, const std::vector<int64_t> &coordinates) {
  return meshLayout(program).rankAt(coordinates);
}

std::vector<int> meshAxisIndices(const Program &program, const std::string &axes) {
  return meshLayout(program).axisIndices(axes);
}

int64_t coordinateOn(const Program &program, const std::vector<int64_t> &coordinates,
                     const std::string &axis) {
  return meshLayout(program).coordinateOn(coordinates, axis);
}

int64_t blockIndex(const Program &program, const std::vector<int64_t> &coordinates,
                   const std::string &axes) {
  return meshLayout(program).blockIndex(coordinates, axes);
}

int64_t blockCount(const Program &program, const std::string &axes) {
  return meshLayout(program).blockCount(axes);
}

} // namespace ppcrt
