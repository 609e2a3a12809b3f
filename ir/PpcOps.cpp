//===- PpcOps.cpp - shape rules and verifiers of ppc ops ------------------===//

#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "runtime/CheckedSize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc {

namespace {
/// Reports shape-rule errors at `location` when there is one (the parser and
/// builders pass none while probing).
struct LocErrors {
  std::optional<Location> location;
  void operator()(const llvm::Twine &message) const {
    (void)emitOptionalError(location, message.str());
  }
};
} // namespace

static FailureOr<RankedTensorType> rankedType(std::optional<Location> location, Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return emitOptionalError(location, "expected a statically shaped tensor");
  return type;
}

LogicalResult inferBroadcastResult(MLIRContext *context, std::optional<Location> location,
                                   ValueRange operands, bool boolResult,
                                   llvm::SmallVectorImpl<Type> &types) {
  llvm::SmallVector<llvm::ArrayRef<int64_t>> shapes;
  for (Value v : operands) {
    auto type = rankedType(location, v);
    if (failed(type))
      return failure();
    shapes.push_back(type->getShape());
  }
  auto shape = broadcastShapes(shapes, LocErrors{location});
  if (failed(shape))
    return failure();
  Type element =
      boolResult ? IntegerType::get(context, 1) : getElementTypeOrSelf(operands.back().getType());
  types.push_back(RankedTensorType::get(*shape, element));
  return success();
}

LogicalResult inferReduceResult(std::optional<Location> location, Value input,
                                llvm::ArrayRef<int64_t> axes, bool keepdims,
                                llvm::SmallVectorImpl<Type> &types) {
  auto type = rankedType(location, input);
  if (failed(type))
    return failure();
  auto shape = reduceShape(type->getShape(), axes, keepdims, LocErrors{location});
  if (failed(shape))
    return failure();
  types.push_back(RankedTensorType::get(*shape, type->getElementType()));
  return success();
}

/// The shape of a strided slice of `shape` (ppc.slice, ppc.insert_slice).
static FailureOr<Shape> sliceShape(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
                                   llvm::ArrayRef<int64_t> limits, llvm::ArrayRef<int64_t> steps,
                                   ErrorFn error) {
  size_t rank = shape.size();
  if (starts.size() != rank || limits.size() != rank || steps.size() != rank) {
    error("starts, limits and steps need one entry per dimension (rank " + llvm::Twine(rank) + ")");
    return failure();
  }
  Shape result;
  for (size_t d = 0; d < rank; ++d) {
    auto size = sliceSize(shape[d], starts[d], limits[d], steps[d], error);
    if (failed(size))
      return failure();
    result.push_back(*size);
  }
  return result;
}

llvm::Expected<int64_t> tensorTypeBytes(ShapedType type) {
  Type element = type.getElementType();
  int64_t bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 64;
  std::string name;
  llvm::raw_string_ostream(name) << element;
  return checkedTensorBytes(type.getShape(), std::max<int64_t>(1, (bits + 7) / 8), name);
}

int64_t boundedTensorBytes(Type type) {
  auto shaped = llvm::dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  llvm::Expected<int64_t> bytes = tensorTypeBytes(shaped);
  if (!bytes) {
    llvm::consumeError(bytes.takeError());
    return kMaxTensorBytes + 1;
  }
  return *bytes;
}

LogicalResult verifyBoundedResults(Operation *op) {
  for (auto [i, type] : llvm::enumerate(op->getResultTypes())) {
    auto shaped = llvm::dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasRank())
      continue;
    if (llvm::Expected<int64_t> bytes = tensorTypeBytes(shaped); !bytes)
      return op->emitError() << "result " << i << ": " << llvm::toString(bytes.takeError());
  }
  return success();
}

/// Checks `axis` against `rank` for ops whose axis is a non-negative index.
static LogicalResult checkAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << "axis " << axis << " out of range for rank " << rank;
  return success();
}

} // namespace ppc

#include "ir/PpcEnums.cpp.inc"

#include "ir/PpcInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "ir/PpcOps.cpp.inc"

