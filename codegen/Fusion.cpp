//===- Fusion.cpp - elementwise fusion groups -----------------------------===//

#include "codegen/Fusion.h"
#include "ir/PpcOps.h"
#include "passes/Provenance.h"
#include "runtime/ppcrt/NormSums.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>
#include <set>

using namespace mlir;

namespace ppc::codegen {

bool isElementwise(Operation *op) { return llvm::isa<ElementwiseOpInterface>(op); }

const GemmEpilogue *FusionPlan::epilogue(Operation *op) const {
  auto it = epilogueOf.find(op);
  return it == epilogueOf.end() ? nullptr : &epilogues[it->second];
}

const GroupBatch *FusionPlan::batch(unsigned g) const {
  auto it = batchOf.find(g);
  return it == batchOf.end() ? nullptr : &batches[it->second];
}

Value FusionPlan::normGradAddend(Operation *grad) const {
  auto it = normGradAdd.find(grad);
  if (it == normGradAdd.end())
    return Value();
  Operation *add = it->second;
  return add->getOperand(0) == grad->getResult(0) ? add->getOperand(1) : add->getOperand(0);
}

Operation *FusionPlan::runsAt(Operation *op) const {
  if (auto folded = foldedInto.find(op); folded != foldedInto.end())
    return runsAt(folded->second);
  if (auto place = rowLogSumExpPlace.find(op); place != rowLogSumExpPlace.end())
    return place->second;
  if (auto sum = sumsOf.find(op); sum != sumsOf.end())
    return sum->second;
  if (auto grad = normGradOfAdd.find(op); grad != normGradOfAdd.end())
    return grad->second;
  if (auto grad = normGradOfSum.find(op); grad != normGradOfSum.end())
    return grad->second;
  if (const GemmEpilogue *e = epilogue(op))
    return e->adds.back();
  auto it = groupOf.find(op);
  if (it == groupOf.end())
    return op;
  if (const GroupBatch *b = batch(it->second))
    return place(*b);
  return groups[it->second].ops.back();
}

Operation *FusionPlan::place(const GroupBatch &b) const {
  return groups[b.early ? b.groups.front() : b.groups.back()].ops.back();
}

bool FusionPlan::unstored(Value value) const {
  Operation *def = value.getDefiningOp();
  if (!def)
    return false;
  if (inlinedConstants.contains(def) || foldedInto.contains(def))
    return true;
  if (normGradOfSum.contains(def))
    return !llvm::isa<ReduceSumOp>(def); // a chain's value; its reduction's is written
  if (normGradAdd.contains(def))
    return value == def->getResult(0);
  if (const GemmEpilogue *e = epilogue(def))
    return value != e->result();
  auto it = groupOf.find(def);
  return it != groupOf.end() && !llvm::is_contained(groups[it->second].outputs, value);
}

static ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

RowSource rowSourceOf(const FusionPlan &plan, Value operand) {
  RowSource source{operand, 0, shapeOf(operand).empty() ? 1 : shapeOf(operand).back()};
  while (Operation *def = source.value.getDefiningOp()) {
    if (!plan.foldedInto.contains(def))
      break;
    if (auto slice = llvm::dyn_cast<SliceOp>(def)) {
      source.offset += slice.getStarts().back();
      source.rowStride = shapeOf(slice.getInput()).back();
    }
    if (auto sub = llvm::dyn_cast<SubOp>(def))
      source.shift = sub.getRhs();
    source.value = def->getOperand(0);
  }
  return source;
}

/// Whether `slice` keeps whole rows of its input and a window of each:
/// every dimension but the last whole, the last's elements consecutive.
static bool isRowWindow(SliceOp slice) {
  ArrayRef<int64_t> in = shapeOf(slice.getInput());
  ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits(),
                    steps = slice.getSteps();
  if (in.empty() || steps.back() != 1)
    return false;
  for (size_t d = 0; d + 1 < in.size(); ++d)
    if (starts[d] != 0 || limits[d] != in[d] || steps[d] != 1)
      return false;
  return true;
}

/// The ops folded into a kernel that reads rows of the last dimension
/// (FusionPlan::foldedInto): for an nll_loss of [batch, classes], a reshape
/// that keeps the last dimension, then a difference x - shift with one
/// shift per row (ppc-split-log-softmax's x - log_sum_exp(x)); for it and
/// for a softmax, log-softmax or log_sum_exp over the last dimension, a
/// widening cast from bf16 or f16, then a row window. Each read by the next
/// alone.
static void foldIntoRowReaders(Block &body, FusionPlan &plan) {
  for (Operation &op : body) {
    Value in;
    if (llvm::isa<SoftmaxOp, LogSoftmaxOp, LogSumExpOp>(op)) {
      in = op.getOperand(0);
      auto axis = op.getAttrOfType<IntegerAttr>("axis");
      if (!axis || axis.getInt() + 1 != static_cast<int64_t>(shapeOf(in).size()))
        continue;
    } else if (auto loss = llvm::dyn_cast<NllLossOp>(op)) {
      in = loss.getInput();
      if (shapeOf(in).size() != 2)
        continue;
    } else {
      continue;
    }
    auto foldable = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && v.hasOneUse() && runsOnHost(def) == runsOnHost(&op);
    };
    if (llvm::isa<NllLossOp>(op)) {
      if (auto reshape = in.getDefiningOp<ReshapeOp>();
          reshape && foldable(in) && shapeOf(reshape.getInput()).back() == shapeOf(in).back()) {
        plan.foldedInto[reshape] = &op;
        in = reshape.getInput();
      }
      // The shift: one element per row, of the difference's type, stored.
      if (auto sub = in.getDefiningOp<SubOp>(); sub && foldable(in)) {
        auto x = llvm::cast<RankedTensorType>(sub.getLhs().getType());
        auto shift = llvm::cast<RankedTensorType>(sub.getRhs().getType());
        if (x == sub.getType() && shift.getElementType() == x.getElementType() &&
            shift.getRank() == x.getRank() && shift.getShape().back() == 1 &&
            shift.getShape().drop_back() == x.getShape().drop_back() &&
            !plan.unstored(sub.getRhs())) {
          plan.foldedInto[sub] = &op;
          in = sub.getLhs();
        }
      }
    }
    if (auto cast = in.getDefiningOp<CastOp>(); cast && foldable(in)) {
      Type from = getElementTypeOrSelf(cast.getInput().getType());
      if ((from.isBF16() || from.isF16()) && getElementTypeOrSelf(in.getType()).isF32()) {
        plan.foldedInto[cast] = &op;
        in = cast.getInput();
      }
    }
    if (auto slice = in.getDefiningOp<SliceOp>(); slice && foldable(in) && isRowWindow(slice))
      plan.foldedInto[slice] = &op;
  }
}

