//===- OnnxImporter.h - ONNX models to the ppc dialect -----------*- C++ -*-===//

#ifndef PPC_FRONTEND_ONNXIMPORTER_H
#define PPC_FRONTEND_ONNXIMPORTER_H

#include "executor/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <onnx/onnx_pb.h>
#include <optional>
#include <vector>

namespace ppc {

/// An ONNX model file, parsed, with the directory its external data is
/// anchored in.
class OnnxModel {
public:
  /// Reads and parses `path`; fails with a message naming the file.
  static llvm::Expected<std::unique_ptr<OnnxModel>> load(llvm::StringRef path);
  /// Parses `bytes` as if they had been read from `path`, which names the
  /// model in messages and whose directory anchors its external data (for
  /// callers that hold the bytes already, such as the fuzz targets).
  static llvm::Expected<std::unique_ptr<OnnxModel>> parse(llvm::StringRef bytes,
                                                          llvm::StringRef path);

  const onnx::ModelProto &proto() const { return proto_; }
  llvm::StringRef path() const { return path_; }
  llvm::StringRef directory() const { return directory_; }
  /// The ai.onnx opset the model imports (0 when it declares none).
  int64_t opset() const;
  /// The initializer called `name`, or null.
  const onnx::TensorProto *initializer(llvm::StringRef name) const;
  /// Decodes initializer `name` (including external data).
  llvm::Expected<Tensor> loadInitializer(llvm::StringRef name) const;

  /// --untie (runtime/TrainedModel.h's untieMergedInitializers, which the
  /// ONNX writer applies again when it writes the trained model): merged
  /// parameters become initializers of their own. Returns their names.
  std::vector<std::string> untieMergedInitializers();

private:
  onnx::ModelProto proto_;
  std::string path_, directory_;
  llvm::StringMap<const onnx::TensorProto *> initializers_;
};

struct ImportOptions {
  /// Sizes for symbolic input dimensions (ONNX `dim_param`), by name.
  llvm::StringMap<int64_t> dimSizes;
  /// Graph inputs imported as constants with these values (specialization,
  /// e.g. a shape that arrives as an input).
  llvm::StringMap<Tensor> constantInputs;
  /// The float initializers that are parameters (arguments); the others are
  /// constants. Unset: every float initializer (chooseParameters decides).
  std::optional<llvm::StringSet<>> parameters;
  /// Import every float value as f64 (arguments, constants, cast targets), so
  /// that the whole program, constant folding included, computes in f64.
  bool promoteToF64 = false;
  /// Constant subgraphs whose results have more elements than this stay ops.
  int64_t maxFoldElements = int64_t(1) << 22;
};

/// Imports `model` into a new module holding `func.func @forward`: graph
/// inputs, then float initializers (the parameters) as arguments; graph
/// outputs as results. Shape computations and other constant subgraphs are
/// folded. Every problem is reported through `emitError` as one line naming
/// the node, tensor or input at fault; on any, the result is null.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(const OnnxModel &model, mlir::MLIRContext &context, const ImportOptions &options,
                llvm::function_ref<void(const llvm::Twine &)> emitError);

/// Loads the dialects the importer produces.
void loadImportDialects(mlir::MLIRContext &context);

} // namespace ppc

#endif // PPC_FRONTEND_ONNXIMPORTER_H
