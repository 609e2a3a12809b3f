//===- StridedViews.cpp - attention operands read and written in place ----===//

#include "codegen/StridedViews.h"
#include "codegen/EmitContext.h"
#include "codegen/Fusion.h"
#include "executor/Tensor.h"
#include "ir/PpcOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc::codegen {

namespace {

StridedView denseView(Value value) {
  Shape strides = stridesOf(shapeOf(value));
  return {value, 0, llvm::SmallVector<int64_t>(strides.begin(), strides.end())};
}

/// `view` (of a tensor of shape `from`) read as shape `to`, where its
/// strides allow: each run of dimensions merged or split must be one
/// stride apart as a dense tensor's are.
std::optional<StridedView> reshaped(const StridedView &view, ArrayRef<int64_t> from,
                                    ArrayRef<int64_t> to) {
  if (llvm::is_contained(from, 0) || llvm::is_contained(to, 0))
    return std::nullopt;
  StridedView result{view.stored, view.offset, llvm::SmallVector<int64_t>(to.size(), 0)};
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    // The next runs [i0, i) and [j0, j) with equal products.
    size_t i0 = i, j0 = j;
    int64_t in = 1, out = 1;
    if (i < from.size())
      in *= from[i++];
    if (j < to.size())
      out *= to[j++];
    while (in != out) {
      if (in < out && i < from.size())
        in *= from[i++];
      else if (out < in && j < to.size())
        out *= to[j++];
      else
        return std::nullopt;
    }
    // The run of `from` must be dense in itself (size-1 dimensions aside).
    int64_t inner = 1; // the stride of the run's last dimension
    bool seen = false;
    for (size_t d = i; d-- > i0;) {
      if (from[d] == 1)
        continue;
      if (!seen) {
        inner = view.strides[d];
        seen = true;
        continue;
      }
      // d's stride must be the next non-1 dimension's times its size.
      size_t next = d + 1;
      while (from[next] == 1)
        ++next;
      if (view.strides[d] != view.strides[next] * from[next])
        return std::nullopt;
    }
    int64_t stride = inner;
    for (size_t d = j; d-- > j0;) {
      result.strides[d] = stride;
      stride *= to[d];
    }
  }
  return result;
}

/// Whether `transpose` keeps the last dimension last (the rows' elements
/// stay one apart).
bool keepsLastDimension(TransposeOp transpose) {
  ArrayRef<int64_t> perm = transpose.getPerm();
  return !perm.empty() && perm.back() == int64_t(perm.size()) - 1;
}

/// The view of `op`'s result given its operand's view, for the ops that
/// can be views: reshapes, transposes that keep the last dimension last,
/// slices with positive steps and steps of 1 along the last dimension.
std::optional<StridedView> viewThrough(Operation *op, const StridedView &operand) {
  if (auto reshape = llvm::dyn_cast<ReshapeOp>(op))
    return reshaped(operand, shapeOf(reshape.getInput()), shapeOf(reshape.getResult()));
  if (auto transpose = llvm::dyn_cast<TransposeOp>(op)) {
    if (!keepsLastDimension(transpose))
      return std::nullopt;
    StridedView result{operand.stored, operand.offset, {}};
    for (int64_t p : transpose.getPerm())
      result.strides.push_back(operand.strides[p]);
    return result;
  }
  if (auto slice = llvm::dyn_cast<SliceOp>(op)) {
    ArrayRef<int64_t> starts = slice.getStarts(), steps = slice.getSteps();
    if (steps.empty() || steps.back() != 1 || llvm::any_of(steps, [](int64_t s) { return s < 1; }))
      return std::nullopt;
    StridedView result = operand;
    for (size_t d = 0; d < starts.size(); ++d) {
      result.offset += starts[d] * operand.strides[d];
      result.strides[d] *= steps[d];
    }
    return result;
  }
  return std::nullopt;
}