/// The micro-batch of `op` (`ppc.mb`), or -1 for the step's own ops.
static int64_t microBatch(Operation *op) {
  auto mb = op->getAttrOfType<IntegerAttr>(kMicroBatchAttrName);
  return mb ? mb.getInt() : -1;
}

/// The epilogues of GEMMs: a product read only by an add of a row-broadcast
/// bias of its type (one element per column), whose result is read only by
/// an add of a tensor of its type, or either add alone; all in one micro-
/// batch (the GEMM runs at the last add's place). Then every value the GEMM
/// reads is computed by then, whatever groups its producers join.
static void planGemmEpilogues(Block &body, FusionPlan &plan) {
  // The add that is `value`'s only reader, and its other operand.
  auto onlyAdd = [&](Value value, Operation *matmul) -> std::pair<AddOp, Value> {
    if (!value.hasOneUse())
      return {};
    auto add = llvm::dyn_cast<AddOp>(*value.getUsers().begin());
    // (An add of two products is the first's epilogue, reading the second.)
    if (!add || plan.epilogueOf.contains(add) || add.getType() != value.getType() ||
        add.getLhs() == add.getRhs() || microBatch(add) != microBatch(matmul) ||
        runsOnHost(add) != runsOnHost(matmul))
      return {};
    return {add, add.getLhs() == value ? add.getRhs() : add.getLhs()};
  };
  auto isRow = [](Value bias, RankedTensorType of) {
    auto type = llvm::cast<RankedTensorType>(bias.getType());
    llvm::ArrayRef<int64_t> shape = type.getShape();
    return type.getElementType() == of.getElementType() && !shape.empty() &&
           shape.back() == of.getShape().back() && type.getRank() <= of.getRank() &&
           llvm::all_of(shape.drop_back(), [](int64_t d) { return d == 1; });
  };
  for (Operation &op : body) {
    auto matmul = llvm::dyn_cast<MatMulOp>(op);
    if (!matmul || runsOnHost(matmul) || splatValue(matmul.getLhs()) || splatValue(matmul.getRhs()))
      continue;
    auto type = llvm::cast<RankedTensorType>(matmul.getType());
    if (!type.getElementType().isF32() && !type.getElementType().isBF16())
      continue;
    GemmEpilogue e;
    e.matmul = matmul;
    Value value = matmul.getResult();
    for (int step = 0; step < 2; ++step) {
      auto [add, other] = onlyAdd(value, matmul);
      if (!add || splatValue(other))
        break;
      if (!e.bias && !e.addend && other.getType() != type && isRow(other, type))
        e.bias = other;
      else if (!e.addend && other.getType() == type)
        e.addend = other;
      else
        break;
      e.adds.push_back(add);
      value = add.getResult();
    }
    if (e.adds.empty())
      continue;
    unsigned index = plan.epilogues.size();
    plan.epilogueOf[matmul] = index;
    for (Operation *add : e.adds)
      plan.epilogueOf[add] = index;
    plan.epilogues.push_back(std::move(e));
  }
}

