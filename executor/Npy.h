//===- Npy.h - .npy files in and out of tools ---------------------*- C++ -*-===//
//
// Reads and writes numpy's .npy format (versions 1.0-3.0, little-endian,
// C order) for the tensors tools exchange with users. Every malformed header,
// unsupported dtype or wrong length is an error naming the file.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_EXECUTOR_NPY_H
#define PPC_EXECUTOR_NPY_H

#include "executor/Tensor.h"
#include "llvm/Support/Error.h"

namespace ppc {

/// Reads `path` into a tensor of the file's dtype and shape.
llvm::Expected<Tensor> readNpy(llvm::StringRef path);

/// Parses .npy bytes; `name` is used in error messages.
llvm::Expected<Tensor> parseNpy(llvm::StringRef bytes, llvm::StringRef name);

/// The .npy bytes of `tensor` (version 1.0).
std::string formatNpy(const Tensor &tensor);

/// Writes `tensor` to `path` atomically (a temporary file renamed into place).
llvm::Error writeNpy(const Tensor &tensor, llvm::StringRef path);

/// The numpy dtype string of `dtype` ("<f4", "|b1", ...).
llvm::StringRef npyDescr(DType dtype);

} // namespace ppc

#endif // PPC_EXECUTOR_NPY_H
