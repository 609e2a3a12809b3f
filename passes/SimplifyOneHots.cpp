//===- SimplifyOneHots.cpp - one-hot rows built where read, sums without --===//
//
// The gradient of nll_loss is a one-hot row per target, scaled:
//
//   g = where(equal(t, iota), s, 0)          [N, C], t and s [N, 1]
//
// reshaped to the log-probabilities' shape [B, T, C], where log_softmax's
// gradient sums it over the classes:
//
//   dx = g - exp(lp) * reduce_sum(g, [2], keepdims)
//
// Two rewrites:
// - A reshape of g that keeps the classes' axis last builds g in its
//   result's shape instead, from the targets and scales reshaped (small):
//   the one-hot then has the shape of the elementwise gradient reading it.
// - Each row of g holds s once, where the target is one of the classes, so
//   the sum is where(0 <= t < C, s, 0), computed without reading g.
// GPT-2's one-hot is 8192 x 50257 f32: it was written, read back for the
// sum and read again by the gradient (1.6 ms of a predicted H100 step);
// now nothing but the elementwise gradient reads it, in its own shape, and
// it fuses there and is never stored. The sum's rewrite matches
// reduce_sum(where(equal(t, iota), s, 0), [a]) where iota is a constant
// 0, 1, ..., C - 1 along axis a (size 1 elsewhere), and t, s (and the zero)
// have size 1 along a.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_SIMPLIFYONEHOTS
#include "passes/Passes.h.inc"

namespace {

/// The size along `axis` of a tensor of rank `rank` of `value`, broadcast
/// (numpy's rules: trailing dimensions aligned; 1 where it has none).
int64_t sizeAlong(Value value, int64_t axis, int64_t rank) {
  auto shape = llvm::cast<RankedTensorType>(value.getType()).getShape();
  int64_t d = axis - (rank - int64_t(shape.size()));
  return d < 0 ? 1 : shape[d];
}

/// Whether `value` is the integer constant 0, 1, ..., n - 1 along `axis` of
/// rank `rank` (size 1 along every other), n its size there.
bool isIota(Value value, int64_t axis, int64_t rank) {
  DenseIntElementsAttr dense;
  if (!matchPattern(value, m_Constant(&dense)))
    return false;
  auto shape = dense.getType().getShape();
  int64_t n = sizeAlong(value, axis, rank);
  if (dense.getNumElements() != n)
    return false;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d)
    if (d != axis - (rank - int64_t(shape.size())) && shape[d] != 1)
      return false;
  int64_t expected = 0;
  for (const APInt &v : dense.getValues<APInt>())
    if (v.getSExtValue() != expected++)
      return false;
  return true;
}

/// Copies where `from` runs (its forward or backward node and micro-batch)
/// to `to`, an op built in its place: not what its result holds (a
/// gradient's provenance, a memory class), which is the replaced value's.
void copyPlace(Operation *from, Operation *to) {
  for (llvm::StringRef name : {"ppc.fwd", "ppc.bwd", "ppc.mb"})
    if (Attribute attr = from->getDiscardableAttr(name))
      to->setDiscardableAttr(name, attr);
}

/// Whether `classes` fits a signed integer of `type` (the bound compared).
bool fits(int64_t classes, Type type) {
  unsigned width = type.getIntOrFloatBitWidth();
  return width >= 64 || (width > 1 && classes < (int64_t(1) << (width - 1)));
}

/// The one-hot `reshape` reads, built in the reshape's shape before it, or
/// null: g [N, C] = where(equal(t [N, 1], iota [1, C]), s, 0), s one element
/// or [N, 1], and a reshape to [..., C] with the rows' dimensions before.
Value buildInShape(ReshapeOp reshape, OpBuilder &b) {
  auto where = reshape.getInput().getDefiningOp<WhereOp>();
  auto type = llvm::cast<RankedTensorType>(reshape.getType());
  if (!where || !where->hasOneUse() || type.getRank() < 1)
    return nullptr;
  auto whereType = llvm::cast<RankedTensorType>(where.getType());
  auto equal = where.getCondition().getDefiningOp<EqualOp>();
  if (whereType.getRank() != 2 || !equal || !equal->hasOneUse() || !isZerosConstant(where.getY()) ||
      whereType.getDimSize(1) != type.getShape().back())
    return nullptr;
  int64_t rows = whereType.getDimSize(0), classes = whereType.getDimSize(1);
  Value targets = equal.getLhs(), iota = equal.getRhs();
  if (!isIota(iota, 1, 2))
    std::swap(targets, iota);
  auto column = [&](Value v) {
    auto shape = llvm::cast<RankedTensorType>(v.getType()).getShape();
    return shape.size() == 2 && shape[0] == rows && shape[1] == 1;
  };
  auto scaleType = llvm::cast<RankedTensorType>(where.getX().getType());
  auto zeroType = llvm::cast<RankedTensorType>(where.getY().getType());
  if (!isIota(iota, 1, 2) || llvm::cast<RankedTensorType>(iota.getType()).getRank() != 2 ||
      !column(targets) || (scaleType.getNumElements() != 1 && !column(where.getX())) ||
      zeroType.getNumElements() != 1)
    return nullptr;
  // [lead..., 1] for the rows' values, [1, ..., 1, C] for the classes'.
  llvm::SmallVector<int64_t> rowShape(type.getShape()), classShape(type.getRank(), 1);
  rowShape.back() = 1;
  classShape.back() = classes;
  Location loc = reshape.getLoc();
  b.setInsertionPoint(reshape);
  Operation *before = reshape->getPrevNode();
  auto asRows = [&](Value v) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    return b.create<ReshapeOp>(loc, RankedTensorType::get(rowShape, t.getElementType()), v);
  };
  DenseElementsAttr iotaValues;
  matchPattern(iota, m_Constant(&iotaValues));
  Value classIota = b.create<ConstantOp>(
      loc, iotaValues.reshape(RankedTensorType::get(classShape, iotaValues.getElementType())));
  Value hot = b.create<EqualOp>(loc, asRows(targets), classIota);
  Value scale = scaleType.getNumElements() == 1 ? where.getX() : asRows(where.getX());
  Value built = b.create<WhereOp>(loc, hot, scale, where.getY());
  for (Operation *op = before ? before->getNextNode() : &reshape->getBlock()->front();
       op != reshape; op = op->getNextNode())
    copyPlace(where, op);
  if (built.getType() != type)
    return nullptr; // (the dead ops go with the next canonicalization)
  built.getDefiningOp()->setDiscardableAttrs(where->getDiscardableAttrDictionary());
  return built;
}