/// Sums over rows computed by the GEMM that reads their input
/// (FusionPlan::sumsGemm), after every other plan: the sum a library kernel
/// of its own, the product a plain one after it in its micro-batch, whose
/// operands are computed by the sum's place (the sum's input through a
/// reshape to 2-D, as the second operand or transposed as the first: a
/// transpose read by GEMMs alone, a view the GEMM reads transposed).
static void planGemmRowSums(Block &body, FusionPlan &plan,
                            const llvm::DenseMap<Operation *, int64_t> &index) {
  auto planned = [&](Operation *op) {
    return plan.groupOf.count(op) || plan.foldedInto.count(op) || plan.epilogueOf.count(op) ||
           plan.normGradOfAdd.count(op) || plan.normGradOfSum.count(op) ||
           plan.normGradAdd.count(op) || plan.normGradSums.count(op) ||
           plan.rowLogSumExpPlace.count(op) || plan.rowLogSumExpOf.count(op) ||
           plan.sumsGemm.count(op) || plan.sumsOf.count(op) || runsOnHost(op);
  };
  // Whether `value` is computed by the place of `at`: through reshapes
  // (views) and transposes before it or read by GEMMs alone (views too:
  // layOutProgram's foldsIntoGemms, which the GEMM at `at` relies on for the
  // transposes it reads after `at`; keep the two in step).
  auto readyAt = [&](Value value, Operation *at) {
    while (Operation *def = value.getDefiningOp()) {
      if (!llvm::isa<ReshapeOp, TransposeOp>(def))
        return index.lookup(plan.runsAt(def)) < index.lookup(at);
      if (auto transpose = llvm::dyn_cast<TransposeOp>(def);
          transpose && index.lookup(def) > index.lookup(at) &&
          (transpose.getPerm() != ArrayRef<int64_t>{1, 0} ||
           !llvm::all_of(def->getUsers(), [](Operation *u) { return llvm::isa<MatMulOp>(u); })))
        return false;
      value = def->getOperand(0);
    }
    return true;
  };
  for (Operation &op : body) {
    auto matmul = llvm::dyn_cast<MatMulOp>(op);
    if (!matmul || planned(matmul))
      continue;
    auto type = llvm::cast<RankedTensorType>(matmul.getType());
    Type element = type.getElementType();
    if (type.getRank() != 2 || (!element.isF32() && !element.isBF16()))
      continue;
    // The value an operand is (through a reshape to 2-D keeping the last
    // dimension), and the sums over its rows read before `matmul`.
    auto summed = [&](Value operand, Value other) -> Operation * {
      llvm::SmallVector<Value, 2> values{operand};
      if (auto reshape = operand.getDefiningOp<ReshapeOp>())
        if (shapeOf(reshape.getInput()).back() == shapeOf(operand).back())
          values.push_back(reshape.getInput());
      for (Value input : values) {
        auto inputType = llvm::cast<RankedTensorType>(input.getType());
        if (inputType.getElementType() != element || inputType.getRank() < 2 ||
            plan.unstored(input))
          continue;
        auto range = llvm::seq<int64_t>(0, inputType.getRank() - 1);
        llvm::SmallVector<int64_t> rows(range.begin(), range.end());
        for (Operation *user : input.getUsers()) {
          auto sum = llvm::dyn_cast<ReduceSumOp>(user);
          if (sum && !planned(sum) && sum.getAxes() == ArrayRef<int64_t>(rows) &&
              getElementTypeOrSelf(sum.getType()) == element && sum->isBeforeInBlock(matmul) &&
              microBatch(sum) == microBatch(matmul) && readyAt(other, sum))
            return sum;
        }
      }
      return nullptr;
    };
    Operation *sum = nullptr;
    if (!matmul.getRhs().getDefiningOp<TransposeOp>())
      sum = summed(matmul.getRhs(), matmul.getLhs());
    if (sum) {
      plan.sumsOfB.insert(matmul);
    } else if (auto transpose = matmul.getLhs().getDefiningOp<TransposeOp>();
               transpose && transpose.getPerm() == ArrayRef<int64_t>{1, 0} &&
               llvm::all_of(transpose->getUsers(),
                            [](Operation *u) { return llvm::isa<MatMulOp>(u); })) {
      sum = summed(transpose.getInput(), matmul.getRhs());
    }
    if (!sum)
      continue;
    plan.sumsGemm[sum] = matmul;
    plan.sumsOf[matmul] = sum;
  }
}

/// The adds read by a norm gradient's input_grad alone (normGradAdd): of
/// a tensor of its type, in its micro-batch, not an add of a GEMM epilogue,
/// whose other operand is computed before the gradient runs (the kernel
/// adds it there): an argument, another norm gradient's input_grad or its
/// add, or a GEMM epilogue's result, defined before it. (A fusion group's
/// value may be computed later, at the group's last op.)
static void planNormGradAdds(Block &body, FusionPlan &plan) {
  auto computedBefore = [&](Value value, Operation *op) {
    Operation *def = value.getDefiningOp();
    if (!def)
      return true;
    if (!def->isBeforeInBlock(op))
      return false;
    if (llvm::isa<LayerNormGradOp, RmsNormGradOp>(def))
      return true;
    if (plan.normGradOfAdd.contains(def))
      return true;
    const GemmEpilogue *e = plan.epilogue(def);
    return e && e->result() == value;
  };
  for (Operation &op : body) {
    if (!llvm::isa<LayerNormGradOp, RmsNormGradOp>(op) || runsOnHost(&op))
      continue;
    Value dx = op.getResult(0);
    if (!dx.hasOneUse())
      continue;
    auto add = llvm::dyn_cast<AddOp>(*dx.getUsers().begin());
    if (!add || add.getLhs() == add.getRhs() || add.getType() != dx.getType() ||
        plan.epilogueOf.contains(add) || runsOnHost(add) || microBatch(add) != microBatch(&op))
      continue;
    Value addend = add.getLhs() == dx ? add.getRhs() : add.getLhs();
    if (addend.getType() != dx.getType() || !computedBefore(addend, &op))
      continue;
    plan.normGradAdd[&op] = add;
    plan.normGradOfAdd[add] = &op;
  }
}

