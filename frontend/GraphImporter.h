//===- GraphImporter.h - state of one ONNX graph's import --------*- C++ -*-===//

#ifndef PPC_FRONTEND_GRAPHIMPORTER_H
#define PPC_FRONTEND_GRAPHIMPORTER_H

#include "frontend/OnnxImporter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace ppc {

class GraphImporter {
public:
  GraphImporter(const OnnxModel &model, mlir::MLIRContext &context, const ImportOptions &options,
                llvm::function_ref<void(const llvm::Twine &)> emitError)
      : model(model), context(context), options(options), emitError(emitError), builder(&context) {}

  mlir::OwningOpRef<mlir::ModuleOp> run();

  /// The value named `name`, materializing a constant initializer on first
  /// use; null when the name is not defined (yet).
  mlir::Value lookup(llvm::StringRef name);
  void define(llvm::StringRef name, mlir::Value value) { values[name] = value; }
  bool isRead(llvm::StringRef name) const { return readNames.contains(name); }
  /// Whether `name` is an initializer imported as a parameter (an argument).
  bool isParameter(llvm::StringRef name) const;
  void report(const llvm::Twine &message) { emitError(message); }
  int64_t maxFoldElements() const { return options.maxFoldElements; }
  llvm::StringRef modelDirectory() const { return model.directory(); }
  /// The element type values of `dtype` are imported as (f64 for floats when
  /// promoting).
  mlir::Type elementType(DType dtype);
  /// `tensor` in the dtype it is imported as.
  Tensor imported(const Tensor &tensor);

private:
  mlir::LogicalResult checkOpset();
  mlir::LogicalResult checkSupportedOps();
  mlir::LogicalResult checkInitializers();
  mlir::LogicalResult checkGraph();
  mlir::FailureOr<mlir::RankedTensorType> inputType(const onnx::ValueInfoProto &info);
  mlir::LogicalResult createFunction(mlir::ModuleOp module);
  mlir::LogicalResult importNodes();
  mlir::LogicalResult createReturn();

  const OnnxModel &model;
  mlir::MLIRContext &context;
  const ImportOptions &options;
  llvm::function_ref<void(const llvm::Twine &)> emitError;
  mlir::OpBuilder builder;
  mlir::func::FuncOp func;
  int64_t opset = 0;
  llvm::StringMap<mlir::Value> values;
  llvm::StringSet<> readNames;
};

} // namespace ppc

#endif // PPC_FRONTEND_GRAPHIMPORTER_H
