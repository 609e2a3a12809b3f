//===- Partition.cpp - @train_step to per-rank SPMD IR with collectives ---===//
//
// The partitioner walks @train_step in program order and builds the program
// every rank runs. Each value has a Layout (sharded dimensions, partial-sum
// axes). For each op, its sharding rule (passes/sharding/rules) maps operand
// layouts to factor shardings; the op is cloned with local shapes, operands
// are first converted to the layout the factors require (all_reduce for
// partial sums, all_gather / all_slice for dimensions), and results get the
// layout the factors imply, partial over the axes of sharded Reduction
// factors.
//
// Partial sums flow through linear ops (add/sub of equally partial values,
// scaling by a full scalar, reshapes, transposes, slices, sums, matmuls with
// one partial operand) and are all-reduced at the first op that needs the
// full value. So a data-parallel gradient is reduced once, after
// micro-batch accumulation, right before gradient clipping and the optimizer.
//
// Which layouts the arguments get is the planner's choice (seeds): the batch
// of data inputs on dp; parameters replicated, or as given.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcAttrs.h"
#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/sharding/Layout.h"
#include "passes/sharding/ShardingRules.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

#include <numeric>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_PARTITION
#include "passes/Passes.h.inc"

std::string Layout::str() const {
  std::string s = "[";
  for (auto [i, axes] : llvm::enumerate(dims)) {
    s += i ? ", [" : "[";
    for (auto [j, a] : llvm::enumerate(axes))
      s += (j ? ", " : "") + a;
    s += "]";
  }
  s += "]";
  if (!partial.empty()) {
    s += " partial [";
    for (auto [j, a] : llvm::enumerate(partial))
      s += (j ? ", " : "") + a;
    s += "]";
  }
  return s;
}

namespace {

using AxisList = llvm::SmallVector<std::string, 1>;

constexpr llvm::StringLiteral kShardingAttrName = "ppc.sharding";
constexpr llvm::StringLiteral kShardingsAttrName = "ppc.shardings";

class Partitioner {
public:
  Partitioner(ModuleOp module, llvm::StringMap<int64_t> axisSizes,
              llvm::StringMap<int64_t> pinnedTpDims)
      : module(module), axisSizes(std::move(axisSizes)),
        pinnedTpDims(std::move(pinnedTpDims)), builder(module.getContext()) {}

  LogicalResult run(func::FuncOp func);

private:
  int64_t groupSize(llvm::ArrayRef<std::string> axes) const {
    int64_t n = 1;
    for (const std::string &a : axes)
      n *= axisSizes.lookup(a);
    return n;
  }
  FailureOr<RankedTensorType> localType(Value global, const Layout &layout, Operation *at);
  Layout argumentLayout(func::FuncOp func, unsigned i);
  LogicalResult partitionOp(Operation *op);
  /// `local` (a value of layout `from`) converted to layout `to`.
  Value convert(Value local, const Layout &from, const Layout &to, Location loc,
                Value global);
  Value allReduce(Value v, llvm::ArrayRef<std::string> axes, Location loc);
  Value allGather(Value v, int64_t dim, llvm::ArrayRef<std::string> axes, Location loc);
  Value allSlice(Value v, int64_t dim, llvm::ArrayRef<std::string> axes, Location loc);
  ArrayAttr axesAttr(llvm::ArrayRef<std::string> axes);
  ShardingAttr shardingAttr(const Layout &layout);
  FlatSymbolRefAttr meshRef() { return FlatSymbolRefAttr::get(builder.getContext(), "mesh"); }

