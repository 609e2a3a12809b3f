//===- Shape.cpp - importers of shape and data-movement ONNX ops ----------===//
//
// Shape, Size, ConstantOfShape and Range have no ppc op: with static shapes
// they are constants. Reshape-like ops (Flatten, Squeeze, Unsqueeze) become
// ppc.reshape, Split becomes ppc.slice per output.
//
//===----------------------------------------------------------------------===//

#include "frontend/NodeImporter.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "runtime/CheckedSize.h"
#include "runtime/Printable.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace ppc {

static Tensor int64Vector(llvm::ArrayRef<int64_t> values) {
  Tensor t(DType::I64, {static_cast<int64_t>(values.size())});
  llvm::copy(values, t.ints().begin());
  return t;
}

static LogicalResult importConstant(NodeImporter &n) {
  if (n.node().attribute_size() != 1)
    return n.error("expects exactly one value attribute");
  const onnx::AttributeProto &a = n.node().attribute(0);
  Tensor value;
  if (a.name() == "value") {
    auto decoded = decodeTensorProto(a.t(), n.modelDirectory());
    if (!decoded)
      return n.error(llvm::toString(decoded.takeError()));
    value = std::move(*decoded);
  } else if (a.name() == "value_float") {
    value = Tensor(DType::F32, {});
    value.setDouble(0, a.f());
  } else if (a.name() == "value_floats") {
    value = Tensor(DType::F32, {a.floats_size()});
    for (int i = 0; i < a.floats_size(); ++i)
      value.setDouble(i, a.floats(i));
  } else if (a.name() == "value_int") {
    value = Tensor(DType::I64, {});
    value.setInt(0, a.i());
  } else if (a.name() == "value_ints") {
    value = int64Vector(llvm::SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
  } else {
    return n.error("attribute '" + printable(a.name()) + "' is not supported");
  }
  n.setOutput(0, n.constant(value));
  return success();
}

static LogicalResult importShape(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  llvm::ArrayRef<int64_t> shape = NodeImporter::typeOf(*x).getShape();
  int64_t rank = shape.size();
  // Opset 15 adds start/end, clamped like Python slicing.
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  int64_t start = clampIndex(n.intAttr("start", 0));
  int64_t end = clampIndex(n.intAttr("end", rank));
  n.setOutput(0, n.constant(int64Vector(shape.slice(start, std::max(start, end) - start))));
  return success();
}

static LogicalResult importSize(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  Tensor size(DType::I64, {});
  size.setInt(0, NodeImporter::typeOf(*x).getNumElements());
  n.setOutput(0, n.constant(size));
  return success();
}

static LogicalResult importConstantOfShape(NodeImporter &n) {
  auto shape = n.intsInput(0);
  if (failed(shape))
    return failure();
  Tensor fill(DType::F32, {1});
  if (const auto *a = n.attr("value")) {
    auto decoded = decodeTensorProto(a->t(), n.modelDirectory());
    if (!decoded)
      return n.error(llvm::toString(decoded.takeError()));
    if (decoded->numElements() != 1)
      return n.error("attribute 'value' must hold one element");
    fill = std::move(*decoded);
  }
  // A splat: one element whatever the shape, which is checked first.
  if (llvm::Error e = Tensor::checkShape(fill.dtype(), *shape))
    return n.error("the result's " + llvm::toString(std::move(e)));
  n.setOutput(0, n.splat(fill, *shape));
  return success();
}

/// Range's element count before clamping at 0, ceil((limit - start) / delta):
/// for integers computed in 128 bits, where limit - start cannot wrap, and
/// exact as a double up to 2^53, far past what is allowed; NaN for NaN bounds.
static double rangeCount(const Tensor &start, const Tensor &limit, const Tensor &delta) {
  if (start.isFloat())
    return std::ceil((limit.getDouble(0) - start.getDouble(0)) / delta.getDouble(0));
  __int128 span = __int128(limit.getInt(0)) - start.getInt(0), step = delta.getInt(0);
  return double(span / step + (span % step != 0 && (span < 0) == (step < 0)));
}

static LogicalResult importRange(NodeImporter &n) {
  auto start = n.constantInput(0), limit = n.constantInput(1), delta = n.constantInput(2);
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  if (start->numElements() != 1 || limit->numElements() != 1 || delta->numElements() != 1)
    return n.error("start, limit and delta must be scalars");
  double d = delta->getDouble(0);
  if (d == 0)
    return n.error("delta must be non-zero");
  // More than 2^40 elements take more than 2^40 bytes in any dtype.
  double count = rangeCount(*start, *limit, *delta);
  if (!(count <= double(kMaxTensorBytes)))
    return n.error(llvm::formatv("the result would have {0:e} elements; ppc allows one "
                                 "tensor at most 2^40 bytes (1 TiB)",
                                 count)
                       .str());
  int64_t elements = count > 0 ? int64_t(count) : 0;
  auto allocated = n.allocateConstant(start->dtype(), {elements}, "the result");
  if (failed(allocated))
    return failure();
  Tensor result = std::move(*allocated);
  double s = start->getDouble(0);
  int64_t value = start->getInt(0);
  for (int64_t i = 0; i < elements; ++i) {
    if (result.isFloat()) {
      result.setDouble(i, s + i * d);
    } else {
      // Each value lies in [start, limit): only a step past the last wraps.
      result.setInt(i, value);
      value = int64_t(uint64_t(value) + uint64_t(delta->getInt(0)));
    }
  }
  n.setOutput(0, n.constant(result));
  return success();
}

static LogicalResult importReshape(NodeImporter &n) {
  auto x = n.input(0);
  auto target = n.intsInput(1);
  if (failed(x) || failed(target))
    return failure();
  auto type = NodeImporter::typeOf(*x);
  bool allowZero = n.intAttr("allowzero", 0) != 0;
  Shape shape;
  int inferred = -1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (i >= static_cast<size_t>(type.getRank()))
        return n.error("shape entry " + llvm::Twine(i) + " is 0 (copy) but the input has rank " +
                       llvm::Twine(type.getRank()));
      d = type.getDimSize(i);
    } else if (d == -1) {
      if (inferred >= 0)
        return n.error("shape has more than one -1");
      inferred = i;
      d = 1;
    } else if (d < 0) {
      return n.error("shape entry " + llvm::Twine(i) + " is " + llvm::Twine(d));
    }
    shape.push_back(d);
  }
  std::optional<int64_t> known = checkedElementCount(shape);
  if (!known)
    return n.error("shape " + shapeString(shape) + " has more elements than an int64 holds");
  if (inferred >= 0) {
    if (*known == 0 || type.getNumElements() % *known != 0)
      return n.error("cannot infer the -1 dimension reshaping " +
                     llvm::Twine(type.getNumElements()) + " elements");
    shape[inferred] = type.getNumElements() / *known;
  }
  return n.result(n.reshape(*x, shape));
}