/// The view of `op`'s operand `operand` given its result's view: the
/// writing direction, for reshapes, transposes keeping the last dimension
/// last and concats.
std::optional<StridedView> viewBefore(Operation *op, Value operand, const StridedView &result) {
  if (auto reshape = llvm::dyn_cast<ReshapeOp>(op))
    return reshaped(result, shapeOf(reshape.getResult()), shapeOf(reshape.getInput()));
  if (auto transpose = llvm::dyn_cast<TransposeOp>(op)) {
    if (!keepsLastDimension(transpose))
      return std::nullopt;
    StridedView view{result.stored, result.offset, result.strides};
    for (auto [d, p] : llvm::enumerate(transpose.getPerm()))
      view.strides[p] = result.strides[d];
    return view;
  }
  if (auto concat = llvm::dyn_cast<ConcatOp>(op)) {
    int64_t axis = concat.getAxis(), start = 0;
    for (Value input : concat.getInputs()) {
      if (input == operand) {
        StridedView view = result;
        view.offset += start * result.strides[axis];
        return view;
      }
      start += shapeOf(input)[axis];
    }
  }
  return std::nullopt;
}

/// Whether `use` is an operand the attention kernels read by rows (q, k,
/// v; the gradient's o and dO; not the bias or lse), or a rotary's input.
bool readByRows(OpOperand &use) {
  unsigned index = use.getOperandNumber();
  if (llvm::isa<RotaryOp>(use.getOwner()))
    return index == 0;
  if (llvm::isa<AttentionOp>(use.getOwner()))
    return index < 3;
  if (llvm::isa<AttentionGradOp>(use.getOwner()))
    return index < 4 || index == 5;
  return false;
}

/// The results the attention and rotary kernels write by rows.
llvm::SmallVector<Value> writtenByRows(Operation *op) {
  if (auto rotary = llvm::dyn_cast<RotaryOp>(op))
    return {rotary.getResult()};
  if (auto attention = llvm::dyn_cast<AttentionOp>(op))
    return {attention.getOutput()};
  if (llvm::isa<AttentionGradOp>(op))
    return llvm::SmallVector<Value>(op->getResults().begin(), op->getResults().end());
  return {};
}

class Planner {
public:
  Planner(func::FuncOp program, const FusionPlan &fusion) : program(program), fusion(fusion) {}

  StridedViews run() {
    planWrites();
    planReads();
    return std::move(result);
  }

private:
  /// Whether `op` may be a view at all: one of the ops above, in no kernel
  /// of the fusion plan.
  bool mayBeView(Operation *op) const {
    if (!llvm::isa<ReshapeOp, TransposeOp, SliceOp, ConcatOp>(op) || op->getNumResults() != 1)
      return false;
    return !fusion.groupOf.count(op) && !fusion.foldedInto.count(op) &&
           !fusion.unstored(op->getResult(0));
  }

  /// Where `value` lies: its view, or its own dense buffer.
  StridedView viewOf(Value value) const {
    auto it = result.views.find(value);
    return it != result.views.end() ? it->second : denseView(value);
  }

  /// Whether every use of `value` (held as `view`), through ops that can
  /// be views, is an operand read by rows with rows' strides: an attention
  /// kernel's, or a concat's (one that runs: not itself written in place).
  bool onlyReadByRows(Value value, const StridedView &view) const {
    if (value.use_empty())
      return false;
    for (OpOperand &use : value.getUses()) {
      if (readByRows(use)) {
        if (!attentionRows(shapeOf(value), view))
          return false;
        continue;
      }
      Operation *user = use.getOwner();
      if (auto concat = llvm::dyn_cast<ConcatOp>(user);
          concat && !result.inPlace.count(concat) && !fusion.foldedInto.count(concat)) {
        if (!concatRows(shapeOf(value), view, concat.getAxis()))
          return false;
        continue;
      }
      if (llvm::isa<ConcatOp>(user) || !mayBeView(user))
        return false;
      std::optional<StridedView> next = viewThrough(user, view);
      if (!next || !onlyReadByRows(user->getResult(0), *next))
        return false;
    }
    return true;
  }

