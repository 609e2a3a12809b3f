//===- Indexing.cpp - importers of element-indexed ONNX ops ---------------===//
//
// Ops that read or write elements at positions given by data: GatherElements,
// ScatterElements, TopK, OneHot, NonZero, and the scan CumSum. All but TopK's
// selection and CumSum's scan import as compositions of ppc ops (gathers and
// scatter_adds at flat positions, comparisons), so every behaviour of theirs
// is the parts' (architecture.md, "Ops imported as compositions").
//
//===----------------------------------------------------------------------===//

#include "frontend/NodeImporter.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcOps.h"
#include "runtime/Printable.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace ppc {

/// `indices` as i64 with negative ones counted from the end of a dimension
/// of `size` (ONNX's convention); the others unchanged.
static FailureOr<Value> wrapNegative(NodeImporter &n, Value indices, int64_t size) {
  auto index = n.castElements(indices, n.builder().getI64Type());
  if (failed(index))
    return failure();
  auto negative = n.create<LessOp>(*index, n.scalarLike(*index, 0));
  auto shifted = n.create<AddOp>(*index, n.scalarLike(*index, double(size)));
  if (failed(negative) || failed(shifted))
    return failure();
  return n.create<WhereOp>(*negative, *shifted, *index);
}

/// The flat positions in `data` of ONNX's GatherElements/ScatterElements
/// indices along `axis`: each index (negative ones counted from the end)
/// times the axis stride, plus its element's offset along the other
/// dimensions. An index outside the axis becomes one outside the flat data,
/// which the gather or scatter reports.
static FailureOr<Value> flatElementIndices(NodeImporter &n, Value data, Value indices,
                                           int64_t axis) {
  auto dataType = NodeImporter::typeOf(data), indexType = NodeImporter::typeOf(indices);
  int64_t rank = dataType.getRank();
  if (indexType.getRank() != rank) {
    (void)n.error(
        llvm::formatv("indices have rank {0}, the data rank {1}", indexType.getRank(), rank).str());
    return failure();
  }
  llvm::ArrayRef<int64_t> dataShape = dataType.getShape(), indexShape = indexType.getShape();
  Shape strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dataShape[d + 1];
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && indexShape[d] > dataShape[d]) {
      (void)n.error(llvm::formatv("indices dimension {0} ({1}) exceeds the data's ({2})", d,
                                  indexShape[d], dataShape[d])
                        .str());
      return failure();
    }
  int64_t size = dataShape[axis], total = dataType.getNumElements();
  auto allocated = n.allocateConstant(DType::I64, indexShape, "the indices' offsets");
  if (failed(allocated))
    return failure();
  Tensor offsets = std::move(*allocated);
  for (int64_t p = 0; p < offsets.numElements(); ++p) {
    int64_t rest = p, offset = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (d != axis)
        offset += rest % indexShape[d] * strides[d];
      rest /= indexShape[d];
    }
    offsets.setInt(p, offset);
  }
  auto wrapped = wrapNegative(n, indices, size);
  if (failed(wrapped))
    return failure();
  Value zero = n.scalarLike(*wrapped, 0), dim = n.scalarLike(*wrapped, double(size));
  auto low = n.create<LessOp>(*wrapped, zero);
  auto high = n.create<LessOp>(*wrapped, dim);
  if (failed(low) || failed(high))
    return failure();
  auto notLow = n.create<NotOp>(*low);
  if (failed(notLow))
    return failure();
  auto valid = n.create<AndOp>(*notLow, *high);
  auto scaled = n.create<MulOp>(*wrapped, n.scalarLike(*wrapped, double(strides[axis])));
  if (failed(valid) || failed(scaled))
    return failure();
  auto flat = n.create<AddOp>(*scaled, n.constant(offsets));
  if (failed(flat))
    return failure();
  return n.create<WhereOp>(*valid, *flat, n.scalarLike(*flat, double(total)));
}

/// GatherElements as a gather from the flattened data at the flat positions
/// of the indices: every behaviour is then the gather's, and with constant
/// indices (GPT-J's rotary table) it all folds.
static FailureOr<Value> gatherElements(NodeImporter &n, Value data, Value indices, int64_t axis) {
  auto flat = flatElementIndices(n, data, indices, axis);
  if (failed(flat))
    return failure();
  auto table = n.reshape(data, {NodeImporter::typeOf(data).getNumElements()});
  if (failed(table))
    return failure();
  return n.create<GatherOp>(*table, *flat, int64_t(0));
}

static LogicalResult importGatherElements(NodeImporter &n) {
  auto data = n.input(0), indices = n.input(1);
  if (failed(data) || failed(indices))
    return failure();
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), NodeImporter::typeOf(*data).getRank());
  if (failed(axis))
    return failure();
  return n.result(gatherElements(n, *data, *indices, *axis));
}

