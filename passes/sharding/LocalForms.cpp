//===- LocalForms.cpp - what one shard runs for an op ---------------------===//
//
// See LocalForms.h. Each local form is written with the dialect's own ops,
// so the per-rank program stays something the executor, the report and code
// generation understand without special cases.
//
//===----------------------------------------------------------------------===//

#include "passes/sharding/LocalForms.h"
#include "ir/ShapeRules.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace ppc {
namespace {

Value scalar(OpBuilder &b, Location loc, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  Attribute attr = llvm::isa<FloatType>(element)
                       ? Attribute(b.getFloatAttr(element, value))
                       : Attribute(b.getIntegerAttr(element, static_cast<int64_t>(value)));
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, attr));
}

/// The factor of dimension `dim` of operand `operand` (its only one).
int64_t factorOf(const ShardingRule &rule, unsigned operand, int64_t dim) {
  const auto &factors = rule.operands[operand][dim];
  return factors.size() == 1 ? factors.front() : -1;
}

/// The axes the batch (Reduction) factors are split over.
AxisList reductionFactorAxes(const ShardingRule &rule, const OpLayouts &decided) {
  AxisList axes;
  for (auto [f, factorAxes] : llvm::enumerate(decided.factorAxes))
    if (rule.factorKinds[f] == FactorKind::Reduction)
      llvm::append_range(axes, factorAxes);
  return axes;
}

/// softmax's or log_softmax's axis.
int64_t softmaxAxis(Operation *op) {
  if (auto softmax = llvm::dyn_cast<SoftmaxOp>(op))
    return softmax.getAxis();
  return llvm::cast<LogSoftmaxOp>(op).getAxis();
}

/// Global indices into a dimension of `size` held as `blocks` blocks, each
/// split over `axes`: the shard's local index of each, and whether the
/// shard holds it. Negative indices count from the end.
std::pair<Value, Value> localIndices(LocalFormContext &c, Location loc, Value indices, int64_t size,
                                     int64_t blocks, llvm::ArrayRef<std::string> axes) {
  OpBuilder &b = c.builder;
  Type element = getElementTypeOrSelf(indices.getType());
  auto constant = [&](int64_t v) { return scalar(b, loc, element, static_cast<double>(v)); };
  int64_t blockLength = size / blocks;
  int64_t part = blockLength / groupSize(c.sizes, axes);
  Value rank = c.axisIndex(axes);
  if (element != getElementTypeOrSelf(rank.getType()))
    rank = b.create<CastOp>(loc, RankedTensorType::get({}, element), rank);
  Value zero = constant(0);
  Value negative = b.create<LessOp>(loc, indices, zero);
  Value index =
      b.create<WhereOp>(loc, negative, b.create<AddOp>(loc, indices, constant(size)), indices);
  Value block;
  if (blocks > 1) {
    block = b.create<DivOp>(loc, index, constant(blockLength));
    index = b.create<SubOp>(loc, index, b.create<MulOp>(loc, block, constant(blockLength)));
  }
  Value shifted = b.create<SubOp>(loc, index, b.create<MulOp>(loc, rank, constant(part)));
  Value held = b.create<AndOp>(loc, b.create<NotOp>(loc, b.create<LessOp>(loc, shifted, zero)),
                               b.create<LessOp>(loc, shifted, constant(part)));
  if (blocks > 1)
    shifted = b.create<AddOp>(loc, b.create<MulOp>(loc, block, constant(part)), shifted);
  return {shifted, held};
}

//===----------------------------------------------------------------------===//
// The local forms, op by op
//===----------------------------------------------------------------------===//

/// slice and insert_slice: bounds on a split dimension become local (a
/// split dimension is split within each block the slice takes).
template <typename OpT>
LogicalResult localizeSlice(LocalFormContext &c, Operation *clone, unsigned operand) {
  auto slice = llvm::cast<OpT>(clone);
  llvm::SmallVector<int64_t> starts(slice.getStarts()), limits(slice.getLimits());
  localizeSliceBounds(
      starts, limits, slice.getSteps(),
      llvm::cast<RankedTensorType>(c.op->getOperand(operand).getType()).getShape(),
      llvm::cast<RankedTensorType>(clone->getOperand(operand).getType()).getShape());
  slice.setStarts(starts);
  slice.setLimits(limits);
  return success();
}