  ModuleOp module;
  llvm::StringMap<int64_t> axisSizes;
  /// Parameters whose dimension is pinned to tp, by name.
  llvm::StringMap<int64_t> pinnedTpDims;
  OpBuilder builder;
  IRMapping mapping;
  llvm::DenseMap<Value, Layout> layouts;
  /// Conversions done already: a value converted once serves every use.
  std::map<std::pair<void *, std::string>, Value> converted;
};

ArrayAttr Partitioner::axesAttr(llvm::ArrayRef<std::string> axes) {
  llvm::SmallVector<Attribute> names;
  for (const std::string &a : axes)
    names.push_back(builder.getStringAttr(a));
  return builder.getArrayAttr(names);
}

FailureOr<RankedTensorType> Partitioner::localType(Value global, const Layout &layout,
                                                   Operation *at) {
  auto type = llvm::cast<RankedTensorType>(global.getType());
  llvm::SmallVector<int64_t> shape(type.getShape());
  for (auto [d, axes] : llvm::enumerate(layout.dims)) {
    int64_t n = groupSize(axes);
    if (shape[d] % n != 0)
      return at->emitError() << "dimension " << d << " of size " << shape[d]
                             << " cannot be split over mesh axes of size " << n;
    shape[d] /= n;
  }
  return type.clone(shape);
}

/// Which operands of `op` may stay partial sums, and the partial axes of
/// its result then: ops linear in those operands.
struct PartialFlow {
  llvm::SmallVector<bool> keep;
  AxisList resultPartial;
};

PartialFlow partialFlow(Operation *op, llvm::ArrayRef<const Layout *> in) {
  PartialFlow flow;
  flow.keep.assign(in.size(), false);
  auto partialOf = [&](unsigned i) -> const AxisList & { return in[i]->partial; };
  auto anyPartial = llvm::any_of(in, [](const Layout *l) { return !l->partial.empty(); });
  if (!anyPartial)
    return flow;
  // Every operand equally partial: sums and data movement.
  if (llvm::isa<AddOp, SubOp, ConcatOp>(op)) {
    if (llvm::all_of(in, [&](const Layout *l) { return l->partial == partialOf(0); })) {
      flow.keep.assign(in.size(), true);
      flow.resultPartial = partialOf(0);
    }
    return flow;
  }
  // One operand partial, the others not: contractions with a full value,
  // and scaling by a full scalar. An elementwise product with a full tensor
  // is linear too, but letting a partial value into one branch of an
  // elementwise computation makes every branch reduce its own copy; reduced
  // once where it meets elementwise math, it serves all of them.
  auto isScalar = [](Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getNumElements() == 1;
  };
  bool scaling = llvm::isa<MulOp, DivOp>(op) &&
                 ((partialOf(0).empty() && isScalar(op->getOperand(0))) ||
                  (partialOf(1).empty() && isScalar(op->getOperand(1))));
  bool oneOperandLinear = llvm::isa<MatMulOp, EinsumOp>(op) || scaling;
  if (oneOperandLinear) {
    int partialOperand = -1, count = 0;
    for (unsigned i = 0; i < in.size(); ++i)
      if (!in[i]->partial.empty())
        partialOperand = i, ++count;
    if (count == 1) {
      flow.keep[partialOperand] = true;
      flow.resultPartial = partialOf(partialOperand);
    }
    return flow;
  }
  // Unary linear ops and linear data movement of the first operand.
  if (llvm::isa<NegOp, ReshapeOp, TransposeOp, SliceOp, ExpandOp, ReduceSumOp,
                ReduceMeanOp, GatherOp, ScatterAddOp>(op) ||
      (llvm::isa<CastOp>(op) &&
       llvm::isa<FloatType>(getElementTypeOrSelf(op->getResult(0).getType())))) {
    if (llvm::all_of(in.drop_front(), [](const Layout *l) { return l->partial.empty(); })) {
      flow.keep[0] = true;
      flow.resultPartial = partialOf(0);
    }
  }
  return flow;
}

Layout Partitioner::argumentLayout(func::FuncOp func, unsigned i) {
  auto type = llvm::cast<RankedTensorType>(func.getArgument(i).getType());
  Layout layout = Layout::replicated(type.getRank());
  // The planner's seeds: the batch of every data input on the data axis.
  if (func.getArgAttr(i, PpcDialect::kInputAttrName) && type.getRank() > 0 &&
      axisSizes.lookup("dp") > 1)
    layout.dims[0] = {"dp"};
  // Pinned tensor-parallel layouts; optimizer state follows its parameter.
  StringRef name;
  if (auto param = func.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName))
    name = param.getValue();
  if (auto state = func.getArgAttrOfType<StringAttr>(i, PpcDialect::kStateAttrName))
    name = state.getValue().split(':').second;
  auto pinned = pinnedTpDims.find(name);
  if (!name.empty() && pinned != pinnedTpDims.end() && axisSizes.lookup("tp") > 1)
    layout.dims[pinned->second] = {"tp"};
  return layout;
}

