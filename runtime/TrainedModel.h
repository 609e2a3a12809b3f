//===- TrainedModel.h - trained weights back into the ONNX model -*- C++ -*-===//
//
// What `--export` and `ppc checkpoint consolidate` write: the model a
// program was compiled from with every trained parameter replaced by its
// value, as raw little-endian data in the one file.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_TRAINEDMODEL_H
#define PPC_RUNTIME_TRAINEDMODEL_H

#include "runtime/CheckpointLayout.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace ppcrt {

/// Writes the ONNX model at `modelPath` to `path` with the initializer of
/// each name in `params` replaced by its value. With `untie` (the program
/// was compiled with --untie), every Identity of a float initializer first
/// becomes an initializer of its own, as ppc compile made it. Errors start
/// with `context` ("--export"). Written to a temporary name and renamed, so
/// `path` is whole or untouched.
llvm::Error writeTrainedModel(llvm::StringRef modelPath, bool untie,
                              const std::map<std::string, GlobalTensor> &params,
                              llvm::StringRef path, llvm::StringRef context);

} // namespace ppcrt

#endif // PPC_RUNTIME_TRAINEDMODEL_H
