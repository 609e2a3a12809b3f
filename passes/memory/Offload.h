//===- Offload.h - what ppc-offload keeps in host memory --------*- C++ -*-===//

#ifndef PPC_PASSES_MEMORY_OFFLOAD_H
#define PPC_PASSES_MEMORY_OFFLOAD_H

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace ppc {

/// What lives in host memory: nothing, the optimizer state (and the
/// optimizer step runs on the host), or the parameters too.
enum class OffloadLevel { None, Optimizer, OptimizerAndParams };

/// "none", "optimizer", "optimizer+params"; "auto" (the planner chooses) is
/// not a level.
std::optional<OffloadLevel> parseOffloadLevel(llvm::StringRef name);
llvm::StringRef offloadLevelName(OffloadLevel level);

} // namespace ppc

#endif // PPC_PASSES_MEMORY_OFFLOAD_H
