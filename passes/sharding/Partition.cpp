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
// Which layouts the arguments get is the planner's choice
// (ppc-plan-shardings records it as each argument's ppc.sharding); without
// a plan, data inputs are split along their batch over dp and everything
// else is replicated. How each op's layouts follow from its operands' is
// decided in Layout.cpp, which the planner prices the same way.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcAttrs.h"
#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Provenance.h"
#include "passes/Recognition.h"
#include "passes/sharding/Layout.h"
#include "passes/sharding/LocalForms.h"
#include "passes/sharding/ShardingRules.h"
#include "runtime/Printable.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_PARTITION
#include "passes/Passes.h.inc"

namespace {

class Partitioner {
public:
  Partitioner(ModuleOp module, AxisSizes axisSizes, bool sequenceParallel, int64_t zero)
      : module(module), axisSizes(std::move(axisSizes)), builder(module.getContext()),
        sequenceParallel(sequenceParallel), zero(zero) {}

  LogicalResult run(func::FuncOp func);

private:
  FailureOr<RankedTensorType> localType(Value global, const Layout &layout, Operation *at);
  Layout argumentLayout(func::FuncOp func, unsigned i);
  /// ZeRO: the layouts of the model states over dp (see the pass description).
  void shardModelStates(func::FuncOp func, llvm::MutableArrayRef<Layout> argLayouts);
  /// ZeRO: `op`'s operand `v` as the op uses it: a stage-3 parameter is
  /// gathered once per micro-batch and direction.
  std::pair<Value, Layout> gatheredParameter(Operation *op, Value v);
  /// ZeRO: reduces the gradients among `op`'s results to their shards.
  void reduceGradients(Operation *op);
  /// ZeRO stage 3: a value computed from gathered parameters alone (a
  /// transposed weight) used in another micro-batch or direction than
  /// where it was computed is recomputed there from a fresh gather.
  void regatherPerDirection(Block *body);
  LogicalResult partitionOp(Operation *op);
  /// The sharding rule of `op` (looked up once), or null.
  const ShardingRule *ruleOf(Operation *op) {
    auto [it, inserted] = rules.try_emplace(op);
    if (inserted)
      it->second = ShardingRuleRegistry::get().lookup(op);
    return it->second ? &*it->second : nullptr;
  }
  /// `local` (a value of layout `from`) converted to layout `to`.
  /// `why` says what asked for the layout change (ppc.why on the
  /// collectives made).
  Value convert(Value local, const Layout &from, const Layout &to, Location loc, Value global,
                llvm::StringRef why);
  Value allReduce(Value v, llvm::ArrayRef<std::string> axes, Location loc,
                  ReductionKind kind = ReductionKind::Sum);
  /// `v` after an all-gather, all-slice or reduce-scatter `step` of its
  /// dimension `step.dim`, seen as `step.blocks` blocks: block by block.
  Value blockwise(const ConversionStep &step, Value v, Location loc);
  ArrayAttr axesAttr(llvm::ArrayRef<std::string> axes);
  FlatSymbolRefAttr meshRef() { return FlatSymbolRefAttr::get(builder.getContext(), "mesh"); }