/// ScatterElements as scatter_adds into the flattened data at the flat
/// positions of the indices. With reduction "add" the updates' sums are added
/// to the data; with "none" they replace the data where an index points
/// (ONNX leaves repeated indices undefined there; here they add up).
static LogicalResult importScatterElements(NodeImporter &n) {
  auto data = n.input(0), indices = n.input(1), updates = n.input(2);
  if (failed(data) || failed(indices) || failed(updates))
    return failure();
  auto dataType = NodeImporter::typeOf(*data);
  if (NodeImporter::typeOf(*updates).getShape() != NodeImporter::typeOf(*indices).getShape())
    return n.error("updates and indices must have the same shape");
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), dataType.getRank());
  if (failed(axis))
    return failure();
  std::string reduction = n.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return n.error("reduction '" + printable(reduction) + "' is not supported (none and add are)");
  auto flat = flatElementIndices(n, *data, *indices, *axis);
  if (failed(flat))
    return failure();
  int64_t total = dataType.getNumElements();
  auto flatType = RankedTensorType::get({total}, dataType.getElementType());
  auto sums = n.createTyped<ScatterAddOp>(flatType, *updates, *flat, int64_t(0));
  if (failed(sums))
    return failure();
  auto scattered = n.reshape(*sums, dataType.getShape());
  if (failed(scattered))
    return failure();
  if (reduction == "add")
    return n.result(n.create<AddOp>(*data, *scattered));
  // Where an index points: a scatter of ones is non-zero there.
  // Counted in i64, which a narrow data type's count could wrap to 0.
  Tensor one(DType::I64, {});
  one.setInt(0, 1);
  auto ones = n.splat(one, NodeImporter::typeOf(*updates).getShape());
  auto countType = RankedTensorType::get({total}, n.builder().getI64Type());
  auto hits = n.createTyped<ScatterAddOp>(countType, ones, *flat, int64_t(0));
  if (failed(hits))
    return failure();
  auto hitShape = n.reshape(*hits, dataType.getShape());
  if (failed(hitShape))
    return failure();
  auto pointed = n.create<GreaterOp>(*hitShape, n.scalarLike(*hitShape, 0));
  if (failed(pointed))
    return failure();
  return n.result(n.create<WhereOp>(*pointed, *scattered, *data));
}