/// reduce_mean over a split dimension: each shard's mean of its part,
/// divided by the number of shards, is a partial sum of the global mean.
LogicalResult localReduceMean(LocalFormContext &c, Operation *clone,
                              llvm::SmallVectorImpl<Value> &results) {
  if (c.decided.reductionAxes.empty())
    return success();
  OpBuilder &b = c.builder;
  b.setInsertionPointAfter(clone);
  Value part = clone->getResult(0);
  Value share = scalar(b, clone->getLoc(), getElementTypeOrSelf(part.getType()),
                       1.0 / groupSize(c.sizes, c.decided.reductionAxes));
  results[0] = b.create<MulOp>(clone->getLoc(), part, share);
  return success();
}

/// gather with its indexed axis split: each shard looks up the indices that
/// fall in its rows (offset to local rows; others read row 0) and zeros the
/// others' results, so the shards' results sum to the lookup.
LogicalResult localGather(LocalFormContext &c, Operation *clone,
                          llvm::SmallVectorImpl<Value> &results) {
  auto gather = llvm::cast<GatherOp>(c.op);
  int64_t axis = gather.getAxis();
  int64_t f = factorOf(c.rule, 0, axis);
  if (f < 0 || c.decided.factorAxes[f].empty())
    return success();
  OpBuilder &b = c.builder;
  Location loc = clone->getLoc();
  b.setInsertionPoint(clone);
  auto [local, held] = localIndices(c, loc, clone->getOperand(1), c.rule.factorSizes[f],
                                    c.decided.factorBlocks[f], c.decided.factorAxes[f]);
  Type indexElement = getElementTypeOrSelf(local.getType());
  clone->setOperand(1, b.create<WhereOp>(loc, held, local, scalar(b, loc, indexElement, 0)));
  // The mask, placed where the indices' dimensions are in the result.
  b.setInsertionPointAfter(clone);
  auto resultType = llvm::cast<RankedTensorType>(clone->getResult(0).getType());
  auto heldType = llvm::cast<RankedTensorType>(held.getType());
  llvm::SmallVector<int64_t> maskShape(axis, 1);
  llvm::append_range(maskShape, heldType.getShape());
  maskShape.resize(resultType.getRank(), 1);
  Value mask = b.create<ReshapeOp>(loc, heldType.clone(maskShape), held);
  results[0] = b.create<WhereOp>(loc, mask, clone->getResult(0),
                                 scalar(b, loc, resultType.getElementType(), 0));
  return success();
}

/// softmax and log_softmax with their axis split: the maximum and the sum
/// of exponentials are all-reduced over the axis's shards.
template <typename OpT>
LogicalResult localSoftmax(LocalFormContext &c, Operation *clone,
                           llvm::SmallVectorImpl<Value> &results) {
  int64_t axis = softmaxAxis(c.op);
  int64_t f = factorOf(c.rule, 0, axis);
  if (f < 0 || c.decided.factorAxes[f].empty())
    return success();
  const AxisList &axes = c.decided.factorAxes[f];
  OpBuilder &b = c.builder;
  Location loc = clone->getLoc();
  b.setInsertionPointAfter(clone);
  Value x = clone->getOperand(0);
  Value max = c.allReduce(b.create<ReduceMaxOp>(loc, x, llvm::ArrayRef<int64_t>{axis}, true), axes,
                          ReductionKind::Max);
  Value shifted = b.create<SubOp>(loc, x, max);
  Value exp = b.create<ExpOp>(loc, shifted);
  Value sum = c.allReduce(b.create<ReduceSumOp>(loc, exp, llvm::ArrayRef<int64_t>{axis}, true),
                          axes, ReductionKind::Sum);
  if (std::is_same_v<OpT, SoftmaxOp>)
    results[0] = b.create<DivOp>(loc, exp, sum);
  else
    results[0] = b.create<SubOp>(loc, shifted, b.create<LogOp>(loc, sum));
  clone->erase();
  return success();
}