/// The sums over the rows that norm gradients compute in their kernels
/// (NormGradSum): for each gradient, the reductions of its own micro-batch
/// over exactly the dimensions before the normalized ones, whose chains
/// match, every value of a chain read by the next op alone and nothing
/// claimed by another fusion; each reduction's readers come after the
/// gradient, where it now runs. The chains compute in the gradient's
/// statistics' type (f32, f64 for f64), which the CUDA kernel computes in
/// (the CPU kernel computes in double, as its dx).
static void planNormGradSums(Block &body, FusionPlan &plan) {
  auto claimed = [&](Operation *op) {
    return plan.foldedInto.contains(op) || plan.epilogueOf.contains(op) ||
           plan.normGradOfAdd.contains(op) || plan.normGradOfSum.contains(op);
  };
  for (Operation &op : body) {
    if (!llvm::isa<LayerNormGradOp, RmsNormGradOp>(op) || runsOnHost(&op))
      continue;
    bool centered = llvm::isa<LayerNormGradOp>(op);
    Value x = op.getOperand(0), dy = op.getOperand(2), rstd = op.getResults().back();
    Value mean = centered ? op.getResult(1) : Value();
    Value written = plan.normGradAdd.contains(&op) ? plan.normGradAdd.lookup(&op)->getResult(0)
                                                   : op.getResult(0);
    ArrayRef<int64_t> shape = shapeOf(x);
    int64_t axis = op.getAttrOfType<IntegerAttr>("axis").getInt();
    int64_t size = ShapedType::getNumElements(shape.drop_front(axis)),
            outer = ShapedType::getNumElements(shape.take_front(axis));
    Type stats = getElementTypeOrSelf(rstd.getType());
    Type compute = getElementTypeOrSelf(x.getType()).isF64()
                       ? Type(Float64Type::get(op.getContext()))
                       : Type(Float32Type::get(op.getContext()));
    // (The kernel keeps each column's sums in registers: rows of at most
    // ppcrt::normsums::kMaxSize elements.)
    if (size < 1 || outer < 1 || size > ppcrt::normsums::kMaxSize || stats != compute)
      continue;
    auto range = llvm::seq<int64_t>(0, axis);
    llvm::SmallVector<int64_t> rows(range.begin(), range.end());
    // `reader`, if a sum over the rows the gradient may run.
    auto rowSum = [&](Operation *reader) -> Operation * {
      auto sum = llvm::dyn_cast_or_null<ReduceSumOp>(reader);
      if (!sum || shapeOf(sum.getInput()) != shape || sum.getAxes() != ArrayRef<int64_t>(rows) ||
          claimed(sum) || runsOnHost(sum) || microBatch(sum) != microBatch(&op))
        return nullptr;
      for (Operation *user : sum->getUsers())
        if (!op.isBeforeInBlock(user))
          return nullptr;
      return sum;
    };
    // Whether `value` is `of`, or a widening cast of it to the compute type
    // read once (appended to `chain`).
    auto widened = [&](Value value, Value of, llvm::SmallVectorImpl<Operation *> &chain) {
      if (value == of)
        return getElementTypeOrSelf(of.getType()) == compute;
      auto cast = value.getDefiningOp<CastOp>();
      if (!cast || cast.getOperand() != of || !value.hasOneUse() || claimed(cast) ||
          getElementTypeOrSelf(value.getType()) != compute ||
          !llvm::isa<FloatType>(getElementTypeOrSelf(of.getType())) ||
          getElementTypeOrSelf(of.getType()).getIntOrFloatBitWidth() >
              compute.getIntOrFloatBitWidth())
        return false;
      chain.push_back(cast);
      return true;
    };
    // The op reading `value`, where it is read once.
    auto onlyReader = [&](Value value) -> Operation * {
      return value.hasOneUse() && !claimed(*value.getUsers().begin()) ? *value.getUsers().begin()
                                                                      : nullptr;
    };
    llvm::SmallVector<NormGradSum, 3> sums;
    llvm::SmallVector<Operation *> chains;
    auto take = [&](NormGradSum::Kind kind, Operation *sum, ArrayRef<Operation *> chain) {
      if (!sum || llvm::any_of(sums, [&](const NormGradSum &s) { return s.kind == kind; }) ||
          llvm::any_of(chain, [&](Operation *member) {
            return runsOnHost(member) || microBatch(member) != microBatch(&op);
          }))
        return;
      sums.push_back({kind, sum});
      llvm::append_range(chains, chain);
      chains.push_back(sum);
    };
    // dy (and the input's gradient): the sum of it or of its widening cast.
    auto sumsOf = [&](Value of, NormGradSum::Kind kind, bool anyType) {
      for (Operation *reader : of.getUsers()) {
        llvm::SmallVector<Operation *, 1> chain;
        Value summed = of;
        if (!llvm::isa<ReduceSumOp>(reader)) {
          summed = reader->getNumResults() == 1 ? reader->getResult(0) : Value();
          if (!summed || !widened(summed, of, chain))
            continue;
          reader = onlyReader(summed);
        }
        if (anyType || getElementTypeOrSelf(summed.getType()) == compute)
          take(kind, rowSum(reader), chain);
      }
    };
    sumsOf(dy, NormGradSum::Kind::ResultGrad, /*anyType=*/false);
    sumsOf(written, NormGradSum::Kind::InputGrad, /*anyType=*/true);
    // dy * ((x - mean) * rstd), rms_norm's dy * (x * rstd), products in
    // either order.
    for (Operation *scaled : rstd.getUsers()) {
      llvm::SmallVector<Operation *, 6> chain;
      Value centeredX = llvm::isa<MulOp>(scaled) ? otherOperand(scaled, rstd) : Value();
      if (!centeredX || claimed(scaled))
        continue;
      chain.push_back(scaled);
      if (centered) {
        auto sub = centeredX.getDefiningOp<SubOp>();
        if (!sub || sub.getRhs() != mean || !centeredX.hasOneUse() || claimed(sub))
          continue;
        chain.push_back(sub);
        centeredX = sub.getLhs();
      }
      if (!widened(centeredX, x, chain))
        continue;
      Operation *product = onlyReader(scaled->getResult(0));
      Value g = product && llvm::isa<MulOp>(product) ? otherOperand(product, scaled->getResult(0))
                                                     : Value();
      if (!g || !widened(g, dy, chain))
        continue;
      chain.push_back(product);
      take(NormGradSum::Kind::ScaleGrad, rowSum(onlyReader(product->getResult(0))), chain);
    }
    if (sums.empty())
      continue;
    for (Operation *member : chains)
      plan.normGradOfSum[member] = &op;
    plan.normGradSums[&op] = std::move(sums);
  }
}