namespace ppc {

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// WhereOp
//===----------------------------------------------------------------------===//

LogicalResult WhereOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                        Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  return inferBroadcastResult(context, location, adaptor.getOperands(),
                              /*boolResult=*/false, types);
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  auto lhs = rankedType(location, adaptor.getLhs());
  auto rhs = rankedType(location, adaptor.getRhs());
  if (failed(lhs) || failed(rhs))
    return failure();
  auto shape = matmulShape(lhs->getShape(), rhs->getShape(), LocErrors{location});
  if (failed(shape))
    return failure();
  types.push_back(RankedTensorType::get(*shape, lhs->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// EinsumOp
//===----------------------------------------------------------------------===//

double flopsOf(Operation *op) {
  auto contraction = llvm::dyn_cast<ContractionOpInterface>(op);
  if (!contraction)
    return 0;
  llvm::SmallVector<llvm::ArrayRef<int64_t>> shapes;
  for (Value v : op->getOperands())
    shapes.push_back(llvm::cast<ShapedType>(v.getType()).getShape());
  return contraction.getFlops(shapes);
}

bool isLinearIn(Operation *op, unsigned i) {
  if (op->hasTrait<AdditiveTrait>() || op->hasTrait<LinearInEachTrait>())
    return true;
  if (op->hasTrait<LinearInFirstTrait>())
    return i == 0;
  // Rounding to an integer or a boolean is not linear.
  if (llvm::isa<CastOp>(op))
    return i == 0 && llvm::isa<FloatType>(getElementTypeOrSelf(op->getResult(0).getType()));
  return false;
}

double MatMulOp::getFlops(llvm::ArrayRef<llvm::ArrayRef<int64_t>> operands) {
  // lhs [..., m, k] @ rhs [..., k, n]: 2mnk per element of the broadcast
  // batch.
  llvm::ArrayRef<int64_t> lhs = operands[0], rhs = operands[1];
  double flops = 2.0 * lhs[lhs.size() - 2] * lhs.back() * rhs.back();
  size_t batch = std::max(lhs.size(), rhs.size()) - 2;
  for (size_t d = 0; d < batch; ++d) {
    auto at = [&](llvm::ArrayRef<int64_t> s) -> int64_t {
      size_t offset = batch - (s.size() - 2);
      return d < offset ? 1 : s[d - offset];
    };
    flops *= std::max(at(lhs), at(rhs));
  }
  return flops;
}

double EinsumOp::getFlops(llvm::ArrayRef<llvm::ArrayRef<int64_t>> operands) {
  // Two per product of the operands' elements at each point of the label
  // space: the product of every label's size (a verified equation).
  auto spec = parseEinsum(getEquation(), [](const llvm::Twine &) {});
  if (failed(spec) || operands.size() < 2)
    return 0;
  llvm::StringMap<int64_t> sizes;
  for (auto [term, shape] : llvm::zip(spec->inputs, operands))
    for (auto [label, size] : llvm::zip(term, shape))
      sizes[llvm::StringRef(&label, 1)] = size;
  double flops = 2.0 * (operands.size() - 1);
  for (const auto &entry : sizes)
    flops *= entry.getValue();
  return flops;
}

LogicalResult EinsumOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  LocErrors errors{location};
  auto spec = parseEinsum(adaptor.getEquation(), errors);
  if (failed(spec))
    return failure();
  if (adaptor.getInputs().empty())
    return emitOptionalError(location, "einsum needs at least one operand");
  llvm::SmallVector<llvm::ArrayRef<int64_t>> shapes;
  Type element;
  for (Value v : adaptor.getInputs()) {
    auto type = rankedType(location, v);
    if (failed(type))
      return failure();
    if (element && element != type->getElementType())
      return emitOptionalError(location, "einsum operands differ in element type");
    element = type->getElementType();
    shapes.push_back(type->getShape());
  }
  auto shape = einsumShape(*spec, shapes, errors);
  if (failed(shape))
    return failure();
  types.push_back(RankedTensorType::get(*shape, element));
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax and LogSoftmax
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() { return checkAxis(*this, getAxis(), getType().getRank()); }

LogicalResult LogSoftmaxOp::verify() { return checkAxis(*this, getAxis(), getType().getRank()); }

LogicalResult LogSumExpOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, adaptor.getInput());
  if (failed(input))
    return failure();
  int64_t axis = adaptor.getAxis(), rank = input->getRank();
  if (axis < 0 || axis >= rank)
    return emitOptionalError(location, "axis ", axis, " out of range for rank ", rank);
  llvm::SmallVector<int64_t> shape(input->getShape());
  shape[axis] = 1;
  types.push_back(input->clone(shape));
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp, AttentionGradOp
//===----------------------------------------------------------------------===//

/// The FLOPs of the score and value GEMMs (`gemms` of them: 2 forward, 5
/// backward with the scores recomputed) over q [..., T, D], k [..., S, D],
/// v [..., S, Dv]; causal attention computes about half the pairs.
static double attentionFlops(llvm::ArrayRef<llvm::ArrayRef<int64_t>> operands, bool causal,
                             double scoreGemms, double valueGemms) {
  llvm::ArrayRef<int64_t> q = operands[0], k = operands[1], v = operands[2];
  double batch = 1;
  for (int64_t size : q.drop_back(2))
    batch *= size;
  double t = q[q.size() - 2], s = k[k.size() - 2];
  double pairs = causal ? t * s - std::min(t, s) * (std::min(t, s) - 1) / 2 : t * s;
  return 2.0 * batch * pairs * (scoreGemms * q.back() + valueGemms * v.back());
}

double AttentionOp::getFlops(llvm::ArrayRef<llvm::ArrayRef<int64_t>> operands) {
  return attentionFlops(operands, getCausal(), 1, 1);
}

double AttentionGradOp::getFlops(llvm::ArrayRef<llvm::ArrayRef<int64_t>> operands) {
  // Scores again, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q.
  return attentionFlops(operands, getCausal(), 3, 2);
}

/// Checks q, k, v (and bias) of an attention and returns the shapes of its
/// output [..., T, Dv] and lse [..., T].
template <typename OpT>
static LogicalResult verifyAttentionOperands(OpT op, RankedTensorType &outputType,
                                             RankedTensorType &lseType) {
  auto q = op.getQ().getType(), k = op.getK().getType(), v = op.getV().getType();
  if (q.getRank() < 3 || k.getRank() != q.getRank() || v.getRank() != q.getRank())
    return op.emitOpError() << "q, k and v must have one rank of at least 3, not " << q << ", " << k
                            << ", " << v;
  if (k.getElementType() != q.getElementType() || v.getElementType() != q.getElementType())
    return op.emitOpError() << "q, k and v must share their element type";
  int64_t rank = q.getRank();
  auto batch = q.getShape().drop_back(2);
  if (k.getShape().drop_back(2) != batch || v.getShape().drop_back(2) != batch)
    return op.emitOpError() << "q, k and v must have the same batch dimensions, not " << q << ", "
                            << k << ", " << v;
  if (k.getShape()[rank - 1] != q.getShape()[rank - 1])
    return op.emitOpError() << "q and k must have the same head size, not " << q << " and " << k;
  if (v.getShape()[rank - 2] != k.getShape()[rank - 2])
    return op.emitOpError() << "k and v must have as many keys, not " << k << " and " << v;
  llvm::SmallVector<int64_t> scores(batch);
  scores.append({q.getShape()[rank - 2], k.getShape()[rank - 2]});
  if (Value bias = op.getBias()) {
    auto type = llvm::cast<RankedTensorType>(bias.getType());
    if (type.getElementType() != q.getElementType() || !broadcastsTo(type.getShape(), scores))
      return op.emitOpError() << "bias " << type << " must broadcast to the scores' shape "
                              << RankedTensorType::get(scores, q.getElementType());
  }
  llvm::SmallVector<int64_t> output(batch);
  output.append({q.getShape()[rank - 2], v.getShape()[rank - 1]});
  outputType = RankedTensorType::get(output, q.getElementType());
  Type lseElement =
      q.getElementType().isF64() ? q.getElementType() : Float32Type::get(op.getContext());
  lseType = RankedTensorType::get(q.getShape().drop_back(), lseElement);
  return success();
}

LogicalResult AttentionOp::verify() {
  RankedTensorType output, lse;
  if (failed(verifyAttentionOperands(*this, output, lse)))
    return failure();
  if (getOutput().getType() != output || getLse().getType() != lse)
    return emitOpError() << "results must be " << output << " and " << lse;
  return success();
}

LogicalResult AttentionGradOp::verify() {
  RankedTensorType output, lse;
  if (failed(verifyAttentionOperands(*this, output, lse)))
    return failure();
  if (getOutput().getType() != output || getDOutput().getType() != output ||
      getLse().getType() != lse)
    return emitOpError() << "output and d_output must be " << output << ", lse " << lse;
  if (getDQ().getType() != getQ().getType() || getDK().getType() != getK().getType() ||
      getDV().getType() != getV().getType())
    return emitOpError() << "d_q, d_k and d_v must have the types of q, k and v";
  return success();
}

//===----------------------------------------------------------------------===//
// LayerNormOp, RmsNormOp
//===----------------------------------------------------------------------===//

/// A normalization's result type: the input's, with `scale` and `bias` (if
/// any) broadcasting to dimensions [axis, rank) in its element type.
static LogicalResult inferNormalization(std::optional<Location> location, Value inputValue,
                                        Value scale, Value bias, int64_t axis,
                                        llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, inputValue);
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  if (axis < 0 || axis >= rank)
    return emitOptionalError(location, "axis ", axis, " out of range for rank ", rank);
  llvm::ArrayRef<int64_t> normalized = input->getShape().drop_front(axis);
  for (Value v : {scale, bias}) {
    if (!v)
      continue;
    auto type = rankedType(location, v);
    if (failed(type))
      return failure();
    if (type->getElementType() != input->getElementType() ||
        !broadcastsTo(type->getShape(), normalized))
      return emitOptionalError(location, "scale and bias must broadcast to the normalized "
                                         "shape and share the input's element type");
  }
  types.push_back(*input);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  return inferNormalization(location, adaptor.getInput(), adaptor.getScale(), adaptor.getBias(),
                            adaptor.getAxis(), types);
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                          Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  return inferNormalization(location, adaptor.getInput(), adaptor.getScale(), Value(),
                            adaptor.getAxis(), types);
}

//===----------------------------------------------------------------------===//
// RotaryOp
//===----------------------------------------------------------------------===//

LogicalResult RotaryOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, adaptor.getInput());
  if (failed(input))
    return failure();
  llvm::ArrayRef<int64_t> shape = input->getShape();
  if (shape.empty() || shape.back() % 2)
    return emitOptionalError(location, "rotary's input needs an even last dimension");
  for (Value table : {adaptor.getCos(), adaptor.getSin()}) {
    auto type = rankedType(location, table);
    if (failed(type))
      return failure();
    if (type->getElementType() != input->getElementType() || type->getRank() == 0 ||
        type->getShape().back() != shape.back() || !broadcastsTo(type->getShape(), shape))
      return emitOptionalError(location, "cos and sin must broadcast to the input's shape with "
                                         "its last dimension and share its element type");
  }
  types.push_back(*input);
  return success();
}

