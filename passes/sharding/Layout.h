//===- Layout.h - how a value is split over the mesh during partitioning -*- C++ -*-===//

#ifndef PPC_PASSES_SHARDING_LAYOUT_H
#define PPC_PASSES_SHARDING_LAYOUT_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace ppc {

/// A value's sharding: for each dimension the mesh axes it is split over
/// (major to minor), and the axes over which it is a partial sum. The
/// partitioner works on layouts; #ppc.sharding attributes record them in IR.
struct Layout {
  llvm::SmallVector<llvm::SmallVector<std::string, 1>> dims;
  llvm::SmallVector<std::string, 1> partial;

  static Layout replicated(int64_t rank) {
    Layout layout;
    layout.dims.resize(rank);
    return layout;
  }
  bool isReplicated() const {
    return partial.empty() &&
           llvm::all_of(dims, [](const auto &axes) { return axes.empty(); });
  }
  bool operator==(const Layout &other) const {
    return dims == other.dims && partial == other.partial;
  }
  bool operator!=(const Layout &other) const { return !(*this == other); }
  /// "[[dp], [], [tp]] partial [tp]", for diagnostics and reports.
  std::string str() const;
};

} // namespace ppc

#endif // PPC_PASSES_SHARDING_LAYOUT_H