ArrayRef<int64_t> loopShape(const FusionGroup &group) {
  if (group.reduction)
    return shapeOf(group.reduction->getOperand(0));
  return shapeOf(group.ops.back()->getResult(0));
}

/// What makes groups alike (GroupBatch): each op's name, properties and
/// result element type; each operand as the group's own value (which op,
/// which result), an inlined constant (its value) or an input (which one,
/// its element type, dense or one element); the outputs; the micro-batch.
/// None for a group that cannot run in a batch.
static std::optional<std::string> batchKey(const FusionGroup &group) {
  // (A kernel's table has room for a few dozen buffers a row, and a launch
  // needs at least one element.)
  ArrayRef<int64_t> shape = loopShape(group);
  if (runsOnHost(group.ops.back()) || group.inputs.size() + group.outputs.size() > 64 ||
      llvm::is_contained(shape, 0))
    return std::nullopt;
  // A reduction, of every element to one.
  if (Operation *reduction = group.reduction;
      reduction &&
      llvm::cast<RankedTensorType>(reduction->getResult(0).getType()).getNumElements() != 1)
    return std::nullopt;
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(group.ops))
    position[op] = i;
  std::string key;
  llvm::raw_string_ostream os(key);
  std::set<int64_t> microBatches;
  for (Operation *op : group.ops) {
    microBatches.insert(microBatch(op));
    // (A reduction's axes are all its input's, of each group's rank.)
    os << op->getName() << " ";
    if (op == group.reduction)
      os << "all";
    else
      os << op->getPropertiesAsAttribute();
    os << " " << getElementTypeOrSelf(op->getResult(0).getType()) << " (";
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (auto it = def ? position.find(def) : position.end(); it != position.end()) {
        os << "r" << it->second << "." << llvm::cast<OpResult>(operand).getResultNumber() << " ";
        continue;
      }
      if (auto splat = splatValue(operand)) {
        os << "c" << *splat << ":" << operand.getType() << " ";
        continue;
      }
      auto type = llvm::cast<RankedTensorType>(operand.getType());
      bool scalar = type.getNumElements() == 1;
      if (!scalar && type.getShape() != shape)
        return std::nullopt;
      os << "i" << (llvm::find(group.inputs, operand) - group.inputs.begin())
         << (scalar ? "s" : "d") << type.getElementType() << " ";
    }
    os << ") ";
  }
  os << "-> ";
  for (Value v : group.outputs)
    os << position[v.getDefiningOp()] << "." << llvm::cast<OpResult>(v).getResultNumber() << " ";
  os << "mb";
  for (int64_t mb : microBatches)
    os << " " << mb;
  return key;
}

/// Fills in `batch`'s per-input flags from its first group.
static void describeInputs(GroupBatch &batch, const FusionPlan &plan) {
  const FusionGroup &first = plan.groups[batch.groups.front()];
  for (auto [k, input] : llvm::enumerate(first.inputs)) {
    batch.scalar.push_back(llvm::cast<RankedTensorType>(input.getType()).getNumElements() == 1);
    batch.shared.push_back(batch.scalar.back() && llvm::all_of(batch.groups, [&](unsigned g) {
                             return plan.groups[g].inputs[k] == input;
                           }));
  }
}

