//===- FuseRmsNorm.cpp - RMSNorm's composition into ppc.rms_norm ----------===//
//
// Finds RMS normalization in an imported @forward, in the forms exports
// write it (LLaMA, Mistral, T5, Gemma):
//
//   ms = reduce_mean(x * x | pow(x, 2), trailing axes, keepdims)
//   v  = ms + epsilon                         (a scalar constant, either side)
//   y  = x * (1 / sqrt(v)) | x * reciprocal(sqrt(v)) | x / sqrt(v)
//   o  = y * scale | scale * y                (optional; scale broadcasts to
//                                              the normalized dimensions)
//
// and replaces `o` (or `y`, with a scale of ones) by one `ppc.rms_norm`,
// whose kernels read x once and whose backward (ppc.rms_norm_grad) is one
// kernel, where the composition is six elementwise kernels and a reduction
// forward and twice that backward, each storing its result. The
// intermediates may have other readers: they then stay, and the fused op
// reads x alone.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_FUSERMSNORM
#include "passes/Passes.h.inc"

namespace {

/// x when `square` is x * x or pow(x, 2).
Value squared(Value square) {
  Operation *op = square.getDefiningOp();
  if (auto mul = llvm::dyn_cast_or_null<MulOp>(op))
    return mul.getLhs() == mul.getRhs() ? mul.getLhs() : nullptr;
  if (auto pow = llvm::dyn_cast_or_null<PowOp>(op))
    return floatScalarConstant(pow.getRhs()) == 2.0 ? pow.getLhs() : nullptr;
  return nullptr;
}

/// The users of `value` that are ops of type OpT.
template <typename OpT> llvm::SmallVector<OpT> usersOf(Value value) {
  llvm::SmallVector<OpT> users;
  for (Operation *user : value.getUsers())
    if (auto op = llvm::dyn_cast<OpT>(user))
      users.push_back(op);
  return users;
}

/// The normalized value y = x * rstd (or x / sqrt(v)) for the rstd chain
/// that starts at `v` = mean square + epsilon, among v's users; x is given.
llvm::SmallVector<Value> normalizedValues(Value v, Value x) {
  llvm::SmallVector<Value> rstds, found;
  for (auto sqrt : usersOf<SqrtOp>(v)) {
    Value root = sqrt.getResult();
    for (Operation *user : root.getUsers()) {
      if (auto div = llvm::dyn_cast<DivOp>(user)) {
        if (div.getRhs() == root && div.getLhs() == x)
          found.push_back(div.getResult());
        else if (div.getRhs() == root && floatScalarConstant(div.getLhs()) == 1.0)
          rstds.push_back(div.getResult());
      } else if (auto reciprocal = llvm::dyn_cast<ReciprocalOp>(user)) {
        rstds.push_back(reciprocal.getResult());
      }
    }
  }
  for (Value rstd : rstds)
    for (auto mul : usersOf<MulOp>(rstd))
      if (otherOperand(mul, rstd) == x)
        found.push_back(mul.getResult());
  return found;
}

struct FuseRmsNormPass : impl::FuseRmsNormBase<FuseRmsNormPass> {
  /// Replaces the RMS norms whose mean square is `mean`; returns how many.
  int fuse(ReduceMeanOp mean) {
    Value x = squared(mean.getInput());
    auto type = x ? llvm::dyn_cast<RankedTensorType>(x.getType()) : nullptr;
    if (!type || !llvm::isa<FloatType>(type.getElementType()) || !mean.getKeepdims() ||
        mean.getInput().getType() != type)
      return 0;
    int64_t rank = type.getRank();
    llvm::ArrayRef<int64_t> axes = mean.getAxes();
    if (axes.empty() || axes.back() != rank - 1)
      return 0;
    for (auto [i, a] : llvm::enumerate(axes))
      if (a != axes.front() + static_cast<int64_t>(i))
        return 0;
    int64_t axis = axes.front();
    llvm::ArrayRef<int64_t> normalized = type.getShape().drop_front(axis);
    int fused = 0;
    for (auto add : usersOf<AddOp>(mean.getResult())) {
      Value epsilonValue = otherOperand(add, mean.getResult());
      std::optional<double> epsilon =
          epsilonValue ? floatScalarConstant(epsilonValue) : std::nullopt;
      if (!epsilon || *epsilon < 0 || add.getType() != mean.getType())
        continue;
      for (Value y : normalizedValues(add.getResult(), x)) {
        if (y.getType() != type)
          continue;
        // The scale: the one reader of y that multiplies it by a value of
        // x's element type broadcasting to the normalized dimensions.
        Value scale, out = y;
        if (y.hasOneUse())
          if (auto mul = llvm::dyn_cast<MulOp>(*y.getUsers().begin())) {
            Value w = otherOperand(mul, y);
            auto wType = w ? llvm::dyn_cast<RankedTensorType>(w.getType()) : nullptr;
            if (wType && wType.getElementType() == type.getElementType() &&
                broadcastsTo(wType.getShape(), normalized) && mul.getType() == type) {
              scale = w;
              out = mul.getResult();
            }
          }
        OpBuilder b(out.getDefiningOp());
        Location loc = out.getDefiningOp()->getLoc();
        if (!scale) {
          auto ones = RankedTensorType::get({}, type.getElementType());
          scale = b.create<ConstantOp>(
              loc, DenseElementsAttr::get(ones, b.getFloatAttr(type.getElementType(), 1.0)));
        }
        auto norm = b.create<RmsNormOp>(loc, x, scale, b.getI64IntegerAttr(axis),
                                        b.getF64FloatAttr(*epsilon));
        out.replaceAllUsesWith(norm.getResult());
        ++fused;
      }
    }
    return fused;
  }

  void runOnOperation() override {
    fuseEach<ReduceMeanOp>(getOperation(), [&](ReduceMeanOp mean) { return fuse(mean); });
  }
};

} // namespace
} // namespace ppc
