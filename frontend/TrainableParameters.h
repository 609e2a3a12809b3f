//===- TrainableParameters.h - which initializers train ----------*- C++ -*-===//
//
// DESIGN.md §4 made every float initializer a parameter. Real exports break
// that rule both ways: torch.onnx.export in eval mode merges parameters of
// equal value (every fresh norm weight becomes one initializer) and constant
// folding splits a tied embedding from its LM head (a transposed copy), while
// buffers a model never trains can be float initializers too. This decides
// the parameter set from, in order: the export helper's metadata
// (`ppc.training`, written by python/ppc_export.py), the user's --train and
// --freeze patterns, and otherwise every float initializer, which is then
// checked for the signs of an inference export.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_FRONTEND_TRAINABLEPARAMETERS_H
#define PPC_FRONTEND_TRAINABLEPARAMETERS_H

#include "frontend/OnnxImporter.h"

#include "llvm/ADT/StringSet.h"

#include <string>
#include <vector>

namespace ppc {

/// The metadata key of the export helper's record (a JSON object:
/// `{"format": 1, "parameters": [...], "frozen": [...], "tied": {...}}`).
inline constexpr const char *kTrainingMetadataKey = "ppc.training";

struct ParameterChoice {
  /// Glob patterns (`*`, `?`, `[...]`) over initializer names: when any is
  /// given, exactly the float initializers matching one train.
  std::vector<std::string> train;
  /// Float initializers matching one of these are constants.
  std::vector<std::string> freeze;
};

/// The names of the float initializers of `model` that train. Problems (bad
/// metadata, a pattern that matches nothing) are reported through
/// `emitError`, one line each, and fail; the signs of an inference export
/// (without metadata) are reported through `emitWarning`.
mlir::FailureOr<llvm::StringSet<>>
chooseParameters(const OnnxModel &model, const ParameterChoice &choice,
                 llvm::function_ref<void(const llvm::Twine &)> emitError,
                 llvm::function_ref<void(const llvm::Twine &)> emitWarning);

/// The signs that `model` was exported for inference, as one message per
/// initializer of `parameters` at fault: one initializer feeding the same
/// role in several layers (eval-mode deduplication merged parameters of
/// equal value), and a transposed copy of a gathered table (constant folding
/// split a tied embedding).
std::vector<std::string> inferenceExportSigns(const OnnxModel &model,
                                              const llvm::StringSet<> &parameters);

} // namespace ppc

#endif // PPC_FRONTEND_TRAINABLEPARAMETERS_H
