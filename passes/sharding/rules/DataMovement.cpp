//===- DataMovement.cpp - sharding rules of ops that move elements --------===//
//
// A dimension that an op carries over unchanged (a transposed dimension, a
// concat's other dimensions, a slice's untouched ones) is one parallel factor
// shared by the operand and the result. A dimension whose elements move
// between positions in a way that depends on the whole dimension (a concat
// axis, a sliced or reversed dimension, a gather's indexed axis, the
// triangle of trilu) needs replication; the operand and the result then get
// separate factors where their sizes differ.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "passes/sharding/ShardingRules.h"

#include <numeric>

using namespace mlir;

namespace ppc {

//===----------------------------------------------------------------------===//
// reshape
//===----------------------------------------------------------------------===//

namespace {
/// One side of a reshape group: its dimensions (all of size > 1), what is
/// left of each to factor, and the range [begin, end) of those not yet
/// factored completely.
struct GroupSide {
  llvm::ArrayRef<int64_t> dims;
  llvm::SmallVector<int64_t> left;
  size_t begin = 0, end = 0;
  TensorFactors &factors;

  GroupSide(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> dims, TensorFactors &factors)
      : dims(dims), end(dims.size()), factors(factors) {
    for (int64_t d : dims)
      left.push_back(shape[d]);
  }
  bool done() const { return begin == end; }
  /// Gives the dimension at `pos` factor `f` of size `size` (major to minor).
  void take(size_t pos, int64_t f, int64_t size) {
    factors[dims[pos]].push_back(f);
    left[pos] /= size;
  }
};
} // namespace

/// Factors a group of input and output dimensions whose sizes have the same
/// product (and no shorter prefixes of equal product). Common factors are
/// peeled off both ends: from the major end, the gcd of the two leading
/// sizes is a factor of both (the same block of elements); likewise from the
/// minor end. What neither end reaches is a regrouping of elements that no
/// common factor describes (`[2, 3] -> [3, 2]`); each of its dimensions gets
/// a need-replication factor of its own.
static void factorReshapeGroup(ShardingRule &rule, GroupSide &in, GroupSide &out) {
  while (!in.done() && !out.done()) {
    int64_t g = std::gcd(in.left[in.begin], out.left[out.begin]);
    if (g == 1)
      break;
    int64_t f = rule.addFactor(g);
    in.take(in.begin, f, g);
    out.take(out.begin, f, g);
    in.begin += in.left[in.begin] == 1;
    out.begin += out.left[out.begin] == 1;
  }
  // Minor factors are found minor first but must be listed after the middle
  // ones, so they are created afterwards.
  struct Minor {
    int64_t size;
    size_t inPos, outPos;
  };
  llvm::SmallVector<Minor> minors;
  while (!in.done() && !out.done()) {
    size_t inPos = in.end - 1, outPos = out.end - 1;
    int64_t g = std::gcd(in.left[inPos], out.left[outPos]);
    if (g == 1)
      break;
    minors.push_back({g, inPos, outPos});
    in.left[inPos] /= g;
    out.left[outPos] /= g;
    in.end -= in.left[inPos] == 1;
    out.end -= out.left[outPos] == 1;
  }
  for (GroupSide *side : {&in, &out})
    for (size_t pos = side->begin; pos < side->end; ++pos)
      if (side->left[pos] > 1)
        side->factors[side->dims[pos]].push_back(
            rule.addFactor(side->left[pos], FactorKind::NeedReplication));
  for (const Minor &minor : llvm::reverse(minors)) {
    int64_t f = rule.addFactor(minor.size);
    in.factors[in.dims[minor.inPos]].push_back(f);
    out.factors[out.dims[minor.outPos]].push_back(f);
  }
}

/// reshape: the row-major element order is kept, so the input and output
/// shapes decompose into common factors, e.g. `[2, 16, 64] -> [2, 16, 4, 16]`
/// into 2, 16, 4, 16 with input dimension 2 = [4, 16] and output dimensions
/// 2 and 3 = [4] and [16] (`([i, j, kl]) -> ([i, j, k, l])`). Each group of
/// dimensions with equal size products is factored separately; dimensions of
/// size 1 (squeezed or unsqueezed) have no factor.
static ShardingRule reshapeRule(Operation *op) {
  llvm::ArrayRef<int64_t> inShape = shapeOf(op->getOperand(0)),
                          outShape = shapeOf(op->getResult(0));
  ShardingRule rule;
  if (numElements(inShape) != numElements(outShape))
    return rule; // Not a valid reshape; `verify` reports the empty rule.
  if (numElements(inShape) == 0) {
    // Nothing to shard; factors that keep the sizes consistent.
    rule.operands.push_back(addFactorPerDim(rule, inShape, FactorKind::NeedReplication));
    rule.results.push_back(addFactorPerDim(rule, outShape, FactorKind::NeedReplication));
    return rule;
  }
  TensorFactors inDims(inShape.size()), outDims(outShape.size());
  auto nonUnit = [](llvm::ArrayRef<int64_t> shape) {
    llvm::SmallVector<int64_t> dims;
    for (auto [d, size] : llvm::enumerate(shape))
      if (size != 1)
        dims.push_back(d);
    return dims;
  };
  llvm::SmallVector<int64_t> inIdx = nonUnit(inShape), outIdx = nonUnit(outShape);
  size_t i = 0, o = 0;
  while (i < inIdx.size() && o < outIdx.size()) {
    size_t inEnd = i + 1, outEnd = o + 1;
    int64_t inProduct = inShape[inIdx[i]], outProduct = outShape[outIdx[o]];
    while (inProduct != outProduct) {
      if (inProduct < outProduct)
        inProduct *= inShape[inIdx[inEnd++]];
      else
        outProduct *= outShape[outIdx[outEnd++]];
    }
    GroupSide in(inShape, llvm::ArrayRef(inIdx).slice(i, inEnd - i), inDims);
    GroupSide out(outShape, llvm::ArrayRef(outIdx).slice(o, outEnd - o), outDims);
    factorReshapeGroup(rule, in, out);
    i = inEnd;
    o = outEnd;
  }
  rule.operands.push_back(std::move(inDims));
  rule.results.push_back(std::move(outDims));
  return rule;
}

//===----------------------------------------------------------------------===//
// The other ops
//===----------------------------------------------------------------------===//

/// transpose: the input's factors, permuted.
static ShardingRule transposeRule(Operation *op) {
  auto transpose = llvm::cast<TransposeOp>(op);
  ShardingRule rule;
  TensorFactors in = addFactorPerDim(rule, shapeOf(transpose.getInput()));
  TensorFactors out;
  for (int64_t p : transpose.getPerm())
    out.push_back(in[p]);
  rule.operands.push_back(std::move(in));
  rule.results.push_back(std::move(out));
  return rule;
}

/// concat: the concatenated axis needs replication (each operand and the
/// result has its own factor of its own size); the other dimensions are
/// parallel and shared by all.
static ShardingRule concatRule(Operation *op) {
  auto concat = llvm::cast<ConcatOp>(op);
  int64_t axis = concat.getAxis();
  ShardingRule rule;
  TensorFactors result;
  for (auto [d, size] : llvm::enumerate(shapeOf(concat.getResult())))
    result.push_back(
        {rule.addFactor(size, static_cast<int64_t>(d) == axis ? FactorKind::NeedReplication
                                                              : FactorKind::Parallel)});
  for (Value input : concat.getInputs()) {
    TensorFactors dims = result;
    dims[axis] = {rule.addFactor(shapeOf(input)[axis], FactorKind::NeedReplication)};
    rule.operands.push_back(std::move(dims));
  }
  rule.results.push_back(std::move(result));
  return rule;
}

/// One dimension of a slice: `whole` elements of which `part` are taken
/// (start, limit, step). Taken whole, it is one parallel factor shared by
/// both sides. Sliced with step 1 at multiples of a block length L (the gcd
/// of start, limit and size), it is viewed as [size / L, L]: the blocks are
/// taken or not (a factor per side that needs replication), and each
/// block's L elements are a parallel factor shared by both, so a split of
/// that factor slices locally (q, k and v out of a fused projection).
/// Otherwise each side has its own factor that needs replication.
static void addSliceDim(ShardingRule &rule, int64_t whole, int64_t part, int64_t start,
                        int64_t limit, int64_t step, TensorFactors &wholeDims,
                        TensorFactors &partDims) {
  int64_t block = sliceBlockLength(whole, start, limit, step);
  if (block == whole) {
    int64_t f = rule.addFactor(whole);
    wholeDims.push_back({f});
    partDims.push_back({f});
  } else if (block > 1) {
    int64_t inner = rule.addFactor(block);
    wholeDims.push_back({rule.addFactor(whole / block, FactorKind::NeedReplication), inner});
    partDims.push_back({rule.addFactor(part / block, FactorKind::NeedReplication), inner});
  } else {
    wholeDims.push_back({rule.addFactor(whole, FactorKind::NeedReplication)});
    partDims.push_back({rule.addFactor(part, FactorKind::NeedReplication)});
  }
}

/// slice: input and result dimension by dimension (`addSliceDim`).
static ShardingRule sliceRule(Operation *op) {
  auto slice = llvm::cast<SliceOp>(op);
  llvm::ArrayRef<int64_t> in = shapeOf(slice.getInput()), out = shapeOf(slice.getResult());
  ShardingRule rule;
  TensorFactors inDims, outDims;
  for (size_t d = 0; d < in.size(); ++d)
    addSliceDim(rule, in[d], out[d], slice.getStarts()[d], slice.getLimits()[d],
                slice.getSteps()[d], inDims, outDims);
  rule.operands.push_back(std::move(inDims));
  rule.results.push_back(std::move(outDims));
  return rule;
}

/// insert_slice: like slice, with dest and result sharing every factor and
/// the source as the sliced side.
static ShardingRule insertSliceRule(Operation *op) {
  auto insert = llvm::cast<InsertSliceOp>(op);
  llvm::ArrayRef<int64_t> source = shapeOf(insert.getSource()), dest = shapeOf(insert.getDest());
  ShardingRule rule;
  TensorFactors sourceDims, destDims;
  for (size_t d = 0; d < dest.size(); ++d)
    addSliceDim(rule, dest[d], source[d], insert.getStarts()[d], insert.getLimits()[d],
                insert.getSteps()[d], destDims, sourceDims);
  rule.operands = {sourceDims, destDims};
  rule.results = {destDims};
  return rule;
}

/// gather: the result is `data[:axis] + indices + data[axis+1:]`. The
/// indexed axis of data is an indexed reduction: split, each shard looks up
/// the indices in its rows and zeros the others, and the results add up (a
/// vocabulary-parallel embedding); the indices' dimensions and data's other
/// dimensions are parallel, shared with the result's corresponding
/// dimensions.
static ShardingRule gatherRule(Operation *op) {
  auto gather = llvm::cast<GatherOp>(op);
  llvm::ArrayRef<int64_t> data = shapeOf(gather.getData()), indices = shapeOf(gather.getIndices());
  int64_t axis = gather.getAxis();
  ShardingRule rule;
  TensorFactors before = addFactorPerDim(rule, data.take_front(axis));
  int64_t indexed = rule.addFactor(data[axis], FactorKind::IndexedReduction);
  TensorFactors indexDims = addFactorPerDim(rule, indices);
  TensorFactors after = addFactorPerDim(rule, data.drop_front(axis + 1));
  TensorFactors dataDims = before, resultDims = before;
  dataDims.push_back({indexed});
  llvm::append_range(dataDims, after);
  llvm::append_range(resultDims, indexDims);
  llvm::append_range(resultDims, after);
  rule.operands = {dataDims, indexDims};
  rule.results = {resultDims};
  return rule;
}

/// scatter_add, the mirror of gather: updates are
/// `result[:axis] + indices + result[axis+1:]`. The result's indexed axis
/// needs replication (a gradient wanted split by rows is sliced after the
/// scatter); the indices' dimensions, shared by updates and
/// indices, are a reduction (each shard scatters its part of the updates,
/// and the partial results add up); the other dimensions are parallel.
static ShardingRule scatterAddRule(Operation *op) {
  auto scatter = llvm::cast<ScatterAddOp>(op);
  llvm::ArrayRef<int64_t> result = shapeOf(scatter.getResult()),
                          indices = shapeOf(scatter.getIndices());
  int64_t axis = scatter.getAxis();
  ShardingRule rule;
  TensorFactors before = addFactorPerDim(rule, result.take_front(axis));
  int64_t indexed = rule.addFactor(result[axis], FactorKind::NeedReplication);
  TensorFactors indexDims = addFactorPerDim(rule, indices, FactorKind::Reduction);
  TensorFactors after = addFactorPerDim(rule, result.drop_front(axis + 1));
  TensorFactors updateDims = before, resultDims = before;
  llvm::append_range(updateDims, indexDims);
  llvm::append_range(updateDims, after);
  resultDims.push_back({indexed});
  llvm::append_range(resultDims, after);
  rule.operands = {updateDims, indexDims};
  rule.results = {resultDims};
  return rule;
}

/// expand: one parallel factor per result dimension; the input shares those
/// of its dimensions that are not broadcast.
static ShardingRule expandRule(Operation *op) {
  llvm::ArrayRef<int64_t> result = shapeOf(op->getResult(0));
  ShardingRule rule;
  TensorFactors dims = addFactorPerDim(rule, result);
  rule.operands.push_back(broadcastFactors(shapeOf(op->getOperand(0)), result, dims));
  rule.results.push_back(dims);
  return rule;
}

/// trilu: the last two dimensions, whose indices decide which elements are
/// kept, need replication; the batch dimensions are parallel.
static ShardingRule triluRule(Operation *op) {
  llvm::ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  ShardingRule rule;
  TensorFactors dims = addFactorPerDim(rule, shape.drop_back(2));
  llvm::append_range(dims, addFactorPerDim(rule, shape.take_back(2), FactorKind::NeedReplication));
  rule.operands.push_back(dims);
  rule.results.push_back(dims);
  return rule;
}

/// cumsum: the scanned axis needs replication (every element reads the ones
/// before it); the other dimensions are parallel.
static ShardingRule cumSumRule(Operation *op) {
  llvm::ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  int64_t axis = llvm::cast<CumSumOp>(op).getAxis();
  ShardingRule rule;
  TensorFactors dims = addFactorPerDim(rule, shape.take_front(axis));
  llvm::append_range(dims,
                     addFactorPerDim(rule, shape.slice(axis, 1), FactorKind::NeedReplication));
  llvm::append_range(dims, addFactorPerDim(rule, shape.drop_front(axis + 1)));
  rule.operands.push_back(dims);
  rule.results.push_back(dims);
  return rule;
}

/// A search along `axis` (arg_max, top_k_indices): that axis needs
/// replication in the operand; in the result it holds `found` positions, a
/// factor of its own that needs replication too (k of n), or one position
/// and no factor; the other dimensions are parallel.
static ShardingRule searchRule(Operation *op, int64_t axis, std::optional<int64_t> found) {
  llvm::ArrayRef<int64_t> shape = shapeOf(op->getOperand(0));
  ShardingRule rule;
  TensorFactors before = addFactorPerDim(rule, shape.take_front(axis));
  TensorFactors searched = addFactorPerDim(rule, shape.slice(axis, 1), FactorKind::NeedReplication);
  TensorFactors kept =
      found ? addFactorPerDim(rule, {*found}, FactorKind::NeedReplication) : TensorFactors(1);
  TensorFactors after = addFactorPerDim(rule, shape.drop_front(axis + 1));
  TensorFactors operand = before, result = before;
  llvm::append_range(operand, searched);
  llvm::append_range(result, kept);
  llvm::append_range(operand, after);
  llvm::append_range(result, after);
  rule.operands.push_back(operand);
  rule.results.push_back(result);
  return rule;
}

static ShardingRule argMaxRule(Operation *op) {
  return searchRule(op, llvm::cast<ArgMaxOp>(op).getAxis(), std::nullopt);
}

static ShardingRule topKIndicesRule(Operation *op) {
  auto topK = llvm::cast<TopKIndicesOp>(op);
  return searchRule(op, topK.getAxis(), int64_t(topK.getK()));
}

void registerDataMovementShardingRules(ShardingRuleRegistry &registry) {
  registry.add<ArgMaxOp>(argMaxRule);
  registry.add<TopKIndicesOp>(topKIndicesRule);
  registry.add<CumSumOp>(cumSumRule);
  registry.add<ReshapeOp>(reshapeRule);
  registry.add<TransposeOp>(transposeRule);
  registry.add<ConcatOp>(concatRule);
  registry.add<SliceOp>(sliceRule);
  registry.add<InsertSliceOp>(insertSliceRule);
  registry.add<GatherOp>(gatherRule);
  registry.add<ScatterAddOp>(scatterAddRule);
  registry.add<ExpandOp>(expandRule);
  registry.add<TriluOp>(triluRule);
}

} // namespace ppc
