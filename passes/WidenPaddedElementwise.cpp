//===- WidenPaddedElementwise.cpp - padding as a select, not a copy -------===//
//
// ppc-align-gemms pads a GEMM operand whose inner dimension is unaligned
// with a concat of zeros (GPT-2's logits' gradient: [8, 1024, 50257] to
// 50304), which copies the whole tensor (0.55 ms on an H100). When that
// operand is computed elementwise from windows of tensors that already have
// the padded size (the padded product's logits, read through the slice
// ppc-align-gemms made) and from values broadcast along the padded axis,
// this pass computes it on the padded shape instead and selects zero in the
// padding: concat(f(slice(P), b), 0) becomes where(mask, f(P, b), 0), which
// fuses into f's kernel. A constant that spans the axis is extended: a splat
// with its value, any other (the one-hot's class indices) with zeros;
// whatever f computes in the padding is never read, since the select keeps
// the zeros there. Where an op of f is also read elsewhere the rewrite is
// not made (both f's would run).
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_WIDENPADDEDELEMENTWISE
#include "passes/Passes.h.inc"

namespace {

/// A constant that spans the padded axis is copied with zeros in the
/// padding up to this many elements; a larger one is not widened.
constexpr int64_t kMaxWidenedConstant = int64_t(1) << 20;

bool isZeroSplat(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!dense || !dense.isSplat())
    return false;
  if (auto f = llvm::dyn_cast<FloatAttr>(dense.getSplatValue<Attribute>()))
    return f.getValue().isZero() && !f.getValue().isNegative();
  if (auto i = llvm::dyn_cast<IntegerAttr>(dense.getSplatValue<Attribute>()))
    return i.getValue().isZero();
  return false;
}

struct WidenPaddedElementwise : impl::WidenPaddedElementwiseBase<WidenPaddedElementwise> {
  void runOnOperation() override {
    llvm::SmallVector<ConcatOp> concats;
    getOperation().walk([&](ConcatOp op) { concats.push_back(op); });
    bool changed = false;
    for (ConcatOp concat : concats)
      changed |= widen(concat);
    if (changed)
      eraseUnreadPpcOps(getOperation());
  }

  /// The rewrite of one concat, as the rank-`rank` concat along `axis`
  /// from `size` to `padded` elements sees it.
  struct Widening {
    Widening(OpBuilder &b, int64_t rank, int64_t axis, int64_t size, int64_t padded)
        : b(b), rank(rank), axis(axis), size(size), padded(padded) {}
    OpBuilder &b;
    int64_t rank, axis, size, padded;
    llvm::DenseMap<Value, Value> done;
    /// The ops built, in order (each reads only earlier ones), and the
    /// elementwise ops they copy.
    llvm::SmallVector<Operation *> made, copied;

    /// `value`'s dimension aligned with the axis (operands broadcast from
    /// the right), or -1 where it has none.
    int64_t dimOf(Value value) const {
      return axis - (rank - llvm::cast<RankedTensorType>(value.getType()).getRank());
    }

    /// `value` over the padded axis (itself where it is broadcast along it),
    /// or null where it cannot be had.
    Value widened(Value value) {
      if (auto it = done.find(value); it != done.end())
        return it->second;
      Value result = compute(value);
      done[value] = result;
      return result;
    }