/// Batches of the optimizer step's alike groups (GroupBatch), in program
/// order: a group joins the open batch of its key; a batch closes when an
/// op reads one of its values (it must have run by then) or an op of
/// another micro-batch runs. The optimizer step's groups are those that run
/// as the step's own ops, outside every micro-batch (their last op has no
/// `ppc.mb`): the gradient norm, clipping and the updates, after every
/// gradient is computed (a group may start with a micro-batch's cast of its
/// gradient).
static void batchOptimizerGroups(Block &body, FusionPlan &plan) {
  llvm::DenseMap<unsigned, std::string> keyOf;
  for (auto [g, group] : llvm::enumerate(plan.groups))
    if (microBatch(group.ops.back()) < 0)
      if (std::optional<std::string> key = batchKey(group))
        keyOf[g] = *key;
  // The open batches by key: their groups, and the place before which they
  // must run (a reader's, in a group that runs later).
  struct Open {
    llvm::SmallVector<unsigned> groups;
    int64_t deadline = INT64_MAX;
  };
  std::map<std::string, Open> open;
  llvm::DenseSet<unsigned> inOpen;
  std::vector<llvm::SmallVector<unsigned>> closed;
  auto close = [&](const std::string &key) {
    auto it = open.find(key);
    if (it == open.end())
      return;
    for (unsigned g : it->second.groups)
      inOpen.erase(g);
    if (it->second.groups.size() > 1)
      closed.push_back(std::move(it->second.groups));
    open.erase(it);
  };
  llvm::DenseMap<Operation *, int64_t> index;
  for (Operation &op : body)
    index[&op] = index.size();
  for (Operation &op : body) {
    int64_t here = index[&op];
    auto member = plan.groupOf.find(&op);
    std::optional<unsigned> own;
    if (member != plan.groupOf.end())
      own = member->second;
    llvm::SmallVector<std::string> closing;
    // An op reading a value of an open batch: the batch runs before the
    // reader does (at once, or before the reader's group's place).
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      auto it = def ? plan.groupOf.find(def) : plan.groupOf.end();
      if (it == plan.groupOf.end() || own == it->second || !inOpen.contains(it->second))
        continue;
      Open &batch = open[keyOf[it->second]];
      batch.deadline = std::min(batch.deadline, index[plan.runsAt(&op)]);
    }
    for (auto &[key, batch] : open)
      if (here >= batch.deadline ||
          microBatch(&op) != microBatch(plan.groups[batch.groups.front()].ops.back()))
        closing.push_back(key);
    for (const std::string &key : closing)
      close(key);
    if (!own || plan.groups[*own].ops.back() != &op || !keyOf.count(*own))
      continue;
    open[keyOf[*own]].groups.push_back(*own);
    inOpen.insert(*own);
  }
  while (!open.empty())
    close(open.begin()->first);
  for (llvm::SmallVector<unsigned> &groups : closed) {
    GroupBatch batch;
    batch.groups = std::move(groups);
    describeInputs(batch, plan);
    for (unsigned g : batch.groups)
      plan.batchOf[g] = plan.batches.size();
    plan.batches.push_back(std::move(batch));
  }
}

/// Groups of at most this many elements are launch-bound on GPUs (an H100
/// reads 64 Ki f32 elements in about a tenth of a launch's microsecond).
static constexpr int64_t kSmallGroupElements = int64_t(1) << 16;

/// Batches of alike small groups (of any size with `large`), not yet in a
/// batch, that read only the program's arguments (GroupBatch::early): each
/// key's groups, at least two, run at the first one's place, where every
/// argument is ready and before any reader of theirs. (The bf16 copies of a
/// model's parameters, made before each one's first reader: GPT-2's 98
/// biases and norm weights are small, its 50 weight matrices large; made
/// early, a large copy lives from the step's start, which layOutProgram
/// accepts where the arena does not grow.)
static void batchArgumentGroups(Block &body, FusionPlan &plan, bool large) {
  std::map<std::string, llvm::SmallVector<unsigned>> byKey;
  std::vector<std::string> order;
  for (auto [g, group] : llvm::enumerate(plan.groups)) {
    if (plan.batchOf.contains(g) || group.reduction || group.inputs.empty() ||
        (!large && ShapedType::getNumElements(loopShape(group)) > kSmallGroupElements) ||
        !llvm::all_of(group.inputs, [&](Value v) {
          return llvm::isa<BlockArgument>(v) && v.getParentBlock() == &body;
        }))
      continue;
    std::optional<std::string> key = batchKey(group);
    if (!key)
      continue;
    if (!byKey.count(*key))
      order.push_back(*key);
    byKey[*key].push_back(g);
  }
  // (A group's place is its last op's: a group that a later op joined
  // starts before it runs, so the groups go in order of their places, and
  // the batch runs at the first of them, before any group's reader.)
  llvm::DenseMap<Operation *, int64_t> index;
  for (Operation &op : body)
    index[&op] = index.size();
  for (const std::string &key : order) {
    llvm::SmallVector<unsigned> &groups = byKey[key];
    if (groups.size() < 2)
      continue;
    llvm::sort(groups, [&](unsigned a, unsigned b) {
      return index[plan.groups[a].ops.back()] < index[plan.groups[b].ops.back()];
    });
    GroupBatch batch;
    batch.groups = std::move(groups);
    batch.early = true;
    describeInputs(batch, plan);
    for (unsigned g : batch.groups)
      plan.batchOf[g] = plan.batches.size();
    plan.batches.push_back(std::move(batch));
  }
}

/// Each log_sum_exp over the last dimension, of rows read in place or
/// through folded ops, whose result one group (not a reduction, not in a
/// batch, not reading another such log_sum_exp) reads as an input broadcast
/// over that group's rows: the group's loop shape is the result's but the
/// last dimension, of any size, and not empty. Every other reader of the
/// result runs after the group; the group is on the same side of the
/// offload as the log_sum_exp, and every op from it to the group's place is
/// of its micro-batch (so the rows it reads live no longer across another
/// micro-batch). The group's kernel then computes it
/// (FusionPlan::rowLogSumExpOf).
static void planRowLogSumExps(Block &body, FusionPlan &plan,
                              const llvm::DenseMap<Operation *, int64_t> &index) {
  for (auto sum : body.getOps<LogSumExpOp>()) {
    Value lse = sum.getResult();
    auto rows = shapeOf(lse);
    if (rows.empty() ||
        static_cast<int64_t>(sum.getAxis()) + 1 != static_cast<int64_t>(rows.size()))
      continue;
    std::optional<unsigned> reader;
    bool alone = true;
    for (Operation *user : lse.getUsers()) {
      auto it = plan.groupOf.find(user);
      if (it == plan.groupOf.end())
        continue;
      if (reader && *reader != it->second)
        alone = false;
      reader = it->second;
    }
    if (!reader || !alone || plan.batch(*reader))
      continue;
    const FusionGroup &group = plan.groups[*reader];
    auto shape = loopShape(group);
    Operation *place = group.ops.back();
    if (group.reduction || shape.size() != rows.size() || shape.drop_back() != rows.drop_back() ||
        ShapedType::getNumElements(shape) == 0 || runsOnHost(place) != runsOnHost(sum) ||
        !llvm::is_contained(group.inputs, lse) || plan.rowLogSumExpOf.contains(place))
      continue;
    bool oneMicroBatch = true;
    for (Operation *op = sum->getNextNode(); op && op != place; op = op->getNextNode())
      oneMicroBatch &= microBatch(op) == microBatch(sum);
    if (!oneMicroBatch || microBatch(place) != microBatch(sum))
      continue;
    if (llvm::any_of(lse.getUsers(), [&](Operation *user) {
          return !plan.groupOf.count(user) &&
                 index.lookup(plan.runsAt(user)) <= index.lookup(place);
        }))
      continue;
    plan.rowLogSumExpPlace[sum] = place;
    plan.rowLogSumExpOf[place] = sum;
  }
}