  ModuleOp module;
  AxisSizes axisSizes;
  OpBuilder builder;
  IRMapping mapping;
  llvm::DenseMap<Value, Layout> layouts;
  llvm::DenseMap<Operation *, std::optional<ShardingRule>> rules;
  /// Layouts results are sliced to as soon as they are computed.
  llvm::DenseMap<Value, Layout> hints;
  bool sequenceParallel;
  int64_t zero;
  /// ZeRO: for each parameter (by index among the step's parameters), its
  /// argument number and the layout its gradient is reduced to (its own
  /// layout split over dp; equal to it when the parameter cannot be split).
  llvm::SmallVector<unsigned> paramArgs;
  llvm::SmallVector<Layout> gradientShards;
  /// Stage-3 gathers by (argument, micro-batch, backward).
  std::map<std::tuple<unsigned, int64_t, bool>, Value> gathers;
  std::optional<OperandFacts> facts;
  /// Conversions done already: a value converted once serves every use.
  std::map<std::pair<void *, std::string>, Value> converted;
};

ArrayAttr Partitioner::axesAttr(llvm::ArrayRef<std::string> axes) {
  llvm::SmallVector<Attribute> names;
  for (const std::string &a : axes)
    names.push_back(builder.getStringAttr(a));
  return builder.getArrayAttr(names);
}

static std::string valueName(Value global);

FailureOr<RankedTensorType> Partitioner::localType(Value global, const Layout &layout,
                                                   Operation *at) {
  auto type = llvm::cast<RankedTensorType>(global.getType());
  auto shape = localShape(type.getShape(), layout, axisSizes);
  if (shape)
    return type.clone(*shape);
  for (auto [d, axes] : llvm::enumerate(layout.dims)) {
    int64_t parts = groupSize(axisSizes, axes) * (axes.empty() ? 1 : layout.blocks[d]);
    if (type.getDimSize(d) % parts == 0)
      continue;
    std::string names;
    for (const std::string &a : axes)
      names += (names.empty() ? "" : ", ") + a;
    auto diag = at->emitError() << "'" << printable(valueName(global)) << "': dimension " << d
                                << " of size " << type.getDimSize(d)
                                << " cannot be split over mesh axes [" << names << "] of size "
                                << groupSize(axisSizes, axes);
    if (layout.blocks[d] != 1)
      diag << " in " << layout.blocks[d] << " blocks";
    return diag;
  }
  return at->emitError() << "cannot lay out " << type << " as " << layout.str();
}

Layout Partitioner::argumentLayout(func::FuncOp func, unsigned i) {
  if (auto planned = func.getArgAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName))
    return fromAttr(planned);
  auto type = llvm::cast<RankedTensorType>(func.getArgument(i).getType());
  Layout layout = Layout::replicated(type.getRank());
  // Without a plan: the batch of every data input on the data axis.
  if (func.getArgAttr(i, PpcDialect::kInputAttrName) && type.getRank() > 0 &&
      axisSizes.lookup("dp") > 1)
    layout.dims[0] = {"dp"};
  return layout;
}

LogicalResult Partitioner::partitionOp(Operation *op) {
  const ShardingRule *rule = ruleOf(op);
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
  llvm::SmallVector<std::pair<Value, Layout>> operands;
  for (Value v : op->getOperands())
    operands.push_back(gatheredParameter(op, v));
  llvm::SmallVector<const Layout *> in;
  for (auto &[local, layout] : operands)
    in.push_back(&layout);
  OperandInfo info = facts->of(op);
  OpLayouts decided = layoutsForOp(op, *rule, in, axisSizes, &info);

  OpBuilder::InsertionGuard guard(builder);
  IRMapping local;
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    local.map(v, convert(operands[i].first, *in[i], decided.operands[i], op->getLoc(), v,
                         llvm::formatv("operand {0} of {1}", i, op->getName()).str()));
  Operation *clone = builder.clone(*op, local);
  for (auto [r, result] : llvm::enumerate(op->getResults())) {
    const Layout &out = decided.results[r];
    auto type = localType(result, out, op);
    if (failed(type))
      return failure();
    clone->getResult(r).setType(*type);
    layouts[result] = out;
  }
  // What the shard runs: the clone, or the op's local form (LocalForms.cpp).
  llvm::SmallVector<Value> results(clone->getResults());
  auto cause = builder.getStringAttr(op->getNumResults() ? valueName(op->getResult(0))
                                                         : op->getName().getStringRef().str());
  LocalFormContext context{
      builder,
      op,
      *rule,
      decided,
      axisSizes,
      [&](Value v, llvm::ArrayRef<std::string> axes, ReductionKind kind) -> Value {
        Value reduced = allReduce(v, axes, op->getLoc(), kind);
        reduced.getDefiningOp()->setAttr(PpcDialect::kValueAttrName, cause);
        reduced.getDefiningOp()->setAttr(
            kWhyAttrName,
            builder.getStringAttr(llvm::formatv("{0} of {1}'s shards over [{2}] (it contracts "
                                                "or reduces a dimension split there)",
                                                stringifyReductionKind(kind), op->getName(),
                                                llvm::join(axes, ", "))
                                      .str()));
        return reduced;
      },
      [&](llvm::ArrayRef<std::string> axes) -> Value {
        return builder.create<AxisIndexOp>(op->getLoc(), meshRef(), axesAttr(axes));
      }};
  if (failed(buildLocalForm(context, clone, results)))
    return failure();
  for (auto [result, value] : llvm::zip(op->getResults(), results)) {
    mapping.map(result, value);
    if (Operation *def = value.getDefiningOp(); def && def->getNumResults() == 1)
      def->setAttr(PpcDialect::kShardingsAttrName,
                   builder.getArrayAttr({toAttr(builder.getContext(), layouts[result])}));
  }
  // Results wanted split (gradients of split parameters) are sliced now.
  for (Value result : op->getResults()) {
    auto hint = hints.find(result);
    if (hint == hints.end())
      continue;
    Layout sliced = applyHint(layouts[result], hint->second);
    if (sliced == layouts[result])
      continue;
    mapping.map(result,
                convert(mapping.lookup(result), layouts[result], sliced, op->getLoc(), result,
                        "the gradient of a split parameter, taken to the parameter's layout"));
    layouts[result] = sliced;
  }
  reduceGradients(op);
  return success();
}