/// nll_loss. With its classes split, each shard picks the targets among
/// its classes (the others are ignored locally), so the shards' losses sum
/// to the loss. A mean over split classes or a split batch is each shard's
/// sum over the global count (or summed weight) of the targets not
/// ignored, a partial sum of the mean.
LogicalResult localNllLoss(LocalFormContext &c, Operation *clone,
                           llvm::SmallVectorImpl<Value> &results) {
  auto nll = llvm::cast<NllLossOp>(c.op);
  auto localNll = llvm::cast<NllLossOp>(clone);
  int64_t f = factorOf(c.rule, 0, 1);
  bool classesSplit = f >= 0 && !c.decided.factorAxes[f].empty();
  if (!classesSplit && c.decided.reductionAxes.empty())
    return success();
  OpBuilder &b = c.builder;
  Location loc = clone->getLoc();
  b.setInsertionPoint(clone);
  Value target = clone->getOperand(1);
  auto targetType = llvm::cast<RankedTensorType>(target.getType());
  Type indexElement = targetType.getElementType();
  std::optional<int64_t> ignoreIndex;
  if (auto attr = nll.getIgnoreIndexAttr())
    ignoreIndex = attr.getInt();
  Value ignored;
  if (ignoreIndex)
    ignored = b.create<EqualOp>(loc, target, scalar(b, loc, indexElement, *ignoreIndex));

  bool mean = nll.getReduction() == LossReduction::Mean;
  if (classesSplit) {
    if (nll.getWeight() && mean)
      return c.op->emitError() << "a weighted mean nll_loss with its classes split over ["
                               << llvm::join(c.decided.factorAxes[f], ", ")
                               << "] is not partitioned yet";
    auto [local, held] = localIndices(c, loc, target, c.rule.factorSizes[f],
                                      c.decided.factorBlocks[f], c.decided.factorAxes[f]);
    if (ignored)
      held = b.create<AndOp>(loc, held, b.create<NotOp>(loc, ignored));
    // -1 is never a class: the local ignore index.
    clone->setOperand(1, b.create<WhereOp>(loc, held, local, scalar(b, loc, indexElement, -1)));
    localNll.setIgnoreIndexAttr(b.getI64IntegerAttr(-1));
  }
  if (!mean)
    return success();

  localNll.setReduction(LossReduction::Sum);
  // The denominator: the number (or summed weight) of the global targets
  // that are not ignored.
  auto resultType = llvm::cast<RankedTensorType>(clone->getResult(0).getType());
  Type element = resultType.getElementType();
  AxisList batchAxes = reductionFactorAxes(c.rule, c.decided);
  Value count;
  if (!ignoreIndex && !nll.getWeight()) {
    count = scalar(b, loc, element,
                   numElements(llvm::cast<RankedTensorType>(nll.getTarget().getType()).getShape()));
  } else {
    Value kept =
        ignored ? b.create<CastOp>(loc, targetType.clone(element), b.create<NotOp>(loc, ignored))
                : nullptr;
    Value weights = kept;
    if (Value weight = clone->getNumOperands() > 2 ? clone->getOperand(2) : Value()) {
      Value safe = ignored
                       ? b.create<WhereOp>(loc, ignored, scalar(b, loc, indexElement, 0), target)
                       : target;
      Value picked = b.create<GatherOp>(loc, weight, safe, b.getI64IntegerAttr(0));
      weights = kept ? b.create<MulOp>(loc, picked, kept) : picked;
    }
    llvm::SmallVector<int64_t> all;
    for (int64_t d = 0; d < targetType.getRank(); ++d)
      all.push_back(d);
    count = b.create<ReduceSumOp>(loc, weights, all, false);
    if (!batchAxes.empty())
      count = c.allReduce(count, batchAxes, ReductionKind::Sum);
  }
  b.setInsertionPointAfter(clone);
  results[0] = b.create<DivOp>(loc, clone->getResult(0), count);
  return success();
}