/// The sum without the one-hot rows, built before `sum`, or null.
Value foldOneHotSum(ReduceSumOp sum, OpBuilder &b) {
  ArrayRef<int64_t> axes = sum.getAxes();
  auto where = sum.getInput().getDefiningOp<WhereOp>();
  if (axes.size() != 1 || !where)
    return nullptr;
  int64_t rank = llvm::cast<RankedTensorType>(where.getType()).getRank(), axis = axes[0];
  auto equal = where.getCondition().getDefiningOp<EqualOp>();
  if (!equal || !isZerosConstant(where.getY()) || sizeAlong(where.getX(), axis, rank) != 1 ||
      sizeAlong(where.getY(), axis, rank) != 1)
    return nullptr;
  Value targets = equal.getLhs(), iota = equal.getRhs();
  if (!isIota(iota, axis, rank))
    std::swap(targets, iota);
  if (!isIota(iota, axis, rank) || sizeAlong(targets, axis, rank) != 1)
    return nullptr;
  int64_t classes = sizeAlong(iota, axis, rank);
  Type index = getElementTypeOrSelf(targets.getType());
  if (!fits(classes, index))
    return nullptr;
  auto scalar = [&](int64_t v) {
    auto type = RankedTensorType::get({}, index);
    return b.create<ConstantOp>(sum.getLoc(),
                                DenseElementsAttr::get(type, b.getIntegerAttr(index, v)));
  };
  b.setInsertionPoint(sum);
  Operation *before = sum->getPrevNode();
  Location loc = sum.getLoc();
  // (In order: the ops' order does not depend on the compiler's.)
  Value negative = b.create<LessOp>(loc, targets, scalar(0));
  Value atLeastZero = b.create<NotOp>(loc, negative);
  Value belowClasses = b.create<LessOp>(loc, targets, scalar(classes));
  Value inRange = b.create<AndOp>(loc, atLeastZero, belowClasses);
  Value folded = b.create<WhereOp>(loc, inRange, where.getX(), where.getY());
  auto type = llvm::cast<RankedTensorType>(sum.getType());
  auto foldedType = llvm::cast<RankedTensorType>(folded.getType());
  if (foldedType.getNumElements() != type.getNumElements())
    return nullptr; // (the dead ops go with the next canonicalization)
  if (foldedType != type)
    folded = b.create<ReshapeOp>(loc, type, folded);
  for (Operation *op = before ? before->getNextNode() : &sum->getBlock()->front(); op != sum;
       op = op->getNextNode())
    copyPlace(sum, op);
  folded.getDefiningOp()->setDiscardableAttrs(sum->getDiscardableAttrDictionary());
  return folded;
}

struct SimplifyOneHots : impl::SimplifyOneHotsBase<SimplifyOneHots> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    llvm::SmallVector<ReshapeOp> reshapes;
    getOperation().walk([&](ReshapeOp reshape) { reshapes.push_back(reshape); });
    for (ReshapeOp reshape : reshapes)
      if (Value built = buildInShape(reshape, b)) {
        Operation *where = reshape.getInput().getDefiningOp();
        Operation *equal = where->getOperand(0).getDefiningOp();
        reshape.replaceAllUsesWith(built);
        reshape->erase();
        where->erase();
        equal->erase();
      }
    llvm::SmallVector<ReduceSumOp> sums;
    getOperation().walk([&](ReduceSumOp sum) { sums.push_back(sum); });
    for (ReduceSumOp sum : sums)
      if (Value folded = foldOneHotSum(sum, b)) {
        sum.replaceAllUsesWith(folded);
        sum->erase();
      }
  }
};

} // namespace
} // namespace ppc