void Partitioner::shardModelStates(func::FuncOp func, llvm::MutableArrayRef<Layout> argLayouts) {
  int64_t dp = axisSizes.lookup("dp");
  llvm::StringMap<unsigned> paramByName;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto name = func.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName)) {
      paramByName[name.getValue()] = paramArgs.size();
      paramArgs.push_back(i);
    }
  auto shardOverDp = [&](unsigned arg, Layout layout) {
    auto shape = llvm::cast<RankedTensorType>(func.getArgument(arg).getType()).getShape();
    if (auto d = zeroShardDim(shape, layout, zero == 0 ? 1 : dp)) {
      layout.dims[*d] = {"dp"};
      layout.blocks[*d] = 1;
    }
    return layout;
  };
  for (unsigned arg : paramArgs)
    gradientShards.push_back(shardOverDp(arg, argLayouts[arg]));
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto state = func.getArgAttrOfType<StringAttr>(i, PpcDialect::kStateAttrName);
    if (state && zero >= 1)
      argLayouts[i] = shardOverDp(i, argLayouts[i]);
  }
  if (zero >= 3)
    for (auto [p, arg] : llvm::enumerate(paramArgs))
      argLayouts[arg] = gradientShards[p];
}

std::pair<Value, Layout> Partitioner::gatheredParameter(Operation *op, Value v) {
  auto arg = llvm::dyn_cast<BlockArgument>(v);
  auto mb = intAttrOf(op, kMicroBatchAttrName);
  if (zero < 3 || !arg || !mb)
    return {mapping.lookup(v), layouts[v]};
  auto p = llvm::find(paramArgs, arg.getArgNumber());
  if (p == paramArgs.end())
    return {mapping.lookup(v), layouts[v]};
  // The parameter's own layout without dp.
  Layout whole = layouts[v];
  for (AxisList &axes : whole.dims)
    llvm::erase(axes, "dp");
  bool backward = op->hasAttr(kBackwardOfAttrName);
  Value &gathered = gathers[{arg.getArgNumber(), *mb, backward}];
  if (!gathered) {
    // A fresh gather, not the one an earlier micro-batch used.
    converted.erase({mapping.lookup(v).getAsOpaquePointer(), whole.str()});
    gathered = convert(mapping.lookup(v), layouts[v], whole, op->getLoc(), v,
                       llvm::formatv("ZeRO 3: the parameter, gathered for micro-batch {0}'s {1}",
                                     *mb, backward ? "backward" : "forward")
                           .str());
  }
  return {gathered, whole};
}