LogicalResult Partitioner::partitionOp(Operation *op) {
  const auto rule = ShardingRuleRegistry::get().lookup(op);
  if (!rule)
    return op->emitError() << "'" << op->getName() << "' has no sharding rule";
  // A partial value that was already all-reduced for an earlier use is used
  // reduced: one reduction serves every later use (a data-parallel gradient
  // reduced for the gradient norm also feeds the optimizer).
  for (Value v : op->getOperands()) {
    Layout &layout = layouts[v];
    if (layout.partial.empty())
      continue;
    Layout full = layout;
    full.partial.clear();
    auto it = converted.find({mapping.lookup(v).getAsOpaquePointer(), full.str()});
    if (it != converted.end()) {
      mapping.map(v, it->second);
      layout = full;
    }
  }
  llvm::SmallVector<const Layout *> in;
  for (Value v : op->getOperands())
    in.push_back(&layouts[v]);

  // Factor shardings from the operands' layouts, first operand first: a
  // dimension split over axes shards its major factor (block sharding), if
  // that factor may be sharded and the axes are still free.
  llvm::SmallVector<AxisList> factorAxes(rule->factorSizes.size());
  std::set<std::string> used;
  for (auto [i, layout] : llvm::enumerate(in)) {
    for (auto [d, axes] : llvm::enumerate(layout->dims)) {
      if (axes.empty() || d >= rule->operands[i].size())
        continue;
      const auto &factors = rule->operands[i][d];
      auto major = llvm::find_if(factors, [&](int64_t f) { return rule->factorSizes[f] > 1; });
      if (major == factors.end())
        continue;
      int64_t f = *major;
      if (rule->factorKinds[f] == FactorKind::NeedReplication || !factorAxes[f].empty() ||
          rule->factorSizes[f] % groupSize(axes) != 0 ||
          llvm::any_of(axes, [&](const std::string &a) { return used.count(a); }))
        continue;
      factorAxes[f] = axes;
      used.insert(axes.begin(), axes.end());
    }
  }
  auto layoutOf = [&](llvm::ArrayRef<llvm::SmallVector<int64_t, 1>> dimFactors) {
    Layout layout = Layout::replicated(dimFactors.size());
    for (auto [d, factors] : llvm::enumerate(dimFactors))
      for (int64_t f : factors)
        llvm::append_range(layout.dims[d], factorAxes[f]);
    return layout;
  };

  PartialFlow flow = partialFlow(op, in);
  OpBuilder::InsertionGuard guard(builder);
  IRMapping local;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    Layout want = layoutOf(rule->operands[i]);
    if (flow.keep[i])
      want.partial = in[i]->partial;
    local.map(v, convert(mapping.lookup(v), *in[i], want, op->getLoc(), v));
  }
  Operation *clone = builder.clone(*op, local);
  AxisList reductionAxes;
  for (auto [f, axes] : llvm::enumerate(factorAxes))
    if (rule->factorKinds[f] == FactorKind::Reduction)
      llvm::append_range(reductionAxes, axes);
  for (auto [r, result] : llvm::enumerate(op->getResults())) {
    Layout out = layoutOf(rule->results[r]);
    out.partial = flow.resultPartial;
    llvm::append_range(out.partial, reductionAxes);
    llvm::sort(out.partial);
    auto type = localType(result, out, op);
    if (failed(type))
      return failure();
    clone->getResult(r).setType(*type);
    layouts[result] = out;
    mapping.map(result, clone->getResult(r));
  }
  llvm::SmallVector<Attribute> resultShardings;
  for (Value result : op->getResults())
    resultShardings.push_back(shardingAttr(layouts[result]));
  clone->setAttr(kShardingsAttrName, builder.getArrayAttr(resultShardings));

  // Attributes that spell out global sizes become local: a dimension the
  // partitioner split is one the slice takes whole (its rule forbids
  // splitting sliced dimensions), so its limit is the local size.
  auto localLimits = [&](llvm::ArrayRef<int64_t> limits, unsigned operand) {
    llvm::SmallVector<int64_t> local(limits);
    auto global = llvm::cast<RankedTensorType>(op->getOperand(operand).getType());
    auto shard = llvm::cast<RankedTensorType>(clone->getOperand(operand).getType());
    for (int64_t d = 0; d < global.getRank(); ++d)
      if (shard.getDimSize(d) != global.getDimSize(d))
        local[d] = shard.getDimSize(d);
    return local;
  };
  if (auto slice = llvm::dyn_cast<SliceOp>(clone))
    slice.setLimits(localLimits(slice.getLimits(), 0));
  if (auto insert = llvm::dyn_cast<InsertSliceOp>(clone))
    insert.setLimits(localLimits(insert.getLimits(), 1));

  // A mean over a sharded dimension: each rank's mean of its part, scaled
  // by its share, is a partial sum of the global mean.
  if (llvm::isa<ReduceMeanOp>(op) && !reductionAxes.empty()) {
    builder.setInsertionPointAfter(clone);
    Value part = clone->getResult(0);
    Type element = getElementTypeOrSelf(part.getType());
    Value share = builder.create<ConstantOp>(
        op->getLoc(), DenseElementsAttr::get(RankedTensorType::get({}, element),
                                             builder.getFloatAttr(element, 1.0 / groupSize(reductionAxes))));
    Value scaled = builder.create<MulOp>(op->getLoc(), part, share);
    mapping.map(op->getResult(0), scaled);
  }
  if (auto nll = llvm::dyn_cast<NllLossOp>(op);
      nll && !reductionAxes.empty() && nll.getReduction() == LossReduction::Mean) {
    builder.setInsertionPointAfter(clone);
    Location loc = op->getLoc();
    Value part = clone->getResult(0);
    auto scalar = llvm::cast<RankedTensorType>(part.getType());
    Type element = scalar.getElementType();
    if (nll.getWeight())
      return op->emitError() << "a weighted mean nll_loss over a sharded batch is not "
                                "partitioned yet";
    if (!nll.getIgnoreIndexAttr()) {
      // Every rank holds as many targets: the global mean is the mean of
      // the ranks' means.
      Value share = builder.create<ConstantOp>(
          loc, DenseElementsAttr::get(scalar, builder.getFloatAttr(
                                                  element, 1.0 / groupSize(reductionAxes))));
      mapping.map(op->getResult(0), builder.create<MulOp>(loc, part, share));
    } else {
      // Ranks may ignore different numbers of targets: the global sum over
      // the global count of the others.
      llvm::cast<NllLossOp>(clone).setReduction(LossReduction::Sum);
      Value target = clone->getOperand(1);
      auto targetType = llvm::cast<RankedTensorType>(target.getType());
      Value ignore = builder.create<ConstantOp>(
          loc, DenseElementsAttr::get(
                   RankedTensorType::get({}, targetType.getElementType()),
                   builder.getIntegerAttr(targetType.getElementType(),
                                          nll.getIgnoreIndexAttr().getInt())));
      Value ignored = builder.create<EqualOp>(loc, target, ignore);
      Value kept = builder.create<CastOp>(loc, targetType.clone(element),
                                          builder.create<NotOp>(loc, ignored));
      llvm::SmallVector<int64_t> all;
      for (int64_t d = 0; d < targetType.getRank(); ++d)
        all.push_back(d);
      Value count = builder.create<ReduceSumOp>(loc, kept, all, false);
      Value sum = allReduce(part, reductionAxes, loc);
      mapping.map(op->getResult(0),
                  builder.create<DivOp>(loc, sum, allReduce(count, reductionAxes, loc)));
      layouts[op->getResult(0)].partial.clear();
    }
  }
  builder.setInsertionPointToEnd(clone->getBlock());
  return success();
}

