//===- Export.h - trained weights back into the ONNX model -------*- C++ -*-===//

#ifndef PPC_RUNTIME_PPCRT_EXPORT_H
#define PPC_RUNTIME_PPCRT_EXPORT_H

#include "runtime/ppcrt/Program.h"

#include "llvm/Support/Error.h"

#include <string>

namespace ppcrt {

/// Writes the model the executable was compiled from with every trained
/// parameter replaced by its full value, assembled from the state files of
/// every rank in `shardDir` (the checkpoint layout: rank-NNNNN.safetensors).
/// Written to a temporary name and renamed, so `path` is whole or untouched.
llvm::Error exportOnnx(const Program &program, const std::string &shardDir, int worldSize,
                       const std::string &path);

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_EXPORT_H