void Partitioner::regatherPerDirection(Block *body) {
  // Values computed from parameters and constants alone, and those of them
  // that use a stage-3 gather (an all_gather over dp of an argument).
  llvm::DenseSet<Value> stationary, gathered;
  for (Operation &op : *body) {
    bool isStationary = llvm::all_of(op.getOperands(), [&](Value v) {
      auto arg = llvm::dyn_cast<BlockArgument>(v);
      return arg ? llvm::is_contained(paramArgs, arg.getArgNumber()) : stationary.contains(v);
    });
    if (!isStationary || op.getNumResults() == 0)
      continue;
    bool fromGather = llvm::any_of(op.getOperands(), [&](Value v) { return gathered.contains(v); });
    if (auto gather = llvm::dyn_cast<AllGatherOp>(op))
      fromGather |= llvm::isa<BlockArgument>(gather.getInput()) &&
                    llvm::is_contained(gather.getAxisNames(), "dp");
    for (Value r : op.getResults()) {
      stationary.insert(r);
      if (fromGather)
        gathered.insert(r);
    }
  }
  // The group (micro-batch, direction) of each use; the first group that
  // uses a gathered value keeps it, the others get copies.
  using Group = std::pair<int64_t, bool>;
  llvm::DenseMap<Value, Group> owner;
  std::map<std::pair<void *, Group>, Value> copies;
  std::function<Value(Value, Group, Operation *)> copyFor = [&](Value v, Group group,
                                                                Operation *before) -> Value {
    if (!gathered.contains(v))
      return v;
    auto key = std::make_pair(v.getAsOpaquePointer(), group);
    if (auto it = copies.find(key); it != copies.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    IRMapping map;
    for (Value operand : def->getOperands())
      map.map(operand, copyFor(operand, group, before));
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(before);
    Operation *clone = builder.clone(*def, map);
    for (auto [old, fresh] : llvm::zip(def->getResults(), clone->getResults()))
      copies[{old.getAsOpaquePointer(), group}] = fresh;
    return copies[key];
  };
  for (Operation &op : llvm::make_early_inc_range(*body)) {
    auto mb = intAttrOf(&op, kMicroBatchAttrName);
    if (!mb)
      continue;
    Group group{*mb, op.hasAttr(kBackwardOfAttrName)};
    for (OpOperand &use : op.getOpOperands()) {
      if (!gathered.contains(use.get()))
        continue;
      auto [it, first] = owner.try_emplace(use.get(), group);
      if (!first && it->second != group)
        use.set(copyFor(use.get(), group, &op));
    }
  }
}

void Partitioner::reduceGradients(Operation *op) {
  if (zero == 0)
    return;
  StringRef mark = zero == 1 ? kStepGradAttrName : kMicroBatchGradAttrName;
  for (Value result : op->getResults()) {
    auto p = gradientOf(result, mark);
    if (!p)
      continue;
    Layout &layout = layouts[result];
    if (layout == gradientShards[*p])
      continue;
    mapping.map(result,
                convert(mapping.lookup(result), layout, gradientShards[*p], op->getLoc(), result,
                        zero == 1 ? "ZeRO 1: the step's gradient, reduced to the shard whose "
                                    "optimizer state this rank holds"
                                  : "ZeRO 2/3: the micro-batch's gradient, reduced to the shard "
                                    "this rank keeps"));
    layout = gradientShards[*p];
  }
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
  for (StringRef attr :
       {PpcDialect::kParamAttrName, PpcDialect::kInputAttrName, PpcDialect::kStateAttrName})
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr))
      return name.getValue().str();
  return "argument " + std::to_string(arg.getArgNumber());
}