/// Softmax over a split axis: two all-reduces of the reduced shape (the
/// maximum, then the sum of exponentials).
llvm::SmallVector<ConversionStep> softmaxCollectives(Operation *op, const ShardingRule &rule,
                                                     const OpLayouts &decided,
                                                     const AxisSizes &sizes) {
  llvm::SmallVector<ConversionStep> steps;
  int64_t axis = softmaxAxis(op);
  int64_t f = factorOf(rule, 0, axis);
  if (f < 0 || decided.factorAxes[f].empty())
    return steps;
  auto shape = localShape(llvm::cast<RankedTensorType>(op->getOperand(0).getType()).getShape(),
                          decided.operands[0], sizes);
  if (!shape)
    return steps;
  (*shape)[axis] = 1;
  for (int statistic = 0; statistic < 2; ++statistic) {
    ConversionStep step{ConversionStep::AllReduce, decided.factorAxes[f]};
    step.elements = numElements(*shape);
    steps.push_back(step);
  }
  return steps;
}

/// A mean nll_loss with ignored targets or weights over a split batch: one
/// all-reduce of the count of targets.
llvm::SmallVector<ConversionStep> nllLossCollectives(Operation *op, const ShardingRule &rule,
                                                     const OpLayouts &decided, const AxisSizes &) {
  auto nll = llvm::cast<NllLossOp>(op);
  llvm::SmallVector<ConversionStep> steps;
  if (nll.getReduction() != LossReduction::Mean || (!nll.getIgnoreIndexAttr() && !nll.getWeight()))
    return steps;
  AxisList batchAxes = reductionFactorAxes(rule, decided);
  if (!batchAxes.empty()) {
    ConversionStep step{ConversionStep::AllReduce, batchAxes};
    step.elements = 1;
    steps.push_back(step);
  }
  return steps;
}

/// The local forms, by op class: how the partitioner builds each, and what
/// the planner prices it at (null: no collective), side by side.
const llvm::DenseMap<TypeID, LocalForm> &localForms() {
  static const llvm::DenseMap<TypeID, LocalForm> table = [] {
    llvm::DenseMap<TypeID, LocalForm> t;
    t[TypeID::get<SliceOp>()] = {
        [](LocalFormContext &c, Operation *clone, llvm::SmallVectorImpl<Value> &) {
          return localizeSlice<SliceOp>(c, clone, 0);
        },
        nullptr};
    t[TypeID::get<InsertSliceOp>()] = {
        [](LocalFormContext &c, Operation *clone, llvm::SmallVectorImpl<Value> &) {
          return localizeSlice<InsertSliceOp>(c, clone, 1);
        },
        nullptr};
    t[TypeID::get<ReduceMeanOp>()] = {localReduceMean, nullptr};
    t[TypeID::get<GatherOp>()] = {localGather, nullptr};
    t[TypeID::get<SoftmaxOp>()] = {localSoftmax<SoftmaxOp>, softmaxCollectives};
    t[TypeID::get<LogSoftmaxOp>()] = {localSoftmax<LogSoftmaxOp>, softmaxCollectives};
    t[TypeID::get<NllLossOp>()] = {localNllLoss, nllLossCollectives};
    return t;
  }();
  return table;
}

} // namespace

const LocalForm *lookupLocalForm(Operation *op) {
  auto it = localForms().find(op->getName().getTypeID());
  return it == localForms().end() ? nullptr : &it->second;
}

LogicalResult buildLocalForm(LocalFormContext &context, Operation *clone,
                             llvm::SmallVectorImpl<Value> &results) {
  OpBuilder::InsertionGuard guard(context.builder);
  Operation *op = context.op;
  if (const LocalForm *form = lookupLocalForm(op))
    return form->build(context, clone, results);
  // Any other op with a factor of these kinds split would compute garbage.
  for (auto [f, axes] : llvm::enumerate(context.decided.factorAxes))
    if (!axes.empty() && (context.rule.factorKinds[f] == FactorKind::IndexedReduction ||
                          context.rule.factorKinds[f] == FactorKind::Normalized))
      return op->emitError() << "'" << op->getName() << "' has no local form for its split "
                             << "indexed or normalized dimension";
  return success();
}

llvm::SmallVector<ConversionStep> localCollectives(Operation *op, const ShardingRule &rule,
                                                   const OpLayouts &decided,
                                                   const AxisSizes &sizes) {
  const LocalForm *form = lookupLocalForm(op);
  if (!form || !form->collectives)
    return {};
  return form->collectives(op, rule, decided, sizes);
}

} // namespace ppc
