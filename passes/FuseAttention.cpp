//===- FuseAttention.cpp - matmul, softmax, matmul into ppc.attention -----===//
//
// Finds scaled dot-product attention in an imported @forward, in the forms
// exports write it:
//
//   s = q @ k^T                          (a matmul; k^T a transpose or not)
//   s = s * c | s / c                    (scalar constants, any number, anywhere)
//   s = s + mask                         (an additive mask or ALiBi bias)
//   s = where(keep, s, fill) | where(hide, fill, s)   (masked_fill, a scalar fill)
//   s = max(s, lowest)                   (OPT's clamp), batch reshapes (BLOOM)
//   o = softmax(s, last axis) @ v
//
// and replaces it by one `ppc.attention` (q, k, v, bias, scale, causal),
// which never materialises the scores. The scale is the product of the
// scalar factors; the additive terms, each scaled by the factors after it,
// sum into one bias (a masked_fill's becomes where(keep, 0, fill)). A bias
// that folds to a constant equal to the causal mask (0 on and below the
// diagonal, -inf or below -1e30 above) becomes `causal`; a bias of zeros
// goes away. Anything a parameter reaches cannot be a bias (the fused op
// does not differentiate it), and every intermediate must have no other
// user (a model that returns its attention probabilities keeps them).
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"

namespace {

/// Whether `op` is a reshape of the batch dimensions alone (BLOOM's
/// [B*H, T, S] <-> [B, H, T, S] views): the last two dimensions kept.
bool isBatchReshape(Operation *op) {
  auto reshape = llvm::dyn_cast_or_null<ReshapeOp>(op);
  if (!reshape)
    return false;
  auto in = reshape.getInput().getType().getShape(), out = reshape.getType().getShape();
  return in.size() >= 3 && out.size() >= 3 && in.take_back(2) == out.take_back(2);
}

/// One step between the score matmul and the softmax.
struct Step {
  enum Kind { Scale, Add, MaskKeep, MaskHide, Identity } kind;
  Operation *op;
  double factor = 1; // Scale: what the scores are multiplied by
  Value operand;     // Scale: the constant; Add: the mask; Mask*: the condition
  Value fill;        // Mask*: the scalar fill
};

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  using FuseAttentionBase::FuseAttentionBase;