Value Partitioner::convert(Value local, const Layout &from, const Layout &to, Location loc,
                           Value global, llvm::StringRef why) {
  if (from == to)
    return local;
  auto key = std::make_pair(local.getAsOpaquePointer(), to.str());
  if (auto it = converted.find(key); it != converted.end())
    return it->second;
  // A splat constant is made in the layout it is wanted in, where it is
  // wanted: slicing a replicated one kept it whole on every rank until then
  // (the QKV gradient's zeros, [batch, T, 3d] of the global batch, held
  // through the forward by every data-parallel rank).
  auto globalType = llvm::cast<RankedTensorType>(global.getType());
  if (auto splat = splatValue(local); splat && from.partial.empty() && to.partial.empty()) {
    if (auto shape = localShape(globalType.getShape(), to, axisSizes)) {
      Value made =
          builder.create<ConstantOp>(loc, DenseElementsAttr::get(globalType.clone(*shape), *splat));
      made.getDefiningOp()->setAttr(PpcDialect::kValueAttrName,
                                    builder.getStringAttr(valueName(global)));
      converted[key] = made;
      return made;
    }
  }
  Value v = local;
  auto cause = builder.getStringAttr(valueName(global));
  for (const ConversionStep &step : conversionSteps(globalType.getShape(), from, to, axisSizes)) {
    switch (step.kind) {
    case ConversionStep::AllReduce:
      v = allReduce(v, step.axes, loc);
      break;
    case ConversionStep::AllGather:
    case ConversionStep::AllSlice:
    case ConversionStep::ReduceScatter:
      v = blockwise(step, v, loc);
      break;
    case ConversionStep::ToPartial: {
      // Kept at position 0 of the axes, zero elsewhere.
      auto type = llvm::cast<RankedTensorType>(v.getType());
      auto scalarOf = [&](Type element, Attribute value) {
        return builder.create<ConstantOp>(
            loc, DenseElementsAttr::get(RankedTensorType::get({}, element), value));
      };
      Value index = builder.create<AxisIndexOp>(loc, meshRef(), axesAttr(step.axes));
      Value first = builder.create<EqualOp>(
          loc, index, scalarOf(builder.getI64Type(), builder.getI64IntegerAttr(0)));
      Value zero = scalarOf(type.getElementType(), builder.getZeroAttr(type.getElementType()));
      v = builder.create<WhereOp>(loc, first, v, zero);
      continue;
    }
    }
    // The collective (a blocked one sits between reshapes).
    Operation *collective = v.getDefiningOp();
    if (llvm::isa<ReshapeOp>(collective))
      collective = collective->getOperand(0).getDefiningOp();
    collective->setAttr(PpcDialect::kValueAttrName, cause);
    collective->setAttr(kWhyAttrName,
                        builder.getStringAttr(why + ": " + from.str() + " -> " + to.str()));
  }
  converted[key] = v;
  return v;
}

Value Partitioner::allReduce(Value v, llvm::ArrayRef<std::string> axes, Location loc,
                             ReductionKind kind) {
  return builder.create<AllReduceOp>(loc, v.getType(), v, meshRef(), axesAttr(axes), kind);
}

/// `v` with dimension `dim` seen as [blocks, size / blocks] (identity for
/// one block), and back.
static Value splitBlocks(OpBuilder &builder, Location loc, Value v, int64_t dim, int64_t blocks) {
  if (blocks == 1)
    return v;
  auto type = llvm::cast<RankedTensorType>(v.getType());
  llvm::SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= blocks;
  shape.insert(shape.begin() + dim, blocks);
  return builder.create<ReshapeOp>(loc, type.clone(shape), v);
}

static Value mergeBlocks(OpBuilder &builder, Location loc, Value v, int64_t dim, int64_t blocks) {
  if (blocks == 1)
    return v;
  auto type = llvm::cast<RankedTensorType>(v.getType());
  llvm::SmallVector<int64_t> shape(type.getShape());
  shape[dim + 1] *= blocks;
  shape.erase(shape.begin() + dim);
  return builder.create<ReshapeOp>(loc, type.clone(shape), v);
}

Value Partitioner::blockwise(const ConversionStep &step, Value v, Location loc) {
  int64_t at = step.blocks == 1 ? step.dim : step.dim + 1;
  v = splitBlocks(builder, loc, v, step.dim, step.blocks);
  auto type = llvm::cast<RankedTensorType>(v.getType());
  llvm::SmallVector<int64_t> shape(type.getShape());
  int64_t parts = groupSize(axisSizes, step.axes);
  ArrayAttr axes = axesAttr(step.axes);
  if (step.kind == ConversionStep::AllGather) {
    shape[at] *= parts;
    v = builder.create<AllGatherOp>(loc, type.clone(shape), v, meshRef(), axes, at);
  } else if (step.kind == ConversionStep::AllSlice) {
    shape[at] /= parts;
    v = builder.create<AllSliceOp>(loc, type.clone(shape), v, meshRef(), axes, at);
  } else {
    shape[at] /= parts;
    v = builder.create<ReduceScatterOp>(loc, type.clone(shape), v, meshRef(), axes, at,
                                        ReductionKind::Sum);
  }
  return mergeBlocks(builder, loc, v, step.dim, step.blocks);
}

