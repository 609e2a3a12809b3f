//===- NodeImporter.cpp - what an op importer sees of its node ------------===//

#include "frontend/NodeImporter.h"
#include "executor/Interpreter.h"
#include "frontend/GraphImporter.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcOps.h"
#include "runtime/Printable.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

namespace ppc {

NodeImporter::NodeImporter(GraphImporter &graph, const onnx::NodeProto &node,
                           llvm::StringRef displayName, OpBuilder &builder, int64_t opset)
    : graph_(graph), node_(node), displayName_(displayName), builder_(builder),
      loc_(NameLoc::get(builder.getStringAttr(displayName))), opset_(opset) {}

llvm::StringRef NodeImporter::modelDirectory() const { return graph_.modelDirectory(); }

bool NodeImporter::hasInput(int i) const {
  return i < node_.input_size() && !node_.input(i).empty();
}

FailureOr<Value> NodeImporter::input(int i) {
  if (!hasInput(i)) {
    (void)error("input " + llvm::Twine(i) + " is required");
    return failure();
  }
  Value v = graph_.lookup(node_.input(i));
  if (!v) {
    (void)error("input '" + printable(node_.input(i)) +
                "' is not defined by any node, initializer or graph input");
    return failure();
  }
  return v;
}

std::optional<Tensor> NodeImporter::constantValue(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  // A value the importer reads is held at 8 bytes per element: one larger
  // than a fold may build is not read (a huge splat stays one element).
  if (!constant || typeOf(value).getNumElements() > graph_.maxFoldElements())
    return std::nullopt;
  auto tensor = Tensor::fromAttr(constant.getValue());
  if (failed(tensor))
    return std::nullopt;
  return std::move(*tensor);
}

FailureOr<Tensor> NodeImporter::constantInput(int i) {
  auto v = input(i);
  if (failed(v))
    return failure();
  auto tensor = constantValue(*v);
  if (!tensor && v->getDefiningOp<ConstantOp>() &&
      typeOf(*v).getNumElements() > graph_.maxFoldElements()) {
    (void)error("input " + llvm::Twine(i) + " ('" + printable(node_.input(i)) +
                "') is a constant of " + llvm::Twine(typeOf(*v).getNumElements()) +
                " elements, more than --max-fold-elements (" +
                llvm::Twine(graph_.maxFoldElements()) + ") lets the importer read");
    return failure();
  }
  if (!tensor) {
    // A float initializer is a parameter unless frozen, and parameters are
    // not constants.
    std::string hint = graph_.isParameter(node_.input(i))
                           ? " (it is a float initializer, which trains; --freeze '" +
                                 printable(node_.input(i)) + "' makes it one)"
                           : "";
    (void)error("input " + llvm::Twine(i) + " ('" + printable(node_.input(i)) +
                "') must be a compile-time constant" + hint);
    return failure();
  }
  return std::move(*tensor);
}

FailureOr<llvm::SmallVector<int64_t>> NodeImporter::intsInput(int i) {
  auto tensor = constantInput(i);
  if (failed(tensor))
    return failure();
  if (tensor->isFloat() || tensor->rank() > 1) {
    (void)error("input " + llvm::Twine(i) + " ('" + printable(node_.input(i)) +
                "') must be a 0-D or 1-D integer tensor");
    return failure();
  }
  return llvm::SmallVector<int64_t>(tensor->ints());
}

RankedTensorType NodeImporter::typeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

const onnx::AttributeProto *NodeImporter::attr(llvm::StringRef name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeImporter::intAttr(llvm::StringRef name, int64_t defaultValue) const {
  const auto *a = attr(name);
  return a ? a->i() : defaultValue;
}

float NodeImporter::floatAttr(llvm::StringRef name, float defaultValue) const {
  const auto *a = attr(name);
  return a ? a->f() : defaultValue;
}

std::string NodeImporter::stringAttr(llvm::StringRef name, llvm::StringRef defaultValue) const {
  const auto *a = attr(name);
  return a ? a->s() : defaultValue.str();
}

llvm::SmallVector<int64_t> NodeImporter::intsAttr(llvm::StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return {};
  return llvm::SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

bool NodeImporter::outputUsed(int i) const {
  return i < node_.output_size() && !node_.output(i).empty() && graph_.isRead(node_.output(i));
}

void NodeImporter::setOutput(int i, Value value) {
  if (i < node_.output_size() && !node_.output(i).empty())
    graph_.define(node_.output(i), value);
}

LogicalResult NodeImporter::result(FailureOr<Value> value) {
  if (failed(value))
    return failure();
  setOutput(0, *value);
  return success();
}

FailureOr<Value> NodeImporter::castElements(Value value, Type element) {
  auto type = typeOf(value);
  if (type.getElementType() == element)
    return value;
  return createTyped<CastOp>(type.clone(element), value);
}

FailureOr<Value> NodeImporter::reshape(Value value, llvm::ArrayRef<int64_t> shape) {
  auto type = typeOf(value);
  if (type.getShape() == shape)
    return value;
  return createTyped<ReshapeOp>(type.clone(shape), value);
}

Type NodeImporter::elementType(DType dtype) { return graph_.elementType(dtype); }

Value NodeImporter::constant(const Tensor &tensor) {
  return builder_.create<ConstantOp>(loc_, graph_.imported(tensor).toAttr(context()));
}

Value NodeImporter::splat(const Tensor &scalar, llvm::ArrayRef<int64_t> shape) {
  DenseElementsAttr one = graph_.imported(scalar).reshaped({}).toAttr(context());
  auto type = RankedTensorType::get(shape, one.getElementType());
  return builder_.create<ConstantOp>(loc_,
                                     DenseElementsAttr::get(type, one.getSplatValue<Attribute>()));
}

FailureOr<Tensor> NodeImporter::allocateConstant(DType dtype, llvm::ArrayRef<int64_t> shape,
                                                 const llvm::Twine &what) {
  if (llvm::Error e = Tensor::checkShape(dtype, shape)) {
    (void)error(what + "'s " + llvm::toString(std::move(e)));
    return failure();
  }
  int64_t elements = numElements(shape), limit = graph_.maxFoldElements();
  if (elements > limit) {
    (void)error(what + " would be a constant of " + llvm::Twine(elements) +
                " elements, which the importer builds in host memory; "
                "--max-fold-elements allows " +
                llvm::Twine(limit));
    return failure();
  }
  return Tensor(dtype, shape);
}

Value NodeImporter::scalarLike(Value like, double value) {
  Tensor t(*dtypeOf(typeOf(like).getElementType()), {});
  t.setDouble(0, value);
  return constant(t);
}

LogicalResult NodeImporter::error(const llvm::Twine &message) {
  graph_.report("node '" + printable(displayName_) + "' (" + printable(node_.op_type()) +
                "): " + message);
  return failure();
}

FailureOr<int64_t> NodeImporter::normalizeAxis(int64_t axis, int64_t rank, llvm::StringRef what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    (void)error(what + " " + llvm::Twine(axis) + " is out of range for rank " + llvm::Twine(rank));
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

FailureOr<Value>
NodeImporter::finish(OperationState &state,
                     llvm::function_ref<LogicalResult(llvm::SmallVectorImpl<Type> &)> infer) {
  // Shape rules and verifiers report through diagnostics; keep the first one
  // and report it against this node.
  std::string diagnostic;
  ScopedDiagnosticHandler handler(context(), [&](Diagnostic &d) {
    if (diagnostic.empty())
      diagnostic = d.str();
    return success();
  });
  auto fail = [&]() -> FailureOr<Value> {
    (void)error(diagnostic.empty() ? std::string("invalid operands") : diagnostic);
    return failure();
  };
  if (infer) {
    llvm::SmallVector<Type> types;
    if (failed(infer(types)))
      return fail();
    state.types.assign(types.begin(), types.end());
  }
  Operation *op = builder_.create(state);
  if (failed(verify(op))) {
    op->erase();
    return fail();
  }
  llvm::SmallVector<Value> folded;
  auto didFold = foldWithExecutor(op, builder_, &folded, graph_.maxFoldElements());
  if (failed(didFold))
    return fail();
  return *didFold ? folded.front() : op->getResult(0);
}

} // namespace ppc