//===----------------------------------------------------------------------===//
// LayerNormGradOp, RmsNormGradOp
//===----------------------------------------------------------------------===//

/// A normalization gradient's result types: the input's, then `statistics`
/// per-row values (the input's shape with dimensions [axis, rank) 1) in f32,
/// or f64 for f64 operands.
static LogicalResult inferNormalizationGrad(MLIRContext *context, std::optional<Location> location,
                                            Value inputValue, Value scaleValue, Value gradValue,
                                            int64_t axis, int statistics,
                                            llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, inputValue);
  auto scale = rankedType(location, scaleValue);
  auto grad = rankedType(location, gradValue);
  if (failed(input) || failed(scale) || failed(grad))
    return failure();
  int64_t rank = input->getRank();
  if (axis < 0 || axis >= rank)
    return emitOptionalError(location, "axis ", axis, " out of range for rank ", rank);
  if (*grad != *input)
    return emitOptionalError(location, "result_grad must have the input's type");
  if (scale->getElementType() != input->getElementType() ||
      !broadcastsTo(scale->getShape(), input->getShape().drop_front(axis)))
    return emitOptionalError(location, "scale must broadcast to the normalized shape and share "
                                       "the input's element type");
  Type element = input->getElementType();
  Type stats = element.isF64() ? element : FloatType::getF32(context);
  Shape shape(input->getShape());
  std::fill(shape.begin() + axis, shape.end(), 1);
  types.push_back(*input);
  for (int i = 0; i < statistics; ++i)
    types.push_back(RankedTensorType::get(shape, stats));
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *context,
                                                std::optional<Location> location, Adaptor adaptor,
                                                llvm::SmallVectorImpl<Type> &types) {
  return inferNormalizationGrad(context, location, adaptor.getInput(), adaptor.getScale(),
                                adaptor.getResultGrad(), adaptor.getAxis(), 2, types);
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location> location, Adaptor adaptor,
                                              llvm::SmallVectorImpl<Type> &types) {
  return inferNormalizationGrad(context, location, adaptor.getInput(), adaptor.getScale(),
                                adaptor.getResultGrad(), adaptor.getAxis(), 1, types);
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << in << " (" << in.getNumElements()
                         << " elements) to " << out << " (" << out.getNumElements() << " elements)";
  return success();
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, adaptor.getInput());
  if (failed(input))
    return failure();
  llvm::ArrayRef<int64_t> perm = adaptor.getPerm();
  int64_t rank = input->getRank();
  llvm::SmallVector<bool> seen(rank, false);
  if (static_cast<int64_t>(perm.size()) != rank)
    return emitOptionalError(location, "perm has ", perm.size(), " entries for rank ", rank);
  Shape shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return emitOptionalError(location, "perm is not a permutation of [0, ", rank, ")");
    seen[p] = true;
    shape.push_back(input->getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  // ODS guarantees at least one operand (Variadic with a non-empty format).
  auto first = rankedType(location, adaptor.getInputs().front());
  if (failed(first))
    return failure();
  int64_t axis = adaptor.getAxis(), rank = first->getRank();
  if (axis < 0 || axis >= rank)
    return emitOptionalError(location, "axis ", axis, " out of range for rank ", rank);
  Shape shape(first->getShape());
  shape[axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto type = rankedType(location, v);
    if (failed(type))
      return failure();
    if (type->getRank() != rank)
      return emitOptionalError(location, "concat operands differ in rank");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && type->getDimSize(d) != shape[d])
        return emitOptionalError(location, "concat operands differ in dimension ", d, " (",
                                 shape[d], " vs ", type->getDimSize(d), ")");
    std::optional<int64_t> sum = llvm::checkedAdd(shape[axis], type->getDimSize(axis));
    if (!sum)
      return emitOptionalError(location, "concat result dimension ", axis,
                               " has more elements than an int64 holds");
    shape[axis] = *sum;
  }
  types.push_back(RankedTensorType::get(shape, first->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, adaptor.getInput());
  if (failed(input))
    return failure();
  auto shape = sliceShape(input->getShape(), adaptor.getStarts(), adaptor.getLimits(),
                          adaptor.getSteps(), LocErrors{location});
  if (failed(shape))
    return failure();
  types.push_back(RankedTensorType::get(*shape, input->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// InsertSliceOp
//===----------------------------------------------------------------------===//

LogicalResult InsertSliceOp::verify() {
  auto shape = sliceShape(getDest().getType().getShape(), getStarts(), getLimits(), getSteps(),
                          [&](const llvm::Twine &msg) { (void)emitOpError(msg); });
  if (failed(shape))
    return failure();
  if (getSource().getType().getShape() != llvm::ArrayRef<int64_t>(*shape))
    return emitOpError() << "source " << getSource().getType()
                         << " does not have the slice's shape "
                         << RankedTensorType::get(*shape, getType().getElementType());
  return success();
}

//===----------------------------------------------------------------------===//
// GatherOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  auto data = rankedType(location, adaptor.getData());
  auto indices = rankedType(location, adaptor.getIndices());
  if (failed(data) || failed(indices))
    return failure();
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= data->getRank())
    return emitOptionalError(location, "axis ", axis, " out of range for rank ", data->getRank());
  Shape shape(data->getShape().take_front(axis));
  llvm::append_range(shape, indices->getShape());
  llvm::append_range(shape, data->getShape().drop_front(axis + 1));
  types.push_back(RankedTensorType::get(shape, data->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// ScatterAddOp
//===----------------------------------------------------------------------===//

LogicalResult ScatterAddOp::verify() {
  RankedTensorType result = getType();
  int64_t axis = getAxis();
  if (failed(checkAxis(*this, axis, result.getRank())))
    return failure();
  Shape expected(result.getShape().take_front(axis));
  llvm::append_range(expected, getIndices().getType().getShape());
  llvm::append_range(expected, result.getShape().drop_front(axis + 1));
  if (getUpdates().getType().getShape() != llvm::ArrayRef<int64_t>(expected))
    return emitOpError() << "updates " << getUpdates().getType()
                         << " do not match the gather shape "
                         << RankedTensorType::get(expected, result.getElementType())
                         << " of indices " << getIndices().getType() << " into " << result
                         << " along axis " << axis;
  return success();
}

//===----------------------------------------------------------------------===//
// ExpandOp
//===----------------------------------------------------------------------===//

LogicalResult ExpandOp::verify() {
  if (!broadcastsTo(getInput().getType().getShape(), getType().getShape()))
    return emitOpError() << getInput().getType() << " does not broadcast to " << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// TriluOp
//===----------------------------------------------------------------------===//

LogicalResult TriluOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError() << "needs rank >= 2, got " << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// ArgMaxOp
//===----------------------------------------------------------------------===//

LogicalResult ArgMaxOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                         Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, adaptor.getInput());
  if (failed(input))
    return failure();
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= input->getRank())
    return emitOptionalError(location, "axis ", axis, " out of range for rank ", input->getRank());
  if (input->getDimSize(axis) < 1)
    return emitOptionalError(location, "axis ", axis, " is empty: it has no largest element");
  Shape shape(input->getShape());
  shape[axis] = 1;
  types.push_back(RankedTensorType::get(shape, IntegerType::get(context, 64)));
  return success();
}

//===----------------------------------------------------------------------===//
// TopKIndicesOp
//===----------------------------------------------------------------------===//

LogicalResult TopKIndicesOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location> location, Adaptor adaptor,
                                              llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, adaptor.getInput());
  if (failed(input))
    return failure();
  int64_t axis = adaptor.getAxis(), k = adaptor.getK();
  if (axis < 0 || axis >= input->getRank())
    return emitOptionalError(location, "axis ", axis, " out of range for rank ", input->getRank());
  if (k < 0 || k > input->getDimSize(axis))
    return emitOptionalError(location, "k = ", k, " is not in [0, ", input->getDimSize(axis), "]");
  Shape shape(input->getShape());
  shape[axis] = k;
  types.push_back(RankedTensorType::get(shape, IntegerType::get(context, 64)));
  return success();
}