  /// The reading direction: slices and transposes (and the reshapes
  /// between them) that only attention kernels read become views.
  void planReads() {
    for (Operation &op : program.getBody().front()) {
      if (!mayBeView(&op) || llvm::isa<ConcatOp>(op) || result.inPlace.count(&op))
        continue;
      Value input = op.getOperand(0), value = op.getResult(0);
      // A reshape of a value no view holds is an alias of it already.
      if (llvm::isa<ReshapeOp>(op) && !result.views.count(input))
        continue;
      std::optional<StridedView> view = viewThrough(&op, viewOf(input));
      if (!view || fusion.unstored(view->stored) || !onlyReadByRows(value, *view))
        continue;
      result.views[value] = *view;
      result.inPlace.insert(&op);
    }
  }

  /// One written value's way to the buffer it is written into: the ops
  /// after it, each the only use of the one before other than reads by
  /// rows.
  struct Chain {
    Value written;
    llvm::SmallVector<Operation *> ops;
  };

  /// The ops `written` goes through (see Chain), up to and including a
  /// concat.
  Chain chainFrom(Value written) const {
    Chain chain{written, {}};
    Value current = written;
    while (true) {
      Operation *next = nullptr;
      for (OpOperand &use : current.getUses()) {
        if (readByRows(use))
          continue;
        if (next)
          return chain; // two other uses
        next = use.getOwner();
      }
      if (!next || !mayBeView(next) || llvm::isa<SliceOp>(next))
        return chain;
      if (auto transpose = llvm::dyn_cast<TransposeOp>(next);
          transpose && !keepsLastDimension(transpose))
        return chain;
      chain.ops.push_back(next);
      if (llvm::isa<ConcatOp>(next))
        return chain;
      current = next->getResult(0);
    }
  }

  /// The views of a chain's values, written into the buffer of its last
  /// value, or nothing where a stride is not a row's.
  std::optional<llvm::SmallVector<StridedView>> chainViews(const Chain &chain) const {
    Value last = chain.ops.back()->getResult(0);
    llvm::SmallVector<StridedView> views(chain.ops.size() + 1);
    views.back() = denseView(last);
    for (size_t k = chain.ops.size(); k-- > 0;) {
      Value operand = k == 0 ? chain.written : chain.ops[k - 1]->getResult(0);
      std::optional<StridedView> view = viewBefore(chain.ops[k], operand, views[k + 1]);
      if (!view)
        return std::nullopt;
      // The writer's rows, and those of the value's reads by rows.
      bool byRows = k == 0 || llvm::any_of(operand.getUses(), readByRows);
      if (byRows && !attentionRows(shapeOf(operand), *view))
        return std::nullopt;
      views[k] = *view;
    }
    return views;
  }

  /// The writing direction (see the header): chains that move data (a
  /// transpose or a concat in them), concats only where every operand is
  /// a chain's.
  void planWrites() {
    std::vector<Chain> chains;
    for (Operation &op : program.getBody().front())
      for (Value written : writtenByRows(&op))
        chains.push_back(chainFrom(written));
    auto movesData = [](const Chain &chain) {
      return llvm::any_of(chain.ops, [](Operation *op) { return !llvm::isa<ReshapeOp>(op); });
    };
    // A concat stays in a chain only where every operand comes by one.
    bool changed = true;
    while (changed) {
      changed = false;
      llvm::DenseMap<Operation *, unsigned> arriving;
      for (const Chain &chain : chains)
        if (!chain.ops.empty() && llvm::isa<ConcatOp>(chain.ops.back()))
          ++arriving[chain.ops.back()];
      for (Chain &chain : chains) {
        if (chain.ops.empty() || !llvm::isa<ConcatOp>(chain.ops.back()))
          continue;
        Operation *concat = chain.ops.back();
        // Each operand once (a value concatenated twice is read, not written).
        llvm::DenseSet<Value> operands(concat->getOperands().begin(), concat->getOperands().end());
        bool whole =
            arriving[concat] == concat->getNumOperands() && operands.size() == arriving[concat];
        if (!whole || !chainViews(chain)) {
          chain.ops.pop_back();
          changed = true;
        }
      }
    }
    for (Chain &chain : chains) {
      if (chain.ops.empty() || !movesData(chain))
        continue;
      std::optional<llvm::SmallVector<StridedView>> views = chainViews(chain);
      if (!views)
        continue;
      for (size_t k = 0; k < chain.ops.size(); ++k) {
        Value value = k == 0 ? chain.written : chain.ops[k - 1]->getResult(0);
        result.views[value] = (*views)[k];
        result.inPlace.insert(chain.ops[k]);
      }
    }
  }