FusionPlan planFusion(func::FuncOp func, const FusionOptions &options) {
  bool fuseReductions = options.fuseReductions;
  FusionPlan plan;
  Block &body = func.getBody().front();
  llvm::DenseMap<Operation *, int64_t> index;
  for (Operation &op : body)
    index[&op] = index.size();
  // The micro-batch of each op (`ppc.mb`; -1 for the step's own ops), and
  // the places of each micro-batch's ops, in order.
  llvm::DenseMap<Operation *, int64_t> microBatchOf;
  std::map<int64_t, std::vector<int64_t>> placesOf;
  for (Operation &op : body) {
    int64_t m = microBatch(&op);
    microBatchOf[&op] = m;
    placesOf[m].push_back(index[&op]);
  }
  std::vector<llvm::SmallVector<int64_t, 2>> groupMicroBatches;
  // Whether an op of a micro-batch other than `own` runs strictly between
  // places `from` and `to`. A group runs at its last op, so an op joining a
  // group delays all of it, and keeps its inputs alive, until the op's
  // place: across another micro-batch's ops that would hold one micro-
  // batch's values through the next (the chain of gradient accumulations,
  // each add fused into the last, kept every micro-batch's gradient alive
  // until the end).
  auto othersBetween = [&](int64_t from, int64_t to, llvm::ArrayRef<int64_t> own) {
    int64_t inside = to - from - 1, ours = 0;
    for (int64_t m : own) {
      const std::vector<int64_t> &places = placesOf[m];
      ours += std::lower_bound(places.begin(), places.end(), to) -
              std::upper_bound(places.begin(), places.end(), from);
    }
    return ours < inside;
  };
  // Group g's micro-batches and op's.
  auto withMicroBatchOf = [&](unsigned g, Operation &op) {
    llvm::SmallVector<int64_t, 3> own(groupMicroBatches[g].begin(), groupMicroBatches[g].end());
    if (!llvm::is_contained(own, microBatchOf[&op]))
      own.push_back(microBatchOf[&op]);
    return own;
  };
  auto inGroup = [&](Operation *op, unsigned g) {
    auto it = plan.groupOf.find(op);
    return it != plan.groupOf.end() && it->second == g;
  };
  // Every use of group g's values outside it, other than by `op`, comes
  // after `op` (the group runs at its last op).
  auto usesComeAfter = [&](unsigned g, Operation &op) {
    int64_t first = INT64_MAX;
    for (Operation *member : plan.groups[g].ops)
      for (Value result : member->getResults())
        for (Operation *user : result.getUsers())
          if (user != &op && !inGroup(user, g))
            first = std::min(first, index[user]);
    return first > index[&op];
  };
  foldIntoRowReaders(body, plan);
  if (options.gemmEpilogues)
    planGemmEpilogues(body, plan);
  planNormGradAdds(body, plan);
  if (options.normGradSums)
    planNormGradSums(body, plan);
  for (Operation &op : body) {
    if (plan.foldedInto.contains(&op) || plan.epilogueOf.contains(&op) ||
        plan.normGradOfAdd.contains(&op) || plan.normGradOfSum.contains(&op))
      continue;
    if (fuseReductions && !fusableReduction(&op).empty()) {
      Value input = op.getOperand(0);
      Operation *def = input.getDefiningOp();
      auto it = def ? plan.groupOf.find(def) : plan.groupOf.end();
      // (Its input's other readers come after it, as every other reader of
      // the group's values: usesComeAfter. The group then stores it.)
      if (it != plan.groupOf.end() && !plan.groups[it->second].reduction &&
          runsOnHost(plan.groups[it->second].ops.back()) == runsOnHost(&op) &&
          !othersBetween(index[plan.groups[it->second].ops.back()], index[&op],
                         withMicroBatchOf(it->second, op)) &&
          usesComeAfter(it->second, op)) {
        // (`it` dies with the insertion into groupOf.)
        unsigned g = it->second;
        plan.groups[g].ops.push_back(&op);
        plan.groups[g].reduction = &op;
        plan.groupOf[&op] = g;
        if (!llvm::is_contained(groupMicroBatches[g], microBatchOf[&op]))
          groupMicroBatches[g].push_back(microBatchOf[&op]);
      }
      continue;
    }
    if (!isElementwise(&op))
      continue;
    // The groups `op` reads that it may join: each then runs at `op`'s
    // place, all as one loop (AdamW's update of a parameter reads the
    // chains of m and v and writes the parameter, m and v in one pass).
    llvm::SmallVector<unsigned, 2> joinable;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      auto it = def ? plan.groupOf.find(def) : plan.groupOf.end();
      if (it == plan.groupOf.end() || llvm::is_contained(joinable, it->second))
        continue;
      unsigned g = it->second;
      // The host's ops (offload) and the device's run apart.
      if (runsOnHost(plan.groups[g].ops.back()) != runsOnHost(&op))
        continue;
      if (plan.groups[g].reduction ||
          shapeOf(plan.groups[g].ops.back()->getResult(0)) != shapeOf(op.getResult(0)))
        continue;
      if (othersBetween(index[plan.groups[g].ops.back()], index[&op], withMicroBatchOf(g, op)))
        continue;
      if (usesComeAfter(g, op))
        joinable.push_back(g);
    }
    unsigned joined;
    if (joinable.empty()) {
      joined = plan.groups.size();
      plan.groups.emplace_back();
      groupMicroBatches.emplace_back();
    } else {
      // The first group absorbs the others, in program order.
      joined = joinable.front();
      FusionGroup &into = plan.groups[joined];
      for (unsigned g : llvm::drop_begin(joinable)) {
        for (Operation *member : plan.groups[g].ops) {
          into.ops.push_back(member);
          plan.groupOf[member] = joined;
        }
        plan.groups[g].ops.clear();
        for (int64_t m : groupMicroBatches[g])
          if (!llvm::is_contained(groupMicroBatches[joined], m))
            groupMicroBatches[joined].push_back(m);
      }
      llvm::sort(into.ops, [&](Operation *a, Operation *b) { return index[a] < index[b]; });
    }
    plan.groups[joined].ops.push_back(&op);
    plan.groupOf[&op] = joined;
    if (!llvm::is_contained(groupMicroBatches[joined], microBatchOf[&op]))
      groupMicroBatches[joined].push_back(microBatchOf[&op]);
  }

  // Groups absorbed into others are gone; the rest keep their order.
  {
    std::vector<FusionGroup> kept;
    for (FusionGroup &group : plan.groups)
      if (!group.ops.empty())
        kept.push_back(std::move(group));
    plan.groups = std::move(kept);
    plan.groupOf.clear();
    for (auto [g, group] : llvm::enumerate(plan.groups))
      for (Operation *op : group.ops)
        plan.groupOf[op] = g;
  }

  // Inputs and outputs; splat constants are inlined.
  for (auto [g, group] : llvm::enumerate(plan.groups)) {
    llvm::DenseSet<Value> seen;
    for (Operation *op : group.ops) {
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if ((def && inGroup(def, g)) || splatValue(operand) || !seen.insert(operand).second)
          continue;
        group.inputs.push_back(operand);
      }
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) { return !inGroup(user, g); }))
          group.outputs.push_back(result);
    }
  }
  for (auto constant : func.getOps<ConstantOp>())
    if (splatValue(constant.getResult()) && !constant.getResult().use_empty() &&
        llvm::all_of(constant.getResult().getUsers(),
                     [&](Operation *user) { return plan.groupOf.count(user); }))
      plan.inlinedConstants.insert(constant);
  if (options.batchOptimizer)
    batchOptimizerGroups(body, plan);
  if (options.batchArgumentGroups)
    batchArgumentGroups(body, plan, options.batchLargeArgumentGroups);
  if (options.rowLogSumExps)
    planRowLogSumExps(body, plan, index);
  if (options.gemmSums)
    planGemmRowSums(body, plan, index);
  return plan;
}

