//===- Layout.cpp - which block of a tensor each rank of a mesh holds -----===//

#include "runtime/Layout.h"

namespace ppcrt {

int64_t MeshLayout::size() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

std::vector<int64_t> MeshLayout::coordinates(int64_t rank) const {
  std::vector<int64_t> c(shape.size(), 0);
  meshCoordinates(rank, shape.data(), shape.size(), c.data());
  return c;
}

int64_t MeshLayout::rankAt(const std::vector<int64_t> &coordinates) const {
  return meshRank(coordinates.data(), shape.data(), shape.size());
}

std::vector<int> MeshLayout::axisIndices(const std::string &names) const {
  std::vector<int> indices;
  size_t start = 0;
  while (start < names.size()) {
    size_t end = names.find(',', start);
    if (end == std::string::npos)
      end = names.size();
    std::string axis = names.substr(start, end - start);
    for (size_t a = 0; a < axes.size(); ++a)
      if (axis == axes[a])
        indices.push_back(int(a));
    start = end + 1;
  }
  return indices;
}

int64_t MeshLayout::coordinateOn(const std::vector<int64_t> &coordinates,
                                 const std::string &axis) const {
  std::vector<int> index = axisIndices(axis);
  return index.empty() ? 0 : coordinates[index[0]];
}

int64_t MeshLayout::blockIndex(const std::vector<int64_t> &coordinates,
                               const std::string &names) const {
  int64_t index = 0;
  for (int a : axisIndices(names))
    index = index * shape[a] + coordinates[a];
  return index;
}

int64_t MeshLayout::blockCount(const std::string &names) const {
  int64_t count = 1;
  for (int a : axisIndices(names))
    count *= shape[a];
  return count;
}

std::string MeshLayout::describe() const {
  std::string text;
  for (size_t a = 0; a < axes.size(); ++a)
    if (shape[a] > 1)
      text += (text.empty() ? "" : " ") + axes[a] + "=" + std::to_string(shape[a]);
  return text.empty() ? "one rank" : text;
}

} // namespace ppcrt