  func::FuncOp program;
  const FusionPlan &fusion;
  StridedViews result;
};

} // namespace

StridedViews planStridedViews(func::FuncOp program, const FusionPlan &fusion) {
  return Planner(program, fusion).run();
}

std::optional<BatchStrides> collapseBatch(ArrayRef<int64_t> sizes, ArrayRef<int64_t> strides) {
  // Runs (size, stride) of dimensions one stride apart, size-1 ones left
  // out; a run of stride 0 is broadcast.
  llvm::SmallVector<std::pair<int64_t, int64_t>> runs;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1)
      continue;
    if (!runs.empty() && runs.back().second == strides[d] * sizes[d] && strides[d] != 0)
      runs.back() = {runs.back().first * sizes[d], strides[d]};
    else if (!runs.empty() && runs.back().second == 0 && strides[d] == 0)
      runs.back().first *= sizes[d];
    else
      runs.push_back({sizes[d], strides[d]});
  }
  if (runs.size() > 2)
    return std::nullopt;
  BatchStrides batch;
  if (runs.size() == 2) {
    batch.inner = runs[1].first;
    batch.outerStride = runs[0].second;
    batch.innerStride = runs[1].second;
  } else if (runs.size() == 1) {
    batch.inner = runs[0].first;
    batch.innerStride = runs[0].second;
  }
  return batch;
}

std::optional<int64_t> concatRows(ArrayRef<int64_t> shape, const StridedView &view, int64_t axis) {
  // From the axis on, dense: a piece of the operand is one run.
  int64_t rank = shape.size(), dense = 1;
  for (int64_t d = rank - 1; d >= axis; --d) {
    if (shape[d] != 1 && view.strides[d] != dense)
      return std::nullopt;
    dense *= shape[d];
  }
  // Before it, the pieces one pitch apart.
  std::optional<int64_t> pitch;
  int64_t next = 0; // the stride the next dimension out must have
  for (int64_t d = axis - 1; d >= 0; --d) {
    if (shape[d] == 1)
      continue;
    if (pitch && view.strides[d] != next)
      return std::nullopt;
    if (!pitch)
      pitch = view.strides[d];
    next = view.strides[d] * shape[d];
  }
  return pitch.value_or(dense);
}

std::optional<std::string> attentionRows(ArrayRef<int64_t> shape, const StridedView &view) {
  int64_t rank = shape.size();
  if (rank < 2 || (shape.back() != 1 && view.strides.back() != 1))
    return std::nullopt;
  std::optional<BatchStrides> batch =
      collapseBatch(shape.drop_back(2), ArrayRef<int64_t>(view.strides).drop_back(2));
  if (!batch)
    return std::nullopt;
  return llvm::formatv("ppcrt::lines::AttentionRows{{{0}, {1}, {2}, {3}}", batch->inner,
                       batch->outerStride, batch->innerStride, view.strides[rank - 2])
      .str();
}

} // namespace ppc::codegen