/// What a report calls the value behind a collective: the ONNX node that
/// computed it, or the parameter or input it is.
static std::string valueName(Value global) {
  if (Operation *def = global.getDefiningOp()) {
    if (auto name = llvm::dyn_cast<NameLoc>(def->getLoc()))
      return name.getName().str();
    return def->getName().getStringRef().str();
  }
  auto arg = llvm::cast<BlockArgument>(global);
  auto func = llvm::cast<func::FuncOp>(arg.getOwner()->getParentOp());
  for (StringRef attr : {PpcDialect::kParamAttrName, PpcDialect::kInputAttrName,
                         PpcDialect::kStateAttrName})
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr))
      return name.getValue().str();
  return "argument " + std::to_string(arg.getArgNumber());
}

Value Partitioner::convert(Value local, const Layout &from, const Layout &to, Location loc,
                           Value global) {
  if (from == to)
    return local;
  auto key = std::make_pair(local.getAsOpaquePointer(), to.str());
  if (auto it = converted.find(key); it != converted.end())
    return it->second;
  Value v = local;
  auto cause = builder.getStringAttr(valueName(global));
  auto tag = [&](Value collective) {
    collective.getDefiningOp()->setAttr("ppc.value", cause);
    return collective;
  };
  if (!from.partial.empty() && to.partial.empty())
    v = tag(allReduce(v, from.partial, loc));
  for (auto [d, axes] : llvm::enumerate(from.dims)) {
    if (axes == to.dims[d])
      continue;
    if (!axes.empty())
      v = tag(allGather(v, d, axes, loc));
    if (!to.dims[d].empty())
      v = tag(allSlice(v, d, to.dims[d], loc));
  }
  converted[key] = v;
  return v;
}