llvm::StringRef scalarFunction(Operation *op) {
  auto elementwise = llvm::dyn_cast<ElementwiseOpInterface>(op);
  return elementwise ? elementwise.getScalarFunction() : "";
}

LoopNest collapse(ArrayRef<int64_t> shape, llvm::ArrayRef<Value> inputs,
                  llvm::ArrayRef<llvm::SmallVector<int64_t>> extra) {
  int64_t rank = shape.size();
  std::vector<llvm::SmallVector<int64_t>> strides;
  for (Value input : inputs) {
    auto inShape = llvm::cast<RankedTensorType>(input.getType()).getShape();
    int64_t offset = rank - inShape.size(), stride = 1;
    llvm::SmallVector<int64_t> s(rank, 0);
    for (int64_t d = rank - 1; d >= offset; --d) {
      int64_t size = inShape[d - offset];
      s[d] = size == 1 ? 0 : stride;
      stride *= size;
    }
    strides.push_back(s);
  }
  for (const llvm::SmallVector<int64_t> &s : extra)
    strides.push_back(s);
  LoopNest nest;
  nest.inputStrides.resize(strides.size());
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !nest.sizes.empty();
    for (auto [k, s] : llvm::enumerate(strides))
      merge &= nest.inputStrides[k].back() == s[d] * shape[d];
    if (merge) {
      nest.sizes.back() *= shape[d];
      for (auto [k, s] : llvm::enumerate(strides))
        nest.inputStrides[k].back() = s[d];
      continue;
    }
    nest.sizes.push_back(shape[d]);
    for (auto [k, s] : llvm::enumerate(strides))
      nest.inputStrides[k].push_back(s[d]);
  }
  return nest;
}

} // namespace ppc::codegen
