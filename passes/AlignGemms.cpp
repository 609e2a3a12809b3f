//===- AlignGemms.cpp - pad GEMM dimensions to aligned sizes --------------===//
//
// ppc-align-gemms (Passes.td): a float ppc.matmul whose m, k or n is not a
// multiple of 16 bytes gets zero-padded operands and a sliced result, where
// the product is large enough for the copies to pay. Run on the CUDA
// target's per-rank programs (ppc compile --target cuda | cuda-emulator),
// never by ppc simulate, so the executables' parity tests check that the
// padded program computes what the reference does.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <tuple>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_ALIGNGEMMS
#include "passes/Passes.h.inc"

namespace {

/// Padded sizes are multiples of this many elements (llm.c pads GPT-2's
/// vocabulary so, to 50304), which is 16 bytes or more of any float type.
constexpr int64_t kPadTo = 64;

int64_t padded(int64_t size) { return (size + kPadTo - 1) / kPadTo * kPadTo; }

double bytesOf(ShapedType type) {
  return double(type.getNumElements()) * double(type.getElementTypeBitWidth() / 8);
}

/// The paddings made so far, so that a value two products pad alike (the
/// logits' gradient: k of one, m of the other through a transpose) is padded
/// once. Products are visited in program order, so the first padding
/// dominates the later uses.
using Paddings = llvm::DenseMap<std::tuple<Value, int64_t, int64_t>, Value>;

/// `value` with dimension `dim` grown to `size` by zeros. A transpose is
/// padded before it (its input's matching dimension), so that the product
/// still reads a transposed operand instead of a copy of one.
Value padDimension(OpBuilder &b, Location loc, Value value, int64_t dim, int64_t size,
                   Paddings &made) {
  if (auto transpose = value.getDefiningOp<TransposeOp>()) {
    Value input = padDimension(b, loc, transpose.getInput(), transpose.getPerm()[dim], size, made);
    return b.create<TransposeOp>(loc, input, transpose.getPerm());
  }
  // A reshape that keeps the last dimension (the folded batch of a weight
  // gradient's operand) is padded before it too, so that the padding of its
  // input that the other products read is made once.
  auto type = llvm::cast<RankedTensorType>(value.getType());
  if (auto reshape = value.getDefiningOp<ReshapeOp>(); reshape && dim == type.getRank() - 1) {
    auto inputType = llvm::cast<RankedTensorType>(reshape.getInput().getType());
    if (inputType.getShape().back() == type.getShape().back()) {
      Value input = padDimension(b, loc, reshape.getInput(), inputType.getRank() - 1, size, made);
      llvm::SmallVector<int64_t> shape(type.getShape());
      shape.back() = size;
      return b.create<ReshapeOp>(loc, type.clone(shape), input);
    }
  }
  if (Value padded = made.lookup({value, dim, size}))
    return padded;
  llvm::SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size - shape[dim];
  auto zerosType = RankedTensorType::get(shape, type.getElementType());
  Value zeros = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(zerosType, b.getZeroAttr(type.getElementType())));
  Value padded = b.create<ConcatOp>(loc, ValueRange{value, zeros}, int64_t(dim));
  made[{value, dim, size}] = padded;
  return padded;
}

struct AlignGemmsPass : impl::AlignGemmsBase<AlignGemmsPass> {
  using AlignGemmsBase::AlignGemmsBase;

  void runOnOperation() override {
    llvm::SmallVector<MatMulOp> products;
    getOperation().walk([&](MatMulOp op) { products.push_back(op); });
    Paddings made;
    for (MatMulOp op : products)
      align(op, made);
  }

  void align(MatMulOp op, Paddings &made) {
    auto lhsType = llvm::cast<RankedTensorType>(op.getLhs().getType());
    auto rhsType = llvm::cast<RankedTensorType>(op.getRhs().getType());
    auto resultType = llvm::cast<RankedTensorType>(op.getType());
    Type element = lhsType.getElementType();
    if (!llvm::isa<FloatType>(element) || !lhsType.hasStaticShape() || !rhsType.hasStaticShape())
      return;
    int64_t elementsIn16Bytes = 128 / element.getIntOrFloatBitWidth();
    int64_t lhsRank = lhsType.getRank(), rhsRank = rhsType.getRank();
    int64_t m = lhsType.getShape()[lhsRank - 2], k = lhsType.getShape()[lhsRank - 1],
            n = rhsType.getShape()[rhsRank - 1];
    auto unaligned = [&](int64_t size) { return size % elementsIn16Bytes != 0; };
    bool padM = unaligned(m), padK = unaligned(k), padN = unaligned(n);
    if (!padM && !padK && !padN)
      return;
    // What the padding copies (written once, read once): the padded
    // operands, and the result's slice.
    double lhsBytes = bytesOf(lhsType), rhsBytes = bytesOf(rhsType);
    double copied = 2 * ((padM || padK ? lhsBytes : 0) + (padK || padN ? rhsBytes : 0) +
                         (padM || padN ? bytesOf(resultType) : 0));
    double flops = 2.0 * double(resultType.getNumElements()) * double(k);
    if (flops < flopsPerByte * copied)
      return;
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value lhs = op.getLhs(), rhs = op.getRhs();
    if (padK) {
      lhs = padDimension(b, loc, lhs, lhsRank - 1, padded(k), made);
      rhs = padDimension(b, loc, rhs, rhsRank - 2, padded(k), made);
    }
    if (padM)
      lhs = padDimension(b, loc, lhs, lhsRank - 2, padded(m), made);
    if (padN)
      rhs = padDimension(b, loc, rhs, rhsRank - 1, padded(n), made);
    auto product = b.create<MatMulOp>(loc, lhs, rhs);
    product->setAttrs(op->getAttrs());
    Value result = product;
    if (padM || padN) {
      int64_t rank = resultType.getRank();
      llvm::SmallVector<int64_t> starts(rank, 0), limits(resultType.getShape()), steps(rank, 1);
      result = b.create<SliceOp>(loc, result, starts, limits, steps);
    }
    // The transposes and reshapes the padded ones replace, once nothing
    // reads them.
    auto isView = [](Operation *def) { return def && llvm::isa<TransposeOp, ReshapeOp>(def); };
    llvm::SmallVector<Operation *> unread;
    for (Value old : {op.getLhs(), op.getRhs()})
      if (isView(old.getDefiningOp()))
        unread.push_back(old.getDefiningOp());
    op.replaceAllUsesWith(result);
    op.erase();
    llvm::SmallPtrSet<Operation *, 4> erased;
    while (!unread.empty()) {
      Operation *view = unread.pop_back_val();
      if (erased.contains(view) || !view->use_empty())
        continue;
      if (Operation *inner = view->getOperand(0).getDefiningOp(); isView(inner))
        unread.push_back(inner);
      erased.insert(view);
      view->erase();
    }
  }
};

} // namespace
} // namespace ppc
