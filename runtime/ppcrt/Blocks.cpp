//===- Blocks.cpp - where ranks sit on the mesh and what they hold --------===//

#include "runtime/ppcrt/Blocks.h"

namespace ppcrt {

std::vector<int64_t> meshCoordinates(const Program &program, int64_t rank) {
  std::vector<int64_t> coordinates(program.meshRank, 0);
  for (int a = program.meshRank - 1; a >= 0; --a) {
    coordinates[a] = rank % program.meshShape[a];
    rank /= program.meshShape[a];
  }
  return coordinates;
}

int64_t meshRankAt(const Program &program, const std::vector<int64_t> &coordinates) {
  int64_t rank = 0;
  for (int a = 0; a < program.meshRank; ++a)
    rank = rank * program.meshShape[a] + coordinates[a];
  return rank;
}

std::vector<int> meshAxisIndices(const Program &program, const std::string &axes) {
  std::vector<int> indices;
  size_t start = 0;
  while (start < axes.size()) {
    size_t end = axes.find(',', start);
    if (end == std::string::npos)
      end = axes.size();
    std::string axis = axes.substr(start, end - start);
    for (int a = 0; a < program.meshRank; ++a)
      if (axis == program.meshAxes[a])
        indices.push_back(a);
    start = end + 1;
  }
  return indices;
}

int64_t coordinateOn(const Program &program, const std::vector<int64_t> &coordinates,
                     const std::string &axis) {
  std::vector<int> index = meshAxisIndices(program, axis);
  return index.empty() ? 0 : coordinates[index[0]];
}

int64_t blockIndex(const Program &program, const std::vector<int64_t> &coordinates,
                   const std::string &axes) {
  int64_t index = 0;
  for (int a : meshAxisIndices(program, axes))
    index = index * program.meshShape[a] + coordinates[a];
  return index;
}

int64_t blockCount(const Program &program, const std::string &axes) {
  int64_t count = 1;
  for (int a : meshAxisIndices(program, axes))
    count *= program.meshShape[a];
  return count;
}

} // namespace ppcrt