LogicalResult Partitioner::run(func::FuncOp func) {
  Block &body = func.getBody().front();
  llvm::SmallVector<Type> argTypes;
  llvm::SmallVector<Layout> argLayouts;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    argLayouts.push_back(argumentLayout(func, i));
  shardModelStates(func, argLayouts);
  for (auto [i, layout] : llvm::enumerate(argLayouts)) {
    auto type = localType(func.getArgument(i), layout, func);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
  }
  builder.setInsertionPoint(func);
  auto spmd = builder.create<func::FuncOp>(func.getLoc(), func.getSymName(),
                                           builder.getFunctionType(argTypes, {}));
  spmd.setAllArgAttrs(func.getAllArgAttrs());
  for (StringRef name : {PpcDialect::kPlanAttrName, PpcDialect::kZeroAttrName})
    if (Attribute attr = func->getAttr(name))
      spmd->setAttr(name, attr);
  Block *entry = spmd.addEntryBlock();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    mapping.map(arg, entry->getArgument(i));
    layouts[arg] = argLayouts[i];
  }
  // Results: updated parameters and state keep their argument's layout;
  // everything else (loss, metrics) is returned whole on every rank.
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  llvm::SmallVector<Layout> resultLayouts = returnLayouts(func, argLayouts);
  hints = layoutHints(body, resultLayouts, [&](Operation *op) { return ruleOf(op); });
  facts.emplace(func, [&](Operation *op) { return ruleOf(op); }, sequenceParallel);

  builder.setInsertionPointToEnd(entry);
  for (Operation &op : body.without_terminator())
    if (failed(partitionOp(&op)))
      return failure();

  if (zero >= 3)
    regatherPerDirection(entry);
  llvm::SmallVector<Value> results;
  for (auto [v, want] : llvm::zip(ret.getOperands(), resultLayouts))
    results.push_back(convert(mapping.lookup(v), layouts[v], want, ret.getLoc(), v,
                              "a result of the step (updated state keeps its argument's layout; "
                              "the rest is returned whole)"));
  builder.create<func::ReturnOp>(ret.getLoc(), results);
  // Constants: those every use of which was made in its own layout go; the
  // others move to just before their first use. Canonicalization hoisted
  // them all to the step's start, where the memory plan would hold a
  // tensor-sized one (the QKV gradient's zeros) from then on.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*entry))) {
    if (!llvm::isa<ConstantOp>(op))
      continue;
    if (op.use_empty()) {
      op.erase();
      continue;
    }
    Operation *first = nullptr;
    for (Operation *user : op.getUsers()) {
      Operation *at = entry->findAncestorOpInBlock(*user);
      if (at && (!first || at->isBeforeInBlock(first)))
        first = at;
    }
    if (first && first != op.getNextNode())
      op.moveBefore(first);
  }
  spmd.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  spmd.setAllResultAttrs(func.getAllResultAttrs());
  for (auto [i, layout] : llvm::enumerate(argLayouts))
    spmd.setArgAttr(i, PpcDialect::kShardingAttrName, toAttr(builder.getContext(), layout));
  for (auto [i, layout] : llvm::enumerate(resultLayouts))
    spmd.setResultAttr(i, PpcDialect::kShardingAttrName, toAttr(builder.getContext(), layout));
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
    auto sizes = declareMesh(module, dataParallel, tensorParallel, pipelineParallel);
    if (failed(sizes))
      return signalPassFailure();
    int64_t stage = zero;
    if (stage < 0) {
      auto recorded = step->getAttrOfType<IntegerAttr>(PpcDialect::kZeroAttrName);
      stage = recorded ? recorded.getInt() : 0;
    }
    if (stage > 3) {
      step.emitError() << "ZeRO stage " << stage << " is not one of 0, 1, 2, 3";
      return signalPassFailure();
    }
    step->setAttr(PpcDialect::kZeroAttrName,
                  IntegerAttr::get(IntegerType::get(&getContext(), 64), stage));
    if (failed(Partitioner(module, std::move(*sizes), sequenceParallel, stage).run(step)))
      return signalPassFailure();
  }
};

} // namespace
} // namespace ppc