/// TopK as the indices of the k first elements (ppc.top_k_indices) and a
/// gather of the values at them, so the values' gradient is the gather's.
/// The result is always sorted (ONNX leaves the order free with sorted = 0).
static LogicalResult importTopK(NodeImporter &n) {
  auto x = n.input(0);
  auto ks = n.intsInput(1);
  if (failed(x) || failed(ks))
    return failure();
  if (ks->size() != 1)
    return n.error("k must hold one value");
  auto type = NodeImporter::typeOf(*x);
  auto axis = n.normalizeAxis(n.intAttr("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  int64_t k = ks->front();
  if (k < 0 || k > type.getDimSize(*axis))
    return n.error(llvm::formatv("k = {0} is not in [0, {1}] (the size of axis {2})", k,
                                 type.getDimSize(*axis), *axis)
                       .str());
  OpBuilder &b = n.builder();
  auto indices = n.create<TopKIndicesOp>(*x, b.getI64IntegerAttr(*axis), b.getI64IntegerAttr(k),
                                         b.getBoolAttr(n.intAttr("largest", 1) != 0));
  if (failed(indices))
    return failure();
  if (n.outputUsed(0)) {
    auto values = gatherElements(n, *x, *indices, *axis);
    if (failed(values))
      return failure();
    n.setOutput(0, *values);
  }
  n.setOutput(1, *indices);
  return success();
}

/// ArgMax and ArgMin: ppc.arg_max, its axis dropped without keepdims.
template <bool Largest> static LogicalResult importArgMax(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  auto type = NodeImporter::typeOf(*x);
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  if (type.getDimSize(*axis) < 1)
    return n.error(llvm::formatv("axis {0} is empty", *axis).str());
  OpBuilder &b = n.builder();
  auto indices = n.create<ArgMaxOp>(*x, b.getI64IntegerAttr(*axis), b.getBoolAttr(Largest),
                                    b.getBoolAttr(n.intAttr("select_last_index", 0) != 0));
  if (failed(indices))
    return failure();
  if (n.intAttr("keepdims", 1) != 0)
    return n.result(*indices);
  Shape shape(type.getShape());
  shape.erase(shape.begin() + *axis);
  return n.result(n.reshape(*indices, shape));
}

/// OneHot as a comparison with 0..depth-1 along the new axis: indices in
/// [-depth, depth) (negative ones counted from the end) select `on`, every
/// other position (and every position of an index out of range) is `off`.
static LogicalResult importOneHot(NodeImporter &n) {
  auto indices = n.input(0), values = n.input(2);
  auto depths = n.constantInput(1);
  if (failed(indices) || failed(depths) || failed(values))
    return failure();
  if (depths->numElements() != 1)
    return n.error("depth must hold one value");
  // A depth the positions' constant and the result can hold: below 2^31, and
  // with the result's element count in an int64.
  double given = depths->getDouble(0);
  if (!(given >= 1 && given < double(int64_t(1) << 31)))
    return n.error("depth " +
                   (std::abs(given) < 9e18 && given == std::trunc(given)
                        ? llvm::formatv("{0}", int64_t(given)).str()
                        : llvm::formatv("{0:e}", given).str()) +
                   " must be in [1, 2^31)");
  int64_t depth = int64_t(given);
  auto valueType = NodeImporter::typeOf(*values);
  if (valueType.getNumElements() != 2)
    return n.error("values must hold two elements (off, on)");
  auto indexType = NodeImporter::typeOf(*indices);
  int64_t rank = indexType.getRank() + 1;
  auto axis = n.normalizeAxis(n.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  Shape resultShape(indexType.getShape());
  resultShape.insert(resultShape.begin() + *axis, depth);
  if (auto bytes = tensorTypeBytes(valueType.clone(resultShape)); !bytes)
    return n.error("the result's " + llvm::toString(bytes.takeError()));
  auto wrapped = wrapNegative(n, *indices, depth);
  if (failed(wrapped))
    return failure();
  Shape expanded(indexType.getShape());
  expanded.insert(expanded.begin() + *axis, 1);
  auto column = n.reshape(*wrapped, expanded);
  if (failed(column))
    return failure();
  Shape positionsShape(rank, 1);
  positionsShape[*axis] = depth;
  auto allocated = n.allocateConstant(DType::I64, positionsShape, "the positions 0..depth-1");
  if (failed(allocated))
    return failure();
  Tensor positions = std::move(*allocated);
  for (int64_t i = 0; i < depth; ++i)
    positions.setInt(i, i);
  auto hot = n.create<EqualOp>(*column, n.constant(positions));
  auto flatValues = n.reshape(*values, {2});
  if (failed(hot) || failed(flatValues))
    return failure();
  auto off = n.create<SliceOp>(*flatValues, llvm::ArrayRef<int64_t>{0}, llvm::ArrayRef<int64_t>{1},
                               llvm::ArrayRef<int64_t>{1});
  auto on = n.create<SliceOp>(*flatValues, llvm::ArrayRef<int64_t>{1}, llvm::ArrayRef<int64_t>{2},
                              llvm::ArrayRef<int64_t>{1});
  if (failed(off) || failed(on))
    return failure();
  auto offScalar = n.reshape(*off, {}), onScalar = n.reshape(*on, {});
  if (failed(offScalar) || failed(onScalar))
    return failure();
  return n.result(n.create<WhereOp>(*hot, *onScalar, *offScalar));
}

/// NonZero's result shape depends on the data, which ppc's static shapes
/// cannot hold unless the data is a constant; the usual runtime source is a
/// mixture-of-experts router's sparse loop.
static LogicalResult importNonZero(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  std::optional<Tensor> value = n.constantValue(*x);
  if (!value)
    return n.error("the result's shape depends on the data and ppc compiles static shapes "
                   "(a mixture-of-experts router needs its dense form: export with "
                   "python/ppc_export.py), so input 0 ('" +
                   printable(n.node().input(0)) + "') must be a compile-time constant");
  // A scalar counts as one element of one dimension (numpy's nonzero).
  Shape shape(value->shape());
  if (shape.empty())
    shape.push_back(1);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < value->numElements(); ++i)
    if (value->getDouble(i) != 0)
      positions.push_back(i);
  int64_t rank = shape.size(), count = positions.size();
  Tensor result(DType::I64, {rank, count});
  for (int64_t c = 0; c < count; ++c) {
    int64_t rest = positions[c];
    for (int64_t d = rank - 1; d >= 0; --d) {
      result.setInt(d * count + c, rest % shape[d]);
      rest /= shape[d];
    }
  }
  n.setOutput(0, n.constant(result));
  return success();
}

/// CumSum's axis is a constant input (0-D or 1-D of one element).
static LogicalResult importCumSum(NodeImporter &n) {
  auto x = n.input(0);
  auto axes = n.intsInput(1);
  if (failed(x) || failed(axes))
    return failure();
  if (axes->size() != 1)
    return n.error("axis must hold one value");
  auto axis = n.normalizeAxis(axes->front(), NodeImporter::typeOf(*x).getRank());
  if (failed(axis))
    return failure();
  OpBuilder &b = n.builder();
  return n.result(n.create<CumSumOp>(*x, b.getI64IntegerAttr(*axis),
                                     b.getBoolAttr(n.intAttr("exclusive", 0) != 0),
                                     b.getBoolAttr(n.intAttr("reverse", 0) != 0)));
}

void registerIndexingImporters(OpImporterTable &table) {
  table.add("ArgMax", importArgMax<true>, 1, 1);
  table.add("ArgMin", importArgMax<false>, 1, 1);
  table.add("CumSum", importCumSum, 2, 2);
  table.add("GatherElements", importGatherElements, 2, 2);
  table.add("NonZero", importNonZero, 1, 1);
  table.add("OneHot", importOneHot, 3, 3);
  table.add("ScatterElements", importScatterElements, 3, 3);
  table.add("TopK", importTopK, 2, 2);
}

} // namespace ppc
