//===- Mesh.h - the data x tensor x pipeline mesh of DESIGN.md §3 -*- C++ -*-===//

#ifndef PPC_RUNTIME_MESH_H
#define PPC_RUNTIME_MESH_H

#include "llvm/Support/Error.h"

namespace ppc {

struct Mesh {
  int64_t dp = 1, tp = 1, pp = 1;

  int64_t size() const { return dp * tp * pp; }
  /// rank = (pp_i * DP + dp_i) * TP + tp_i: tensor-parallel groups are
  /// consecutive ranks.
  int64_t rank(int64_t dpIndex, int64_t tpIndex, int64_t ppIndex) const {
    return (ppIndex * dp + dpIndex) * tp + tpIndex;
  }
};

/// Parses `--mesh`: "AxBxC" (data x tensor x pipeline; missing axes are 1,
/// so "N" is N x 1 x 1) or "dp=2,tp=4,pp=2" (any order, missing axes 1).
llvm::Expected<Mesh> parseMesh(llvm::StringRef text);

} // namespace ppc

#endif // PPC_RUNTIME_MESH_H