static LogicalResult importFlatten(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  auto shape = NodeImporter::typeOf(*x).getShape();
  int64_t rank = shape.size(), axis = n.intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return n.error("axis " + llvm::Twine(axis) + " is out of range for rank " + llvm::Twine(rank));
  if (axis < 0)
    axis += rank;
  return n.result(
      n.reshape(*x, {numElements(shape.take_front(axis)), numElements(shape.drop_front(axis))}));
}

/// Squeeze/Unsqueeze axes: an input from opset 13 on, an attribute before.
static FailureOr<llvm::SmallVector<int64_t>> axesOperand(NodeImporter &n, int index) {
  if (n.hasInput(index))
    return n.intsInput(index);
  return n.intsAttr("axes");
}

static LogicalResult importSqueeze(NodeImporter &n) {
  auto x = n.input(0);
  auto axes = axesOperand(n, 1);
  if (failed(x) || failed(axes))
    return failure();
  auto shape = NodeImporter::typeOf(*x).getShape();
  int64_t rank = shape.size();
  llvm::SmallVector<bool> drop(rank, false);
  if (axes->empty()) {
    for (int64_t d = 0; d < rank; ++d)
      drop[d] = shape[d] == 1;
  }
  for (int64_t a : *axes) {
    auto axis = n.normalizeAxis(a, rank);
    if (failed(axis))
      return failure();
    if (shape[*axis] != 1)
      return n.error("cannot squeeze dimension " + llvm::Twine(*axis) + " of size " +
                     llvm::Twine(shape[*axis]));
    drop[*axis] = true;
  }
  Shape result;
  for (int64_t d = 0; d < rank; ++d)
    if (!drop[d])
      result.push_back(shape[d]);
  return n.result(n.reshape(*x, result));
}

