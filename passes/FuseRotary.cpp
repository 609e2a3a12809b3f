//===- FuseRotary.cpp - rotary embedding's composition into ppc.rotary ----===//
//
// Finds rotary position embedding in the rotate-half convention in an
// imported @forward, as exports write it (Hugging Face's GPT-NeoX, LLaMA,
// Mistral, Phi and Falcon: `rotate_half`, then `q * cos + rotate_half(q) *
// sin`):
//
//   r = concat(neg(slice(x, [h, 2h))), slice(x, [0, h)), last axis)
//   y = x * cos + r * sin        (each product and the sum either way round)
//
// with cos and sin broadcasting to x's shape with its last dimension, and
// replaces `y` by one `ppc.rotary`. The composition is two slices, a
// negation and a concat (kernels that copy x) and an elementwise kernel
// forward, and backward the products' gradients, the halves inserted into
// zeros and their sum; ppc.rotary is one kernel each way, which reads x
// (or the gradient) where it lies and writes where its reader reads
// (codegen/StridedViews.h). The intermediates may have other readers: they
// then stay. A partial rotation (GPT-NeoX's and Phi's first quarter) is the
// same composition on a slice of the heads, and fuses the same way.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_FUSEROTARY
#include "passes/Passes.h.inc"

namespace {

/// The tensor `slice` takes the window [begin, end) of along its last
/// dimension, whole along the others with unit steps; or null.
Value lastAxisWindow(Value value, int64_t begin, int64_t end) {
  auto slice = value.getDefiningOp<SliceOp>();
  if (!slice)
    return nullptr;
  auto type = llvm::dyn_cast<RankedTensorType>(slice.getInput().getType());
  if (!type)
    return nullptr;
  llvm::ArrayRef<int64_t> shape = type.getShape();
  llvm::ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits(),
                          steps = slice.getSteps();
  size_t rank = shape.size();
  if (rank == 0 || starts.size() != rank || limits.size() != rank || steps.size() != rank)
    return nullptr;
  for (size_t d = 0; d < rank; ++d) {
    bool last = d + 1 == rank;
    if (steps[d] != 1 || starts[d] != (last ? begin : 0) || limits[d] != (last ? end : shape[d]))
      return nullptr;
  }
  return slice.getInput();
}

/// x when `concat` is rotate_half(x): concat(-x[..., h:], x[..., :h]) along
/// the last dimension, of x's type.
Value rotatedHalves(ConcatOp concat) {
  auto type = llvm::dyn_cast<RankedTensorType>(concat.getType());
  if (!type || !llvm::isa<FloatType>(type.getElementType()) || type.getRank() == 0 ||
      concat.getInputs().size() != 2 || concat.getAxis() != type.getRank() - 1 ||
      type.getShape().back() % 2)
    return nullptr;
  int64_t n = type.getShape().back(), h = n / 2;
  auto neg = concat.getInputs()[0].getDefiningOp<NegOp>();
  if (!neg)
    return nullptr;
  Value x = lastAxisWindow(neg.getOperand(), h, n);
  if (!x || x.getType() != type || lastAxisWindow(concat.getInputs()[1], 0, h) != x)
    return nullptr;
  return x;
}

/// Whether `table` may be rotary's cos or sin for x of type `type`: of
/// x's element type, broadcasting to its shape with its last dimension,
/// and broadcast along at most two runs of x's batch dimensions (all but
/// the last two), which the kernels' rows (lines::AttentionRows) index:
/// [T, hd], [B, 1, T, hd] and [1, T, 1, hd] against [B, H, T, hd] are; a
/// table broadcast along a middle one of three batch dimensions is not.
bool isTable(Value table, RankedTensorType type) {
  auto tableType = table ? llvm::dyn_cast<RankedTensorType>(table.getType()) : nullptr;
  if (!tableType || tableType.getElementType() != type.getElementType() ||
      tableType.getRank() == 0 || tableType.getShape().back() != type.getShape().back() ||
      !broadcastsTo(tableType.getShape(), type.getShape()))
    return false;
  llvm::ArrayRef<int64_t> shape = type.getShape(), own = tableType.getShape();
  int64_t rank = shape.size(), offset = rank - static_cast<int64_t>(own.size());
  // Runs of batch dimensions the table has (true) or is broadcast along.
  llvm::SmallVector<bool> runs;
  for (int64_t d = 0; d + 2 < rank; ++d) {
    if (shape[d] == 1)
      continue;
    bool has = d >= offset && own[d - offset] != 1;
    if (runs.empty() || runs.back() != has)
      runs.push_back(has);
  }
  return runs.size() <= 2;
}

struct FuseRotaryPass : impl::FuseRotaryBase<FuseRotaryPass> {
  /// Replaces the rotations whose rotated halves are `concat`; returns how
  /// many.
  int fuse(ConcatOp concat) {
    Value x = rotatedHalves(concat);
    if (!x)
      return 0;
    auto type = llvm::cast<RankedTensorType>(x.getType());
    Value rotated = concat.getResult();
    int fused = 0;
    for (Operation *user : llvm::make_early_inc_range(rotated.getUsers())) {
      auto bySin = llvm::dyn_cast<MulOp>(user);
      Value sin = bySin ? otherOperand(bySin, rotated) : nullptr;
      if (!isTable(sin, type) || bySin.getType() != type)
        continue;
      for (Operation *reader : llvm::make_early_inc_range(bySin->getUsers())) {
        auto sum = llvm::dyn_cast<AddOp>(reader);
        Value term = sum ? otherOperand(sum, bySin.getResult()) : nullptr;
        auto byCos = term ? term.getDefiningOp<MulOp>() : nullptr;
        Value cos = byCos ? otherOperand(byCos, x) : nullptr;
        if (!isTable(cos, type) || byCos.getType() != type || sum.getType() != type)
          continue;
        OpBuilder b(sum);
        auto rotary = b.create<RotaryOp>(sum.getLoc(), x, cos, sin, /*transposed=*/false);
        sum.getResult().replaceAllUsesWith(rotary.getResult());
        sum.erase();
        ++fused;
      }
    }
    return fused;
  }

  void runOnOperation() override {
    fuseEach<ConcatOp>(getOperation(), [&](ConcatOp concat) { return fuse(concat); });
  }
};

} // namespace
} // namespace ppc