//===----------------------------------------------------------------------===//
// CumSumOp
//===----------------------------------------------------------------------===//

LogicalResult CumSumOp::verify() {
  int64_t rank = getType().getRank(), axis = getAxis();
  if (axis < 0 || axis >= rank)
    return emitOpError() << "axis " << axis << " is out of range for rank " << rank;
  return success();
}

//===----------------------------------------------------------------------===//
// NllLossOp
//===----------------------------------------------------------------------===//

LogicalResult NllLossOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                          Adaptor adaptor, llvm::SmallVectorImpl<Type> &types) {
  auto input = rankedType(location, adaptor.getInput());
  auto target = rankedType(location, adaptor.getTarget());
  if (failed(input) || failed(target))
    return failure();
  if (input->getRank() < 2)
    return emitOptionalError(location, "nll_loss input needs rank >= 2 [N, C, ...]");
  Shape expected(input->getShape());
  expected.erase(expected.begin() + 1);
  if (target->getShape() != llvm::ArrayRef<int64_t>(expected))
    return emitOptionalError(location, "nll_loss target shape must be the input shape "
                                       "without its class dimension");
  if (Value weight = adaptor.getWeight()) {
    auto type = rankedType(location, weight);
    if (failed(type))
      return failure();
    if (type->getRank() != 1 || type->getDimSize(0) != input->getDimSize(1))
      return emitOptionalError(location, "nll_loss weight must have shape [C]");
  }
  if (adaptor.getReduction() == LossReduction::None)
    types.push_back(RankedTensorType::get(expected, input->getElementType()));
  else
    types.push_back(RankedTensorType::get({}, input->getElementType()));
  return success();
}

} // namespace ppc