ShardingAttr Partitioner::shardingAttr(const Layout &layout) {
  llvm::SmallVector<llvm::SmallVector<StringRef>> dims;
  for (const auto &axes : layout.dims)
    dims.emplace_back(axes.begin(), axes.end());
  llvm::SmallVector<StringRef> partial(layout.partial.begin(), layout.partial.end());
  return ShardingAttr::get(builder.getContext(), "mesh", dims, partial);
}

Value Partitioner::allReduce(Value v, llvm::ArrayRef<std::string> axes, Location loc) {
  return builder.create<AllReduceOp>(loc, v.getType(), v, meshRef(),
                                     axesAttr(axes), ReductionKind::Sum);
}

Value Partitioner::allGather(Value v, int64_t dim, llvm::ArrayRef<std::string> axes,
                             Location loc) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  llvm::SmallVector<int64_t> shape(type.getShape());
  shape[dim] *= groupSize(axes);
  return builder.create<AllGatherOp>(loc, type.clone(shape), v, meshRef(), axesAttr(axes),
                                     dim);
}

Value Partitioner::allSlice(Value v, int64_t dim, llvm::ArrayRef<std::string> axes,
                            Location loc) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  llvm::SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= groupSize(axes);
  return builder.create<AllSliceOp>(loc, type.clone(shape), v, meshRef(), axesAttr(axes),
                                    dim);
}