static LogicalResult importUnsqueeze(NodeImporter &n) {
  auto x = n.input(0);
  auto axes = axesOperand(n, 1);
  if (failed(x) || failed(axes))
    return failure();
  auto shape = NodeImporter::typeOf(*x).getShape();
  int64_t rank = shape.size() + axes->size();
  llvm::SmallVector<bool> inserted(rank, false);
  for (int64_t a : *axes) {
    auto axis = n.normalizeAxis(a, rank);
    if (failed(axis))
      return failure();
    if (inserted[*axis])
      return n.error("axis " + llvm::Twine(a) + " repeats");
    inserted[*axis] = true;
  }
  Shape result;
  auto next = shape.begin();
  for (int64_t d = 0; d < rank; ++d)
    result.push_back(inserted[d] ? 1 : *next++);
  return n.result(n.reshape(*x, result));
}

static LogicalResult importTranspose(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  int64_t rank = NodeImporter::typeOf(*x).getRank();
  llvm::SmallVector<int64_t> perm = n.intsAttr("perm");
  if (!n.hasAttr("perm"))
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  return n.result(n.create<TransposeOp>(*x, perm));
}

static LogicalResult importConcat(NodeImporter &n) {
  llvm::SmallVector<Value> inputs;
  for (int i = 0; i < n.numInputs(); ++i) {
    auto v = n.input(i);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  if (!n.hasAttr("axis"))
    return n.error("attribute 'axis' is required");
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), NodeImporter::typeOf(inputs[0]).getRank());
  if (failed(axis))
    return failure();
  if (inputs.size() == 1) {
    n.setOutput(0, inputs[0]);
    return success();
  }
  return n.result(n.create<ConcatOp>(inputs, *axis));
}

/// A slice of `x` along `axis` only: [start, start + size).
static FailureOr<Value> sliceAxis(NodeImporter &n, Value x, int64_t axis, int64_t start,
                                  int64_t size) {
  auto shape = NodeImporter::typeOf(x).getShape();
  llvm::SmallVector<int64_t> starts(shape.size(), 0), limits(shape), steps(shape.size(), 1);
  starts[axis] = start;
  limits[axis] = start + size;
  return n.create<SliceOp>(x, starts, limits, steps);
}

static LogicalResult importSplit(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  auto shape = NodeImporter::typeOf(*x).getShape();
  if (shape.empty())
    return n.error("the input is a scalar: there is no dimension to split");
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), shape.size());
  if (failed(axis))
    return failure();
  int64_t dim = shape[*axis], outputs = n.numOutputs();
  llvm::SmallVector<int64_t> sizes;
  if (n.hasInput(1)) {
    auto split = n.intsInput(1);
    if (failed(split))
      return failure();
    sizes = *split;
  } else if (n.hasAttr("split")) {
    sizes = n.intsAttr("split");
  } else {
    // Opset 18's num_outputs allows a smaller last chunk; before, the
    // outputs split the dimension evenly.
    int64_t parts = n.intAttr("num_outputs", outputs);
    if (parts != outputs)
      return n.error("num_outputs is " + llvm::Twine(parts) + " but the node has " +
                     llvm::Twine(outputs) + " outputs");
    if (parts == 0)
      return n.error("the node has no outputs to split into");
    int64_t chunk = n.hasAttr("num_outputs") ? (dim + parts - 1) / parts : dim / parts;
    if (!n.hasAttr("num_outputs") && dim % parts != 0)
      return n.error("dimension " + llvm::Twine(*axis) + " of size " + llvm::Twine(dim) +
                     " does not split evenly into " + llvm::Twine(parts));
    for (int64_t i = 0, left = dim; i < parts; ++i, left -= chunk)
      sizes.push_back(std::min(chunk, left));
  }
  if (static_cast<int64_t>(sizes.size()) != outputs)
    return n.error("split has " + llvm::Twine(sizes.size()) + " sizes for " + llvm::Twine(outputs) +
                   " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return n.error("split size " + llvm::Twine(s) + " is negative");
    std::optional<int64_t> sum = llvm::checkedAdd(total, s);
    if (!sum)
      return n.error("split sizes add up to more than an int64 holds");
    total = *sum;
  }
  if (total != dim)
    return n.error("split sizes add up to " + llvm::Twine(total) + ", not the dimension's " +
                   llvm::Twine(dim));
  int64_t start = 0;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    auto part = sliceAxis(n, *x, *axis, start, size);
    if (failed(part))
      return failure();
    n.setOutput(i, *part);
    start += size;
  }
  return success();
}

