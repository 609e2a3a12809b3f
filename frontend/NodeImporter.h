//===- NodeImporter.h - what an op importer sees of its node -----*- C++ -*-===//
//
// Each ONNX op type has one import function (frontend/ops/*.cpp), registered
// in the OpImporterTable with its input arity. It reads its node through a
// NodeImporter: inputs as values or constants, attributes with ONNX
// defaults, and it creates ppc ops through `create`, which infers result
// types, reports shape errors naming the node, and folds ops whose operands
// are all constant.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_FRONTEND_NODEIMPORTER_H
#define PPC_FRONTEND_NODEIMPORTER_H

#include "executor/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>
#include <optional>

namespace ppc {

class GraphImporter;

class NodeImporter {
public:
  NodeImporter(GraphImporter &graph, const onnx::NodeProto &node, llvm::StringRef displayName,
               mlir::OpBuilder &builder, int64_t opset);

  const onnx::NodeProto &node() const { return node_; }
  int64_t opset() const { return opset_; }
  /// The directory tensor attributes' external data is anchored in.
  llvm::StringRef modelDirectory() const;
  mlir::OpBuilder &builder() { return builder_; }
  mlir::Location loc() const { return loc_; }
  mlir::MLIRContext *context() { return builder_.getContext(); }

  //===--- inputs ---------------------------------------------------------===//
  int numInputs() const { return node_.input_size(); }
  /// True when input `i` is present (ONNX marks omitted optional inputs "").
  bool hasInput(int i) const;
  mlir::FailureOr<mlir::Value> input(int i);
  /// Input `i`, which must be a compile-time constant.
  mlir::FailureOr<Tensor> constantInput(int i);
  /// Input `i` as a list of integers (a constant 0-D or 1-D integer tensor).
  mlir::FailureOr<llvm::SmallVector<int64_t>> intsInput(int i);
  std::optional<Tensor> constantValue(mlir::Value value);
  static mlir::RankedTensorType typeOf(mlir::Value value);

  //===--- attributes -----------------------------------------------------===//
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  bool hasAttr(llvm::StringRef name) const { return attr(name) != nullptr; }
  int64_t intAttr(llvm::StringRef name, int64_t defaultValue) const;
  float floatAttr(llvm::StringRef name, float defaultValue) const;
  std::string stringAttr(llvm::StringRef name, llvm::StringRef defaultValue) const;
  llvm::SmallVector<int64_t> intsAttr(llvm::StringRef name) const;

  //===--- outputs --------------------------------------------------------===//
  int numOutputs() const { return node_.output_size(); }
  /// True when output `i` exists and something reads it.
  bool outputUsed(int i) const;
  void setOutput(int i, mlir::Value value);
  /// Defines output 0 from `value` when it succeeded; passes failure on.
  mlir::LogicalResult result(mlir::FailureOr<mlir::Value> value);

  //===--- creating ops ---------------------------------------------------===//
  /// Creates a single-result op whose result type is inferred.
  template <typename OpT, typename... Args> mlir::FailureOr<mlir::Value> create(Args &&...args) {
    mlir::OperationState state(loc_, OpT::getOperationName());
    OpT::build(builder_, state, mlir::TypeRange{builder_.getNoneType()},
               std::forward<Args>(args)...);
    state.types.clear();
    return finish(state, [&](llvm::SmallVectorImpl<mlir::Type> &types) {
      return OpT::inferReturnTypes(context(), loc_, state.operands,
                                   state.attributes.getDictionary(context()),
                                   state.getRawProperties(), state.regions, types);
    });
  }
  /// Creates a single-result op with the given result type.
  template <typename OpT, typename... Args>
  mlir::FailureOr<mlir::Value> createTyped(mlir::Type type, Args &&...args) {
    mlir::OperationState state(loc_, OpT::getOperationName());
    OpT::build(builder_, state, type, std::forward<Args>(args)...);
    return finish(state, nullptr);
  }
  /// The element type values of `dtype` are imported as (see
  /// ImportOptions::promoteToF64).
  mlir::Type elementType(DType dtype);
  /// `value` converted to element type `element` (itself when it has it).
  mlir::FailureOr<mlir::Value> castElements(mlir::Value value, mlir::Type element);
  /// `value` reshaped to `shape` (itself when it has that shape).
  mlir::FailureOr<mlir::Value> reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape);
  /// A `ppc.constant` holding `tensor`.
  mlir::Value constant(const Tensor &tensor);
  /// A `ppc.constant` of `shape` whose every element is `scalar`'s one
  /// element: a splat, which costs one element of memory whatever the
  /// shape. `shape` must be checked (tensorBytes) before.
  mlir::Value splat(const Tensor &scalar, llvm::ArrayRef<int64_t> shape);
  /// A zero-filled tensor that this node builds in host memory to become a
  /// constant: an error naming `what` when its shape is not within
  /// kMaxTensorBytes or it has more elements than --max-fold-elements lets
  /// the importer build (each one costs 8 bytes here, and more in the IR).
  mlir::FailureOr<Tensor> allocateConstant(DType dtype, llvm::ArrayRef<int64_t> shape,
                                           const llvm::Twine &what);
  /// A rank-0 constant `value` of `like`'s element type.
  mlir::Value scalarLike(mlir::Value like, double value);

  //===--- diagnostics ----------------------------------------------------===//
  /// Reports "node '<name>' (<OpType>): <message>" and returns failure.
  mlir::LogicalResult error(const llvm::Twine &message);
  /// Maps an ONNX axis in [-rank, rank) to [0, rank).
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank, llvm::StringRef what = "axis");

private:
  mlir::FailureOr<mlir::Value>
  finish(mlir::OperationState &state,
         llvm::function_ref<mlir::LogicalResult(llvm::SmallVectorImpl<mlir::Type> &)> infer);

  GraphImporter &graph_;
  const onnx::NodeProto &node_;
  std::string displayName_;
  mlir::OpBuilder &builder_;
  mlir::Location loc_;
  int64_t opset_;
};

using OpImportFn = mlir::LogicalResult (*)(NodeImporter &);

/// The import function and input arity of every supported ONNX op type.
class OpImporterTable {
public:
  struct Entry {
    OpImportFn fn;
    int minInputs, maxInputs;
  };
  static const OpImporterTable &get();
  void add(llvm::StringRef opType, OpImportFn fn, int minInputs, int maxInputs) {
    entries[opType] = {fn, minInputs, maxInputs};
  }
  const Entry *lookup(llvm::StringRef opType) const {
    auto it = entries.find(opType);
    return it == entries.end() ? nullptr : &it->second;
  }
  llvm::SmallVector<llvm::StringRef> opTypes() const;

private:
  llvm::StringMap<Entry> entries;
};

// One registration function per family (frontend/ops/*.cpp).
void registerElementwiseImporters(OpImporterTable &table);
void registerShapeImporters(OpImporterTable &table);
void registerMathImporters(OpImporterTable &table);
void registerNNImporters(OpImporterTable &table);
void registerIndexingImporters(OpImporterTable &table);

} // namespace ppc

#endif // PPC_FRONTEND_NODEIMPORTER_H