    Value compute(Value value) {
      auto type = llvm::cast<RankedTensorType>(value.getType());
      int64_t d = dimOf(value);
      if (d < 0 || type.getDimSize(d) == 1)
        return value;
      if (type.getDimSize(d) != size)
        return nullptr;
      llvm::SmallVector<int64_t> shape(type.getShape());
      shape[d] = padded;
      auto wideType = type.clone(shape);
      Operation *def = value.getDefiningOp();
      if (!def)
        return nullptr;
      if (auto slice = llvm::dyn_cast<SliceOp>(def)) {
        // A window [0, size) along the axis of a value that is already
        // padded, every other dimension whole.
        if (slice.getInput().getType() != wideType)
          return nullptr;
        for (int64_t i = 0; i < type.getRank(); ++i)
          if (slice.getStarts()[i] != 0 || slice.getSteps()[i] != 1 ||
              slice.getLimits()[i] != type.getDimSize(i))
            return nullptr;
        return slice.getInput();
      }
      if (auto constant = llvm::dyn_cast<ConstantOp>(def)) {
        auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!dense || wideType.getNumElements() > kMaxWidenedConstant)
          return nullptr;
        DenseElementsAttr wide;
        if (dense.isSplat()) {
          wide = DenseElementsAttr::get(wideType, dense.getSplatValue<Attribute>());
        } else {
          // Zeros in the padding: the values before the axis, then the
          // axis's, then after it, row-major.
          Attribute zero = b.getZeroAttr(type.getElementType());
          llvm::SmallVector<Attribute> values(dense.getValues<Attribute>());
          int64_t inner = 1;
          for (int64_t i = d + 1; i < type.getRank(); ++i)
            inner *= type.getDimSize(i);
          llvm::SmallVector<Attribute> out;
          out.reserve(wideType.getNumElements());
          int64_t outer = type.getNumElements() / (size * inner);
          for (int64_t o = 0; o < outer; ++o) {
            auto row = llvm::ArrayRef(values).slice(o * size * inner, size * inner);
            out.append(row.begin(), row.end());
            out.append((padded - size) * inner, zero);
          }
          wide = DenseElementsAttr::get(wideType, out);
        }
        auto copy = b.create<ConstantOp>(constant.getLoc(), wide);
        copySchedule(constant, {copy});
        made.push_back(copy);
        return copy.getResult();
      }
      if (!llvm::isa<ElementwiseOpInterface>(def) || def->getNumResults() != 1)
        return nullptr;
      llvm::SmallVector<Value> operands;
      for (Value operand : def->getOperands()) {
        Value wide = widened(operand);
        if (!wide)
          return nullptr;
        operands.push_back(wide);
      }
      Operation *copy = b.clone(*def);
      copy->setOperands(operands);
      copy->getResult(0).setType(wideType);
      made.push_back(copy);
      copied.push_back(def);
      return copy->getResult(0);
    }
  };

  bool widen(ConcatOp concat) {
    auto inputs = concat.getInputs();
    if (inputs.size() != 2 || !isZeroSplat(inputs[1]))
      return false;
    auto type = llvm::cast<RankedTensorType>(concat.getType());
    int64_t axis = concat.getAxis();
    Value piece = inputs[0];
    Operation *def = piece.getDefiningOp();
    if (!def || !llvm::isa<ElementwiseOpInterface>(def))
      return false;
    OpBuilder b(concat);
    Widening widening(b, type.getRank(), axis,
                      llvm::cast<RankedTensorType>(piece.getType()).getDimSize(axis),
                      type.getDimSize(axis));
    // Built before the concat; erased again when the piece cannot be had,
    // or when an op it copies is read outside the piece's tree (both would
    // then run).
    Value wide = widening.widened(piece);
    llvm::SmallPtrSet<Operation *, 16> tree(widening.copied.begin(), widening.copied.end());
    tree.insert(concat);
    bool readElsewhere = llvm::any_of(widening.copied, [&](Operation *op) {
      return llvm::any_of(op->getUsers(), [&](Operation *user) { return !tree.contains(user); });
    });
    if (!wide || wide.getType() != type || readElsewhere) {
      for (Operation *op : llvm::reverse(widening.made))
        op->erase();
      return false;
    }
    llvm::SmallVector<int64_t> maskShape(type.getRank(), 1);
    maskShape[axis] = widening.padded;
    llvm::SmallVector<bool> kept(widening.padded, false);
    std::fill_n(kept.begin(), widening.size, true);
    auto maskType = RankedTensorType::get(maskShape, b.getI1Type());
    Location loc = concat.getLoc();
    auto mask = b.create<ConstantOp>(loc, DenseElementsAttr::get(maskType, llvm::ArrayRef(kept)));
    auto zero = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()),
                                    b.getZeroAttr(type.getElementType())));
    auto select = b.create<WhereOp>(loc, mask, wide, zero);
    copySchedule(def, {mask, zero, select});
    concat.replaceAllUsesWith(select.getResult());
    concat.erase();
    return true;
  }
};

} // namespace
} // namespace ppc