/// Slice's starts/ends/axes are attributes before opset 10, inputs after.
static FailureOr<llvm::SmallVector<int64_t>> sliceOperand(NodeImporter &n, int index,
                                                          llvm::StringRef attr) {
  if (n.opset() < 10)
    return n.intsAttr(attr);
  return n.intsInput(index);
}

static LogicalResult importSlice(NodeImporter &n) {
  auto x = n.input(0);
  auto starts = sliceOperand(n, 1, "starts"), ends = sliceOperand(n, 2, "ends");
  if (failed(x) || failed(starts) || failed(ends))
    return failure();
  auto shape = NodeImporter::typeOf(*x).getShape();
  int64_t rank = shape.size();
  llvm::SmallVector<int64_t> axes, steps;
  if (n.opset() < 10 && n.hasAttr("axes")) {
    axes = n.intsAttr("axes");
  } else if (n.hasInput(3)) {
    auto a = n.intsInput(3);
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (n.hasInput(4)) {
    auto s = n.intsInput(4);
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return n.error("starts, ends, axes and steps differ in length");

  llvm::SmallVector<int64_t> begin(rank, 0), limit(shape), stride(rank, 1);
  llvm::SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    // normalizeAxis lets axis 0 of a scalar through; a scalar has no axis
    // to slice.
    auto axis = n.normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    if (*axis >= rank)
      return n.error("axis " + llvm::Twine(axes[i]) + " is out of range for rank 0");
    if (seen[*axis])
      return n.error("axis " + llvm::Twine(*axis) + " repeats");
    seen[*axis] = true;
    int64_t dim = shape[*axis], step = steps[i];
    if (step == 0)
      return n.error("step 0 on axis " + llvm::Twine(*axis));
    // ONNX clamps out-of-range bounds (INT64_MAX means "to the end").
    int64_t s = (*starts)[i], e = (*ends)[i];
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      e = std::max(e, s);
    } else {
      // Backward from at most the last element, which an empty dimension
      // does not have: there the slice is empty, from -1 to -1.
      s = dim == 0 ? -1 : std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      e = std::min(e, s);
    }
    begin[*axis] = s;
    limit[*axis] = e;
    stride[*axis] = step;
  }
  return n.result(n.create<SliceOp>(*x, begin, limit, stride));
}

static LogicalResult importGather(NodeImporter &n) {
  auto data = n.input(0), indices = n.input(1);
  if (failed(data) || failed(indices))
    return failure();
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), NodeImporter::typeOf(*data).getRank());
  if (failed(axis))
    return failure();
  return n.result(n.create<GatherOp>(*data, *indices, *axis));
}