LogicalResult Partitioner::run(func::FuncOp func) {
  Block &body = func.getBody().front();
  llvm::SmallVector<Type> argTypes;
  llvm::SmallVector<Layout> argLayouts;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    Layout layout = argumentLayout(func, i);
    auto type = localType(func.getArgument(i), layout, func);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    argLayouts.push_back(layout);
  }
  builder.setInsertionPoint(func);
  auto spmd = builder.create<func::FuncOp>(func.getLoc(), func.getSymName(),
                                           builder.getFunctionType(argTypes, {}));
  spmd.setAllArgAttrs(func.getAllArgAttrs());
  Block *entry = spmd.addEntryBlock();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    mapping.map(arg, entry->getArgument(i));
    layouts[arg] = argLayouts[i];
  }
  builder.setInsertionPointToEnd(entry);
  for (Operation &op : body.without_terminator())
    if (failed(partitionOp(&op)))
      return failure();

  // Results: updated parameters and state keep their argument's layout;
  // everything else (loss, metrics) is returned whole on every rank.
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  llvm::StringMap<Layout> byName;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    for (StringRef attr : {PpcDialect::kParamAttrName, PpcDialect::kStateAttrName})
      if (auto name = func.getArgAttrOfType<StringAttr>(i, attr))
        byName[(attr + ":" + name.getValue()).str()] = argLayouts[i];
  llvm::SmallVector<Value> results;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Layout want = Layout::replicated(llvm::cast<RankedTensorType>(v.getType()).getRank());
    for (StringRef attr : {PpcDialect::kParamAttrName, PpcDialect::kStateAttrName})
      if (auto name = func.getResultAttrOfType<StringAttr>(i, attr))
        want = byName.lookup((attr + ":" + name.getValue()).str());
    results.push_back(convert(mapping.lookup(v), layouts[v], want, ret.getLoc(), v));
  }
  builder.create<func::ReturnOp>(ret.getLoc(), results);
  spmd.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  spmd.setAllResultAttrs(func.getAllResultAttrs());
  for (auto [i, layout] : llvm::enumerate(argLayouts))
    spmd.setArgAttr(i, kShardingAttrName, shardingAttr(layout));
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Layout out = layouts[v];
    out.partial.clear();
    if (auto name = func.getResultAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName))
      out = byName.lookup((PpcDialect::kParamAttrName + ":" + name.getValue()).str());
    if (auto name = func.getResultAttrOfType<StringAttr>(i, PpcDialect::kStateAttrName))
      out = byName.lookup((PpcDialect::kStateAttrName + ":" + name.getValue()).str());
    if (!func.getResultAttr(i, PpcDialect::kParamAttrName) &&
        !func.getResultAttr(i, PpcDialect::kStateAttrName))
      out = Layout::replicated(out.dims.size());
    spmd.setResultAttr(i, kShardingAttrName, shardingAttr(out));
  }
  func.erase();
  return success();
}

struct PartitionPass : impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError() << "no @train_step to partition; run the training pipeline first";
      return signalPassFailure();
    }
    if (dataParallel < 1 || tensorParallel < 1) {
      module.emitError() << "mesh axes must have at least one rank";
      return signalPassFailure();
    }
    OpBuilder builder(module.getBodyRegion());
    builder.create<MeshOp>(module.getLoc(), "mesh",
                           builder.getStrArrayAttr({"pp", "dp", "tp"}),
                           builder.getDenseI64ArrayAttr({1, dataParallel, tensorParallel}));
    llvm::StringMap<int64_t> sizes{{"pp", 1}, {"dp", dataParallel}, {"tp", tensorParallel}};
    llvm::StringMap<int64_t> pinned;
    for (const std::string &entry : tpShards) {
      auto [name, dimText] = StringRef(entry).rsplit(':');
      int64_t dim;
      if (name.empty() || dimText.getAsInteger(10, dim) || dim < 0) {
        module.emitError() << "tp-shard '" << entry << "': expected NAME:DIM";
        return signalPassFailure();
      }
      pinned[name] = dim;
    }
    // Every pin names a parameter and one of its dimensions.
    llvm::StringMap<int64_t> ranks;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (auto param = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName))
        ranks[param.getValue()] =
            llvm::cast<RankedTensorType>(step.getArgument(i).getType()).getRank();
    for (const auto &pin : pinned) {
      auto rank = ranks.find(pin.getKey());
      if (rank == ranks.end() || pin.getValue() >= rank->second) {
        module.emitError() << "tp-shard '" << pin.getKey() << ":" << pin.getValue()
                           << "': " << (rank == ranks.end() ? "no parameter of that name"
                                                            : "no such dimension");
        return signalPassFailure();
      }
    }
    if (failed(Partitioner(module, std::move(sizes), std::move(pinned)).run(step)))
      return signalPassFailure();
  }
};

} // namespace
} // namespace ppc
