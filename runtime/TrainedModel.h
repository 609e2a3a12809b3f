//===- TrainedModel.h - trained weights back into the ONNX model -*- C++ -*-===//
//
// What `--export` (of the executables and of `ppc simulate`) and `ppc
// checkpoint consolidate` write: the model a program was compiled from with
// every trained parameter replaced by its value, as raw little-endian data
// in the one file. The one ONNX writer of the project, and the one place
// that knows how --untie rewrites a model.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_TRAINEDMODEL_H
#define PPC_RUNTIME_TRAINEDMODEL_H

#include "runtime/CheckpointLayout.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace onnx {
class GraphProto;
} // namespace onnx

namespace ppcrt {

/// Whether the output of an Identity of a float initializer is named like a
/// parameter torch's eval-mode export merged into another ("h.1.ln.weight"),
/// not like a value the exporter made ("onnx::MatMul_7", "/h.1/Mul_output_0").
bool isMergedParameterName(llvm::StringRef name);

/// What --untie does to a model: each Identity node that copies a float
/// initializer (how torch.onnx.export in eval mode writes parameters it
/// merged because their values were equal) and whose output is named as a
/// parameter becomes an initializer of its own, a copy of its source named
/// after the node's output. Returns the names of the new initializers.
std::vector<std::string> untieMergedInitializers(onnx::GraphProto &graph);

/// Writes the ONNX model at `modelPath` to `path` with the initializer of
/// each name in `params` replaced by its value. With `untie` (the program
/// was compiled with --untie), every Identity of a float initializer first
/// becomes an initializer of its own, as ppc compile made it. A value of
/// another float type than its initializer's (f64 from `ppc simulate`) is
/// converted to it, rounding to nearest even; any other mismatch is an
/// error. Errors start with `context` ("--export"). Written to a temporary
/// name and renamed, so `path` is whole or untouched.
llvm::Error writeTrainedModel(llvm::StringRef modelPath, bool untie,
                              const std::map<std::string, GlobalTensor> &params,
                              llvm::StringRef path, llvm::StringRef context);

} // namespace ppcrt

#endif // PPC_RUNTIME_TRAINEDMODEL_H