/// Tile as a broadcast: x [d0, d1, ...] viewed as [1, d0, 1, d1, ...],
/// expanded to [r0, d0, r1, d1, ...] and merged to [r0*d0, r1*d1, ...]
/// (the repetitions are the major part of each dimension).
static LogicalResult importTile(NodeImporter &n) {
  auto x = n.input(0);
  auto repeats = n.intsInput(1);
  if (failed(x) || failed(repeats))
    return failure();
  auto type = NodeImporter::typeOf(*x);
  int64_t rank = type.getRank();
  if (int64_t(repeats->size()) != rank)
    return n.error(
        llvm::formatv("repeats has {0} values for an input of rank {1}", repeats->size(), rank)
            .str());
  Shape split, expanded, merged;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t r = (*repeats)[d];
    if (r < 0)
      return n.error(llvm::formatv("repeats[{0}] is {1}; expected >= 0", d, r).str());
    std::optional<int64_t> size = llvm::checkedMul(r, type.getDimSize(d));
    if (!size)
      return n.error(llvm::formatv("repeats[{0}] = {1} makes dimension {0} overflow", d, r).str());
    split.append({1, type.getDimSize(d)});
    expanded.append({r, type.getDimSize(d)});
    merged.push_back(*size);
  }
  if (auto bytes = tensorTypeBytes(type.clone(merged)); !bytes)
    return n.error("the result's " + llvm::toString(bytes.takeError()));
  if (llvm::all_of(*repeats, [](int64_t r) { return r == 1; })) {
    n.setOutput(0, *x);
    return success();
  }
  auto viewed = n.reshape(*x, split);
  if (failed(viewed))
    return failure();
  auto broadcast = n.createTyped<ExpandOp>(type.clone(expanded), *viewed);
  if (failed(broadcast))
    return failure();
  return n.result(n.reshape(*broadcast, merged));
}

static LogicalResult importExpand(NodeImporter &n) {
  auto x = n.input(0);
  auto target = n.intsInput(1);
  if (failed(x) || failed(target))
    return failure();
  auto type = NodeImporter::typeOf(*x);
  auto shape =
      broadcastShapes({type.getShape(), *target}, [&](const llvm::Twine &m) { (void)n.error(m); });
  if (failed(shape))
    return failure();
  if (type.getShape() == llvm::ArrayRef<int64_t>(*shape)) {
    n.setOutput(0, *x);
    return success();
  }
  return n.result(n.createTyped<ExpandOp>(type.clone(*shape), *x));
}

static LogicalResult importTrilu(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  int64_t k = 0;
  if (n.hasInput(1)) {
    auto ks = n.intsInput(1);
    if (failed(ks))
      return failure();
    if (ks->size() != 1)
      return n.error("k must be a scalar");
    k = ks->front();
  }
  return n.result(n.create<TriluOp>(*x, n.intAttr("upper", 1) != 0, k));
}

/// Dropout is the identity at inference and at ratio 0; its mask is all ones.
static LogicalResult importDropout(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  // The ratio is an attribute before opset 12, an input from 12 on.
  double ratio = n.floatAttr("ratio", 0.5);
  if (n.hasInput(1)) {
    auto r = n.constantInput(1);
    if (failed(r))
      return failure();
    ratio = r->getDouble(0);
  }
  bool training = false;
  if (n.hasInput(2)) {
    auto t = n.constantInput(2);
    if (failed(t))
      return failure();
    training = t->getInt(0) != 0;
  }
  if (training && ratio != 0)
    return n.error(llvm::formatv("dropout in training mode (ratio {0}) is not supported "
                                 "yet; set the model's dropout probabilities to 0 before "
                                 "exporting it",
                                 ratio)
                       .str());
  n.setOutput(0, *x);
  if (n.outputUsed(1)) {
    auto shape = NodeImporter::typeOf(*x).getShape();
    Tensor keep(DType::I1, {});
    keep.setInt(0, 1);
    n.setOutput(1, n.splat(keep, shape));
  }
  return success();
}

void registerShapeImporters(OpImporterTable &table) {
  table.add("Constant", importConstant, 0, 0);
  table.add("Shape", importShape, 1, 1);
  table.add("Size", importSize, 1, 1);
  table.add("ConstantOfShape", importConstantOfShape, 1, 1);
  table.add("Range", importRange, 3, 3);
  table.add("Reshape", importReshape, 2, 2);
  table.add("Flatten", importFlatten, 1, 1);
  table.add("Squeeze", importSqueeze, 1, 2);
  table.add("Unsqueeze", importUnsqueeze, 1, 2);
  table.add("Transpose", importTranspose, 1, 1);
  table.add("Concat", importConcat, 1, INT32_MAX);
  table.add("Split", importSplit, 1, 2);
  table.add("Slice", importSlice, 1, 5);
  table.add("Gather", importGather, 2, 2);
  table.add("Expand", importExpand, 2, 2);
  table.add("Trilu", importTrilu, 1, 2);
  table.add("Tile", importTile, 2, 2);
  table.add("Dropout", importDropout, 1, 3);
}

} // namespace ppc
