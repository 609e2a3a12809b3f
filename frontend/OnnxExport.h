//===- OnnxExport.h - trained weights back into ONNX -------------*- C++ -*-===//

#ifndef PPC_FRONTEND_ONNXEXPORT_H
#define PPC_FRONTEND_ONNXEXPORT_H

#include "frontend/OnnxImporter.h"

namespace ppc {

/// Writes `model` to `path` with every initializer named in `values` replaced
/// by that value (cast to the initializer's ONNX type, stored inline), so
/// ONNX tools load the trained model as usual (DESIGN.md §4, "Export"). The
/// file appears whole or not at all.
llvm::Error exportOnnxModel(const OnnxModel &model, const llvm::StringMap<Tensor> &values,
                            llvm::StringRef path);

} // namespace ppc

#endif // PPC_FRONTEND_ONNXEXPORT_H
