//===- InputBindings.h - graph inputs other than the tokens ------*- C++ -*-===//
//
// Training feeds token windows to one integer input. Models exported with
// more inputs (attention_mask, token_type_ids, position_ids) get them bound
// to compile-time constants: their natural value for a batch of whole
// windows, or what `--bind NAME=VALUE` says. A bound input is imported as a
// constant and folds away where it can (an all-ones mask, its additive form).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_FRONTEND_INPUTBINDINGS_H
#define PPC_FRONTEND_INPUTBINDINGS_H

#include "frontend/OnnxImporter.h"

#include <string>

namespace ppc {

/// The inputs bound by default, and to what: `attention_mask` to ones (no
/// padding in a window), `token_type_ids` to zeros (one segment),
/// `position_ids` to 0..T-1 along its last dimension.
llvm::StringRef naturalBinding(llvm::StringRef inputName);

/// The graph inputs of `model` to bind, by name, with the value spelling
/// (`ones`, `zeros`, `arange` or a .npy file): those of `flags` (`NAME=VALUE`)
/// and every input with a natural value. Reports a malformed flag or one
/// naming no graph input (one line) and fails.
mlir::FailureOr<llvm::StringMap<std::string>>
inputsToBind(const OnnxModel &model, llvm::ArrayRef<std::string> flags,
             llvm::function_ref<void(const llvm::Twine &)> emitError);

/// Puts the value of every input of `bindings` into
/// `options.constantInputs`, shaped as the input is declared (symbolic
/// dimensions from `options.dimSizes`). Reports a problem naming the input.
mlir::LogicalResult bindInputs(const OnnxModel &model, const llvm::StringMap<std::string> &bindings,
                               ImportOptions &options,
                               llvm::function_ref<void(const llvm::Twine &)> emitError);

} // namespace ppc

#endif // PPC_FRONTEND_INPUTBINDINGS_H