  /// Whether a parameter reaches `value` (then it cannot be a bias).
  bool reachedByParameter(Value value) {
    llvm::SetVector<Value> seen;
    llvm::SmallVector<Value> work{value};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (!seen.insert(v))
        continue;
      if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
        auto func = llvm::dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
        if (!func || func.getArgAttr(arg.getArgNumber(), PpcDialect::kParamAttrName))
          return true;
        continue;
      }
      for (Value operand : v.getDefiningOp()->getOperands())
        work.push_back(operand);
    }
    return false;
  }

  /// The steps from the score matmul up to `scores` (the softmax's input),
  /// in program order, and the matmul; none when `scores` is not such a
  /// chain.
  MatMulOp matchScores(Value scores, llvm::SmallVectorImpl<Step> &steps) {
    Value at = scores;
    while (true) {
      if (!at.hasOneUse())
        return nullptr;
      Operation *op = at.getDefiningOp();
      if (!op)
        return nullptr;
      if (auto matmul = llvm::dyn_cast<MatMulOp>(op)) {
        std::reverse(steps.begin(), steps.end());
        return matmul;
      }
      auto sameShape = [&](Value v) { return v.getType() == at.getType(); };
      Step step{Step::Identity, op};
      Value next;
      if (auto cast = llvm::dyn_cast<CastOp>(op)) {
        if (cast.getInput().getType() != cast.getType())
          return nullptr;
        next = cast.getInput();
      } else if (isBatchReshape(op)) {
        next = op->getOperand(0);
      } else if (llvm::isa<MaxOp>(op)) {
        // OPT's clamp, max(s, lowest): the same scores wherever a key is
        // visible (a row every key of which is hidden differs: see
        // docs/architecture.md, "Fused attention").
        for (unsigned i = 0; i < 2 && !next; ++i)
          if (sameShape(op->getOperand(i)) &&
              floatScalarConstant(op->getOperand(1 - i)).value_or(0) <= -1e30)
            next = op->getOperand(i);
      } else if (llvm::isa<MulOp, DivOp>(op)) {
        for (unsigned i = 0; i < 2 && !next; ++i) {
          std::optional<double> c = floatScalarConstant(op->getOperand(1 - i));
          if (!c || !sameShape(op->getOperand(i)) || (llvm::isa<DivOp>(op) && i == 1))
            continue;
          step.kind = Step::Scale;
          step.factor = llvm::isa<DivOp>(op) ? 1 / *c : *c;
          step.operand = op->getOperand(1 - i);
          next = op->getOperand(i);
        }
      } else if (llvm::isa<AddOp>(op)) {
        for (unsigned i = 0; i < 2 && !next; ++i) {
          Value other = op->getOperand(1 - i);
          if (!sameShape(op->getOperand(i)) || reachedByParameter(other))
            continue;
          step.kind = Step::Add;
          step.operand = other;
          next = op->getOperand(i);
        }
      } else if (auto where = llvm::dyn_cast<WhereOp>(op)) {
        if (reachedByParameter(where.getCondition()))
          return nullptr;
        for (unsigned i = 1; i < 3 && !next; ++i) {
          Value other = op->getOperand(3 - i);
          if (!sameShape(op->getOperand(i)) || !floatScalarConstant(other))
            continue;
          step.kind = i == 1 ? Step::MaskKeep : Step::MaskHide;
          step.operand = where.getCondition();
          step.fill = other;
          next = op->getOperand(i);
        }
      }
      if (!next)
        return nullptr;
      steps.push_back(step);
      at = next;
    }
  }

  /// Whether `bias` is the causal mask: 0 where key j <= query i and
  /// hidden (-inf, or below -1e30 as a dtype's lowest value is) above.
  /// Every layer of a model sees the same T x T constant (attributes are
  /// uniqued), so each constant is read once: 80 layers of a 4096-token
  /// mask read element by element as APFloat took most of a LLaMA-70B
  /// import.
  bool isCausal(DenseElementsAttr bias, RankedTensorType scores) {
    auto shape = bias.getType().getShape();
    int64_t rank = scores.getRank();
    if (shape.size() < 2 || shape[shape.size() - 2] != scores.getDimSize(rank - 2) ||
        shape.back() != scores.getDimSize(rank - 1))
      return false;
    auto [it, inserted] = causalConstants.try_emplace(bias, false);
    if (inserted)
      it->second = readsAsCausal(bias);
    return it->second;
  }

  static bool readsAsCausal(DenseElementsAttr bias) {
    auto shape = bias.getType().getShape();
    int64_t rows = shape[shape.size() - 2], cols = shape.back();
    auto causalAt = [&](int64_t index, double x) {
      int64_t i = index / cols % rows, j = index % cols;
      return j <= i ? x == 0 : x <= -1e30;
    };
    // A splat has keys after a query (hidden) and keys at or before it
    // (zero) unless there is one key.
    if (bias.isSplat())
      return cols == 1 && causalAt(0, bias.getSplatValue<APFloat>().convertToDouble());
    int64_t index = 0;
    if (bias.getElementType().isF32()) {
      for (float value : bias.getValues<float>())
        if (!causalAt(index++, value))
          return false;
      return true;
    }
    for (APFloat value : bias.getValues<APFloat>())
      if (!causalAt(index++, value.convertToDouble()))
        return false;
    return true;
  }

  llvm::DenseMap<Attribute, bool> causalConstants;

  /// Whether `cond` is tril(true) (keep) or its negation (hide): the
  /// masked_fill of nanoGPT-style models, when its T x T constant was too
  /// large to fold.
  static bool isLowerTriangle(Value cond, bool negated) {
    if (negated) {
      auto notOp = cond.getDefiningOp<NotOp>();
      return notOp && isLowerTriangle(notOp.getInput(), false);
    }
    auto trilu = cond.getDefiningOp<TriluOp>();
    DenseElementsAttr ones;
    return trilu && !trilu.getUpper() && trilu.getK() == 0 &&
           matchPattern(trilu.getInput(), m_Constant(&ones)) && ones.isSplat() &&
           ones.getSplatValue<bool>();
  }

  /// `value` [..., X, Y] with its batch dimensions as `batch`: broadcast
  /// (OpT = ExpandOp) or viewed (ReshapeOp).
  template <typename OpT>
  static Value withBatch(OpBuilder &b, Location loc, Value value, llvm::ArrayRef<int64_t> batch) {
    auto type = llvm::cast<RankedTensorType>(value.getType());
    if (type.getShape().drop_back(2) == batch)
      return value;
    llvm::SmallVector<int64_t> shape(batch);
    shape.append(type.getShape().take_back(2).begin(), type.getShape().take_back(2).end());
    return b.create<OpT>(loc, type.clone(shape), value);
  }

  /// Whether a term broadcast to `space` (a chain value's type) can be
  /// viewed over the softmax's `batch`: its batch dimensions (padded with
  /// 1s) are all 1, or all of `space`'s.
  static bool viewable(Value term, Type space, llvm::ArrayRef<int64_t> batch) {
    auto spaceType = llvm::cast<RankedTensorType>(space);
    auto spaceBatch = spaceType.getShape().drop_back(2);
    if (spaceBatch == batch)
      return true;
    auto shape = llvm::cast<RankedTensorType>(term.getType()).getShape();
    llvm::SmallVector<int64_t> padded(spaceType.getRank() - shape.size(), 1);
    padded.append(shape.begin(), shape.end());
    auto termBatch = llvm::ArrayRef(padded).drop_back(2);
    return termBatch == spaceBatch || llvm::all_of(termBatch, [](int64_t d) { return d == 1; });
  }

  /// `term` (viewable) over the softmax's batch dimensions.
  static Value toScores(OpBuilder &b, Location loc, Value term, Type space,
                        llvm::ArrayRef<int64_t> batch) {
    auto spaceType = llvm::cast<RankedTensorType>(space);
    if (spaceType.getShape().drop_back(2) == batch)
      return term;
    auto type = llvm::cast<RankedTensorType>(term.getType());
    auto shape = type.getShape();
    llvm::SmallVector<int64_t> last(shape.take_back(std::min<size_t>(2, shape.size())));
    while (last.size() < 2)
      last.insert(last.begin(), 1);
    bool ones = type.getNumElements() == last[0] * last[1];
    llvm::SmallVector<int64_t> viewed(ones ? llvm::SmallVector<int64_t>(batch.size(), 1)
                                           : llvm::SmallVector<int64_t>(batch));
    viewed.append(last);
    return b.create<ReshapeOp>(loc, type.clone(viewed), term);
  }

  LogicalResult fuse(SoftmaxOp softmax) {
    auto scoresType = softmax.getType();
    int64_t rank = scoresType.getRank();
    if (rank < 3 || static_cast<int64_t>(softmax.getAxis()) != rank - 1)
      return failure();
    // softmax -> (identity casts) -> matmul(probabilities, v).
    Value probabilities = softmax.getResult();
    while (probabilities.hasOneUse()) {
      Operation *user = *probabilities.getUsers().begin();
      auto cast = llvm::dyn_cast<CastOp>(user);
      if (!(cast && cast.getType() == cast.getInput().getType()) && !isBatchReshape(user))
        break;
      probabilities = user->getResult(0);
    }
    if (!probabilities.hasOneUse())
      return failure();
    auto output = llvm::dyn_cast<MatMulOp>(*probabilities.getUsers().begin());
    if (!output || output.getLhs() != probabilities)
      return failure();
    Value v = output.getRhs();
    auto outputBatch = output.getType().getShape().drop_back(2);
    auto vType = llvm::cast<RankedTensorType>(v.getType());
    if (vType.getRank() != output.getType().getRank() ||
        !broadcastsTo(vType.getShape().drop_back(2), outputBatch))
      return failure();

    llvm::SmallVector<Step> steps;
    MatMulOp scores = matchScores(softmax.getInput(), steps);
    if (!scores)
      return failure();
    Value q = scores.getLhs(), kT = scores.getRhs();
    auto qType = llvm::cast<RankedTensorType>(q.getType());
    auto kTType = llvm::cast<RankedTensorType>(kT.getType());
    auto scoresBatch = scores.getType().getShape().drop_back(2);
    if (qType.getRank() != scores.getType().getRank() || kTType.getRank() != qType.getRank() ||
        qType.getShape().drop_back(2) != scoresBatch ||
        !broadcastsTo(kTType.getShape().drop_back(2), scoresBatch))
      return failure();
    // The attention runs over the most detailed batch dimensions of the
    // chain (heads apart from the batch: [B, H] rather than BLOOM's and
    // OPT's [B*H]); q, k, v and the masks of the others are viewed so.
    llvm::SmallVector<int64_t> batch(scoresType.getShape().drop_back(2));
    for (const Step &step : steps) {
      auto type = llvm::cast<RankedTensorType>(step.op->getResult(0).getType());
      if (type.getRank() - 2 > static_cast<int64_t>(batch.size()))
        batch.assign(type.getShape().begin(), type.getShape().end() - 2);
    }
    // Every term must be viewable over them.
    for (const Step &step : steps)
      if (step.operand && step.kind != Step::Scale &&
          !viewable(step.operand, step.op->getResult(0).getType(), batch))
        return failure();

    OpBuilder b(output);
    Location loc = output.getLoc();
    // k [..., S, D]: k^T transposed back, composed with the transpose that
    // made k^T (the input itself when that swapped the last two dimensions).
    int64_t kRank = kTType.getRank();
    llvm::SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, kRank));
    std::swap(swap[kRank - 1], swap[kRank - 2]);
    Value k = kT;
    llvm::SmallVector<int64_t> perm = swap;
    if (auto transpose = kT.getDefiningOp<TransposeOp>()) {
      k = transpose.getInput();
      for (int64_t d = 0; d < kRank; ++d)
        perm[d] = transpose.getPerm()[swap[d]];
    }
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, qType.getRank())))
      k = b.create<TransposeOp>(loc, k, b.getDenseI64ArrayAttr(perm));
    // Multi-query heads a matmul broadcasts (Falcon) are expanded: the op
    // takes one k and v per query head.
    k = withBatch<ExpandOp>(b, loc, k, scoresBatch);
    v = withBatch<ExpandOp>(b, loc, v, outputBatch);
    q = withBatch<ReshapeOp>(b, loc, q, batch);
    k = withBatch<ReshapeOp>(b, loc, k, batch);
    v = withBatch<ReshapeOp>(b, loc, v, batch);

    // The scale and the bias, in program order: each term is scaled by the
    // factors after it, as the unfused program scales it.
    double scale = 1;
    Value bias;
    bool causal = false;
    // (ppc.attention's causal hides key j from query i for j > i: every
    // query sees a key only while there are no more queries than keys.)
    int64_t queries = scoresType.getDimSize(rank - 2), keys = scoresType.getDimSize(rank - 1);
    Type element = scoresType.getElementType();
    auto zero = [&]() -> Value {
      auto type = RankedTensorType::get({}, element);
      return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getFloatAttr(element, 0.0)));
    };
    auto addTerm = [&](Value term) { bias = bias ? b.create<AddOp>(loc, bias, term) : term; };
    for (const Step &step : steps) {
      switch (step.kind) {
      case Step::Identity:
        break;
      case Step::Scale:
        scale *= step.factor;
        if (bias)
          bias = llvm::isa<DivOp>(step.op) ? b.create<DivOp>(loc, bias, step.operand).getResult()
                                           : b.create<MulOp>(loc, bias, step.operand).getResult();
        break;
      case Step::Add:
        addTerm(toScores(b, loc, step.operand, step.op->getResult(0).getType(), batch));
        break;
      case Step::MaskKeep:
      case Step::MaskHide: {
        bool keep = step.kind == Step::MaskKeep;
        // masked_fill(~tril) with -inf or the lowest value, before any
        // other term: the causal mask itself.
        if (!bias && !causal && queries <= keys &&
            isLowerTriangle(step.operand, /*negated=*/!keep) &&
            floatScalarConstant(step.fill).value_or(0) <= -1e30) {
          causal = true;
          break;
        }
        Value cond = toScores(b, loc, step.operand, step.op->getResult(0).getType(), batch);
        addTerm(keep ? b.create<WhereOp>(loc, cond, zero(), step.fill).getResult()
                     : b.create<WhereOp>(loc, cond, step.fill, zero()).getResult());
        break;
      }
      }
    }
    // A bias computed from constants alone folds (as ppc-fold-constants
    // would) and may then be the causal mask, or zeros.
    if (bias)
      bias = foldBias(bias);
    DenseElementsAttr value;
    if (bias && matchPattern(bias, m_Constant(&value))) {
      if (!causal && queries <= keys && isCausal(value, scoresType)) {
        causal = true;
        bias = nullptr;
      } else if (value.isSplat() ? value.getSplatValue<APFloat>().isZero()
                                 : llvm::all_of(value.getValues<APFloat>(),
                                                [](const APFloat &x) { return x.isZero(); })) {
        bias = nullptr;
      }
    }
    llvm::SmallVector<int64_t> lseShape(batch);
    lseShape.push_back(queries);
    auto lseType = RankedTensorType::get(lseShape, element.isF64() ? element : b.getF32Type());
    llvm::SmallVector<int64_t> outputShape(batch);
    outputShape.append({queries, output.getType().getShape().back()});
    auto attention = b.create<AttentionOp>(
        loc, TypeRange{RankedTensorType::get(outputShape, element), lseType}, q, k, v, bias,
        b.getF64FloatAttr(scale), causal ? b.getUnitAttr() : UnitAttr());
    Value result = attention.getOutput();
    if (result.getType() != output.getType())
      result = b.create<ReshapeOp>(loc, output.getType(), result);
    output.getResult().replaceAllUsesWith(result);
    output.erase();
    return success();
  }

  /// Folds the ops that compute `bias` whose operands are all constants
  /// (in program order); returns the bias, a constant if it all folded.
  Value foldBias(Value bias) {
    llvm::SetVector<Operation *> ops;
    llvm::SmallVector<Value> work{bias};
    while (!work.empty()) {
      Operation *op = work.pop_back_val().getDefiningOp();
      if (!op || llvm::isa<ConstantOp>(op) || !ops.insert(op))
        continue;
      for (Value operand : op->getOperands())
        work.push_back(operand);
    }
    llvm::SmallVector<Operation *> ordered = ops.takeVector();
    llvm::sort(ordered, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
    for (Operation *op : ordered) {
      bool isBias = op->getResult(0) == bias;
      OpBuilder folder(op);
      llvm::SmallVector<Value> replacements;
      FailureOr<bool> folded = foldWithExecutor(op, folder, &replacements, maxFoldElements);
      if (succeeded(folded) && *folded && isBias)
        bias = replacements[0];
    }
    return bias;
  }

  void runOnOperation() override {
    llvm::SmallVector<SoftmaxOp> softmaxes;
    getOperation().walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
    bool fused = false;
    for (SoftmaxOp softmax : softmaxes)
      fused |= succeeded(fuse(softmax));
    if (!fused)
      return;
    // What only the replaced ops read (the scores, the masks, k's
    // transposes, constants the folding left): pure and unread, users
    // before their operands.
    eraseUnreadPpcOps(getOperation());
  }
};

} // namespace
} // namespace ppc
