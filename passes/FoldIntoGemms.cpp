//===- FoldIntoGemms.cpp - batch sums and transposes into the GEMMs -------===//
//
// ppc-fold-into-gemms (Passes.td): `reduce_sum(matmul(transpose(A), G))` over
// every batch dimension, the weight gradient of a linear layer applied to a
// batch of sequences, becomes one product over the folded batch; and a
// matrix product whose result is only transposed (the gradient of a weight
// stored [out, in]) is computed transposed, with its operands swapped and
// read transposed. Run on the per-rank programs at the end of the
// parallelize pipeline, by `ppc simulate` and `ppc compile` alike.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_FOLDINTOGEMMS
#include "passes/Passes.h.inc"

namespace {

/// Whether `transpose` swaps the last two dimensions and nothing else.
bool swapsLastTwo(TransposeOp transpose) { return ppc::swapsLastTwo(transpose.getPerm()); }

struct FoldIntoGemmsPass : impl::FoldIntoGemmsBase<FoldIntoGemmsPass> {
  using FoldIntoGemmsBase::FoldIntoGemmsBase;

  void runOnOperation() override {
    llvm::SmallVector<ReduceSumOp> sums;
    getOperation().walk([&](ReduceSumOp op) { sums.push_back(op); });
    for (ReduceSumOp sum : sums)
      fold(sum);
    llvm::SmallVector<TransposeOp> transposes;
    getOperation().walk([&](TransposeOp op) { transposes.push_back(op); });
    for (TransposeOp transpose : transposes)
      computeTransposed(transpose);
  }

  /// `transpose(P)` of a matrix product P = A B read by nothing else (through
  /// reshapes that only drop or add unit dimensions) is `B^T A^T`: the GEMM
  /// reads its operands transposed in place, and no transpose runs. A
  /// transposed operand's transpose is its input.
  void computeTransposed(TransposeOp transpose) {
    if (!swapsLastTwo(transpose) || transpose.getPerm().size() != 2)
      return;
    llvm::SmallVector<ReshapeOp> views;
    Value value = transpose.getInput();
    while (auto reshape = value.getDefiningOp<ReshapeOp>()) {
      if (!reshape->hasOneUse())
        return;
      views.push_back(reshape);
      value = reshape.getInput();
    }
    auto product = value.getDefiningOp<MatMulOp>();
    if (!product || !product->hasOneUse() ||
        llvm::cast<RankedTensorType>(product.getType()).getRank() != 2)
      return;
    // Each reshape between only drops or adds unit dimensions of the matrix.
    auto matrix = llvm::cast<RankedTensorType>(product.getType()).getShape();
    for (ReshapeOp view : views) {
      llvm::SmallVector<int64_t> kept;
      for (int64_t size : llvm::cast<RankedTensorType>(view.getType()).getShape())
        if (size != 1)
          kept.push_back(size);
      llvm::SmallVector<int64_t> want;
      for (int64_t size : matrix)
        if (size != 1)
          want.push_back(size);
      if (kept != want)
        return;
    }
    OpBuilder b(transpose);
    Location loc = product.getLoc();
    llvm::SmallVector<Operation *> made;
    auto transposed = [&](Value v) -> Value {
      if (auto inner = v.getDefiningOp<TransposeOp>(); inner && swapsLastTwo(inner))
        return inner.getInput();
      made.push_back(b.create<TransposeOp>(loc, v, llvm::ArrayRef<int64_t>{1, 0}));
      return made.back()->getResult(0);
    };
    Value rhs = transposed(product.getRhs()), lhs = transposed(product.getLhs());
    made.push_back(b.create<MatMulOp>(loc, rhs, lhs));
    Value result = made.back()->getResult(0);
    if (result.getType() != transpose.getType()) {
      made.push_back(b.create<ReshapeOp>(loc, transpose.getType(), result));
      result = made.back()->getResult(0);
    }
    copySchedule(product, made);
    llvm::SmallVector<Value, 2> operands(product->getOperands());
    transpose.replaceAllUsesWith(result);
    transpose.erase();
    for (ReshapeOp view : views)
      view.erase();
    product.erase();
    for (Value operand : operands)
      if (auto old = operand.getDefiningOp<TransposeOp>(); old && old->use_empty())
        old.erase();
  }

  void fold(ReduceSumOp sum) {
    auto product = sum.getInput().getDefiningOp<MatMulOp>();
    if (!product || !product->hasOneUse())
      return;
    auto transpose = product.getLhs().getDefiningOp<TransposeOp>();
    if (!transpose || !swapsLastTwo(transpose))
      return;
    Value a = transpose.getInput(), g = product.getRhs();
    auto aType = llvm::cast<RankedTensorType>(a.getType());
    auto gType = llvm::cast<RankedTensorType>(g.getType());
    auto resultType = llvm::cast<RankedTensorType>(product.getType());
    int64_t rank = resultType.getRank();
    if (rank < 3 || !aType.hasStaticShape() || !gType.hasStaticShape())
      return;
    // Summed over exactly the batch, which both operands have whole (a
    // broadcast operand's batch is not in its buffer to fold).
    llvm::ArrayRef<int64_t> batch = resultType.getShape().drop_back(2);
    if (aType.getShape().drop_back(2) != batch || gType.getShape().drop_back(2) != batch)
      return;
    auto axes = llvm::to_vector(sum.getAxes());
    llvm::sort(axes);
    if (axes != llvm::to_vector(llvm::seq<int64_t>(0, rank - 2)))
      return;
    // A [..., M, K] and G [..., M, N] are [P·M, K] and [P·M, N] in place:
    // sum_p A_p^T G_p = A'^T G'.
    int64_t rows = aType.getShape()[rank - 2];
    for (int64_t size : batch)
      rows *= size;
    int64_t k = aType.getShape().back(), n = gType.getShape().back();
    OpBuilder b(sum);
    Location loc = sum.getLoc();
    llvm::SmallVector<Operation *> made;
    auto folded = [&](Value v, int64_t cols) {
      auto type = llvm::cast<RankedTensorType>(v.getType());
      made.push_back(b.create<ReshapeOp>(loc, type.clone({rows, cols}), v));
      return made.back()->getResult(0);
    };
    made.push_back(b.create<TransposeOp>(loc, folded(a, k), llvm::ArrayRef<int64_t>{1, 0}));
    Value aRows = made.back()->getResult(0);
    made.push_back(b.create<MatMulOp>(loc, aRows, folded(g, n)));
    Value result = made.back()->getResult(0);
    if (result.getType() != sum.getType()) {
      made.push_back(b.create<ReshapeOp>(loc, sum.getType(), result));
      result = made.back()->getResult(0);
    }
    copySchedule(product, made);
    sum.replaceAllUsesWith(result);
    sum.erase();
    product.erase();
    if (transpose->use_empty())
      transpose.erase();
  }
};

} // namespace
} // namespace ppc
