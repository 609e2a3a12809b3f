//===- Layout.cpp - layouts op by op, and the collectives between them ----===//

#include "passes/sharding/Layout.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include <set>

using namespace mlir;

namespace ppc {

std::string Layout::str() const {
  std::string s = "[";
  for (auto [i, axes] : llvm::enumerate(dims)) {
    if (i)
      s += ", ";
    if (!axes.empty() && blocks[i] != 1)
      s += std::to_string(blocks[i]) + " * ";
    s += "[";
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

ShardingAttr toAttr(MLIRContext *context, const Layout &layout) {
  llvm::SmallVector<llvm::SmallVector<StringRef>> dims;
  for (const auto &axes : layout.dims)
    dims.emplace_back(axes.begin(), axes.end());
  llvm::SmallVector<StringRef> partial(layout.partial.begin(), layout.partial.end());
  llvm::SmallVector<int64_t> blocks;
  for (auto [axes, b] : llvm::zip(layout.dims, layout.blocks))
    blocks.push_back(axes.empty() ? 1 : b);
  return ShardingAttr::get(context, "mesh", dims, partial, blocks);
}

Layout fromAttr(ShardingAttr sharding) {
  Layout layout = Layout::replicated(sharding.getRank());
  for (auto [d, axes] : llvm::enumerate(sharding.getDimAxes())) {
    for (StringAttr a : axes)
      layout.dims[d].push_back(a.getValue().str());
    layout.blocks[d] = sharding.getBlocks(d);
  }
  for (StringAttr a : sharding.getPartialAxes())
    layout.partial.push_back(a.getValue().str());
  return layout;
}

FailureOr<AxisSizes> declareMesh(ModuleOp module, int64_t dp, int64_t tp, int64_t pp) {
  if (dp < 1 || tp < 1 || pp < 1)
    return module.emitError() << "mesh axes must have at least one rank";
  auto mesh = module.lookupSymbol<MeshOp>("mesh");
  if (!mesh) {
    OpBuilder builder(module.getBodyRegion());
    mesh =
        builder.create<MeshOp>(module.getLoc(), "mesh", builder.getStrArrayAttr({"pp", "dp", "tp"}),
                               builder.getDenseI64ArrayAttr({pp, dp, tp}));
  }
  AxisSizes sizes;
  for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
    sizes[name] = size;
  if (sizes.lookup("dp") != dp || sizes.lookup("tp") != tp || sizes.lookup("pp") != pp)
    return module.emitError() << "@mesh has dp=" << sizes.lookup("dp")
                              << ", tp=" << sizes.lookup("tp") << ", pp=" << sizes.lookup("pp")
                              << ", but dp=" << dp << ", tp=" << tp << ", pp=" << pp
                              << " were asked for";
  return sizes;
}

std::optional<int64_t> zeroShardDim(llvm::ArrayRef<int64_t> shape, const Layout &layout,
                                    int64_t dp) {
  if (dp == 1 || llvm::any_of(layout.dims,
                              [](const AxisList &axes) { return llvm::is_contained(axes, "dp"); }))
    return std::nullopt;
  for (auto [d, axes] : llvm::enumerate(layout.dims))
    if (axes.empty() && shape[d] % dp == 0)
      return d;
  return std::nullopt;
}

int64_t groupSize(const AxisSizes &sizes, llvm::ArrayRef<std::string> axes) {
  int64_t n = 1;
  for (const std::string &a : axes)
    n *= sizes.lookup(a);
  return n;
}

std::optional<llvm::SmallVector<int64_t>> localShape(llvm::ArrayRef<int64_t> shape,
                                                     const Layout &layout, const AxisSizes &sizes) {
  llvm::SmallVector<int64_t> local(shape);
  for (auto [d, axes] : llvm::enumerate(layout.dims)) {
    int64_t n = groupSize(sizes, axes);
    if (shape[d] % (n * (axes.empty() ? 1 : layout.blocks[d])) != 0)
      return std::nullopt;
    local[d] /= n;
  }
  return local;
}

namespace {

/// Which operands of `op` may stay partial sums, and the partial axes of
/// its result then: ops linear in those operands.
struct PartialFlow {
  llvm::SmallVector<bool> keep;
  AxisList resultPartial;
  /// Whole operands are to be made partial over `resultPartial`.
  bool makePartial = false;
};

PartialFlow partialFlow(Operation *op, llvm::ArrayRef<const Layout *> in) {
  PartialFlow flow;
  flow.keep.assign(in.size(), false);
  auto partialOf = [&](unsigned i) -> const AxisList & { return in[i]->partial; };
  auto anyPartial = llvm::any_of(in, [](const Layout *l) { return !l->partial.empty(); });
  if (!anyPartial)
    return flow;
  auto isScalar = [](Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getNumElements() == 1;
  };
  // Every operand equally partial: sums and concatenation (the op's
  // linearity is declared on it: Ppc_Additive, PpcOps.td).
  if (op->hasTrait<AdditiveTrait>()) {
    if (llvm::all_of(in, [&](const Layout *l) { return l->partial == partialOf(0); })) {
      flow.keep.assign(in.size(), true);
      flow.resultPartial = partialOf(0);
      return flow;
    }
    // A scalar sum of partial and whole terms (a gradient norm over split
    // and replicated gradients): the whole terms become partial locally,
    // and one all-reduce serves the whole sum.
    const AxisList *common = nullptr;
    for (const Layout *l : in) {
      if (l->partial.empty())
        continue;
      if (common && *common != l->partial)
        return flow;
      common = &l->partial;
    }
    if (isScalar(op->getResult(0))) {
      flow.keep.assign(in.size(), true);
      flow.resultPartial = *common;
      flow.makePartial = true;
    }
    return flow;
  }
  // One operand partial, the op linear in it (Ppc_LinearInFirst,
  // Ppc_LinearInEach, a cast to floats): contractions with a full value,
  // data movement, reductions that sum. An elementwise product with a full
  // tensor is linear too, but letting a partial value into one branch of an
  // elementwise computation makes every branch reduce its own copy; reduced
  // once where it meets elementwise math, it serves all of them: an
  // elementwise op keeps it only to scale by full scalars.
  int partialOperand = -1, count = 0;
  for (unsigned i = 0; i < in.size(); ++i)
    if (!in[i]->partial.empty())
      partialOperand = i, ++count;
  if (count != 1 || !isLinearIn(op, partialOperand))
    return flow;
  if (llvm::isa<ElementwiseOpInterface>(op) && op->getNumOperands() > 1 &&
      !llvm::all_of(llvm::enumerate(op->getOperands()), [&](auto operand) {
        return int(operand.index()) == partialOperand || isScalar(operand.value());
      }))
    return flow;
  flow.keep[partialOperand] = true;
  flow.resultPartial = partialOf(partialOperand);
  return flow;
}

/// The factor a dimension's split falls on: the dimension, with factors
/// `factors`, is viewed as `blocks` blocks each split in `parts`. Returns
/// the factor and its own blocks, or -1.
std::pair<int64_t, int64_t> splitFactor(const ShardingRule &rule, llvm::ArrayRef<int64_t> factors,
                                        int64_t blocks, int64_t parts) {
  int64_t before = 1;
  for (int64_t f : factors) {
    int64_t size = rule.factorSizes[f];
    if (size == 1)
      continue;
    if (blocks % before == 0 && blocks / before < size) {
      int64_t own = blocks / before;
      if (size % own != 0 || (size / own) % parts != 0)
        return {-1, 1};
      return {f, own};
    }
    before *= size;
  }
  return {-1, 1};
}

} // namespace

OpLayouts layoutsForOp(Operation *op, const ShardingRule &rule,
                       llvm::ArrayRef<const Layout *> given, const AxisSizes &sizes,
                       const OperandInfo *info) {
  llvm::ArrayRef<int64_t> scatterDims;
  if (info)
    scatterDims = info->scatterDims;
  size_t numFactors = rule.factorSizes.size();
  PartialFlow flow = partialFlow(op, given);
  // Sequence parallelism: a partial sum over tp that the op cannot keep is
  // reduce-scattered along its sequence dimension, so the op sees it split.
  llvm::SmallVector<const Layout *> in(given.begin(), given.end());
  llvm::SmallVector<Layout> scattered(in.size());
  for (auto [i, dim] : llvm::enumerate(scatterDims)) {
    if (dim < 0 || flow.keep[i] || in[i]->partial != AxisList{"tp"} || !in[i]->dims[dim].empty())
      continue;
    scattered[i] = *in[i];
    scattered[i].partial.clear();
    scattered[i].dims[dim] = {"tp"};
    scattered[i].blocks[dim] = 1;
    in[i] = &scattered[i];
  }
  // Each split dimension of an operand claims its factor for its axes. On
  // a conflict (two claims on one axis) the first claim wins and the other
  // operand is converted: stationary operands (weights) claim first, as
  // Megatron keeps weights in place and moves activations; then splits of
  // factors the results keep (a reduction factor's split would leave the
  // result a partial sum, to be reduced later); then operand order.
  struct Claim {
    int priority;
    size_t operand, dim;
    int64_t factor, blocks;
  };
  llvm::SmallVector<Claim> claims;
  for (auto [i, layout] : llvm::enumerate(in)) {
    for (auto [d, axes] : llvm::enumerate(layout->dims)) {
      if (axes.empty() || d >= rule.operands[i].size())
        continue;
      auto [f, blocks] =
          splitFactor(rule, rule.operands[i][d], layout->blocks[d], groupSize(sizes, axes));
      if (f < 0 || rule.factorKinds[f] == FactorKind::NeedReplication)
        continue;
      bool reduces = rule.factorKinds[f] == FactorKind::Reduction ||
                     rule.factorKinds[f] == FactorKind::IndexedReduction;
      bool stationary = info && i < info->stationary.size() && info->stationary[i];
      claims.push_back({stationary ? 0 : reduces ? 2 : 1, i, d, f, blocks});
    }
  }
  llvm::stable_sort(claims, [](const Claim &a, const Claim &b) { return a.priority < b.priority; });

  llvm::SmallVector<AxisList> factorAxes(numFactors);
  llvm::SmallVector<int64_t> factorBlocks(numFactors, 1);
  std::set<std::string> used;
  for (const Claim &claim : claims) {
    const AxisList &axes = in[claim.operand]->dims[claim.dim];
    if (!factorAxes[claim.factor].empty() ||
        llvm::any_of(axes, [&](const std::string &a) { return used.count(a); }))
      continue;
    factorAxes[claim.factor] = axes;
    factorBlocks[claim.factor] = claim.blocks;
    used.insert(axes.begin(), axes.end());
  }
  // One split factor per dimension: a dimension with two would hold a
  // non-contiguous, non-blocked part. Keep the major one.
  auto dropMinorSplits = [&](llvm::ArrayRef<llvm::SmallVector<int64_t, 1>> dimFactors) {
    for (const auto &factors : dimFactors) {
      bool seen = false;
      for (int64_t f : factors) {
        if (factorAxes[f].empty())
          continue;
        if (seen)
          factorAxes[f].clear();
        seen = true;
      }
    }
  };
  for (const auto &dims : rule.operands)
    dropMinorSplits(dims);
  for (const auto &dims : rule.results)
    dropMinorSplits(dims);

  auto layoutOf = [&](llvm::ArrayRef<llvm::SmallVector<int64_t, 1>> dimFactors) {
    Layout layout = Layout::replicated(dimFactors.size());
    for (auto [d, factors] : llvm::enumerate(dimFactors)) {
      int64_t before = 1;
      for (int64_t f : factors) {
        if (!factorAxes[f].empty()) {
          layout.dims[d] = factorAxes[f];
          layout.blocks[d] = before * factorBlocks[f];
        }
        before *= rule.factorSizes[f];
      }
    }
    return layout;
  };

  OpLayouts out;
  // A partial sum cannot also be split over its axes: if a factor is split
  // over an axis a kept operand is partial over, reduce the partial sums
  // first.
  std::set<std::string> splitAxes;
  for (const AxisList &axes : factorAxes)
    splitAxes.insert(axes.begin(), axes.end());
  if (llvm::any_of(flow.resultPartial, [&](const std::string &a) { return splitAxes.count(a); })) {
    flow.keep.assign(in.size(), false);
    flow.resultPartial.clear();
    flow.makePartial = false;
  }
  for (auto [i, dims] : llvm::enumerate(rule.operands)) {
    Layout want = layoutOf(dims);
    if (flow.keep[i])
      want.partial = flow.makePartial ? flow.resultPartial : in[i]->partial;
    out.operands.push_back(std::move(want));
  }
  for (auto [f, axes] : llvm::enumerate(factorAxes))
    if (rule.factorKinds[f] == FactorKind::Reduction ||
        rule.factorKinds[f] == FactorKind::IndexedReduction)
      llvm::append_range(out.reductionAxes, axes);
  for (const auto &dims : rule.results) {
    Layout result = layoutOf(dims);
    result.partial = flow.resultPartial;
    llvm::append_range(result.partial, out.reductionAxes);
    llvm::sort(result.partial);
    out.results.push_back(std::move(result));
  }
  out.factorAxes = std::move(factorAxes);
  out.factorBlocks = std::move(factorBlocks);
  return out;
}

llvm::SmallVector<std::optional<unsigned>> updatedArguments(func::FuncOp step) {
  llvm::StringMap<unsigned> argByName;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    for (StringRef attr : {PpcDialect::kParamAttrName, PpcDialect::kStateAttrName})
      if (auto name = step.getArgAttrOfType<StringAttr>(i, attr))
        argByName[(attr + ":" + name.getValue()).str()] = i;
  llvm::SmallVector<std::optional<unsigned>> updated;
  for (unsigned r = 0; r < step.getNumResults(); ++r) {
    std::optional<unsigned> arg;
    for (StringRef attr : {PpcDialect::kParamAttrName, PpcDialect::kStateAttrName})
      if (auto name = step.getResultAttrOfType<StringAttr>(r, attr))
        if (auto it = argByName.find((attr + ":" + name.getValue()).str()); it != argByName.end())
          arg = it->second;
    updated.push_back(arg);
  }
  return updated;
}

llvm::SmallVector<Layout> returnLayouts(func::FuncOp step, llvm::ArrayRef<Layout> arguments) {
  llvm::SmallVector<Layout> layouts;
  for (auto [arg, type] : llvm::zip(updatedArguments(step), step.getResultTypes()))
    layouts.push_back(arg ? arguments[*arg]
                          : Layout::replicated(llvm::cast<RankedTensorType>(type).getRank()));
  return layouts;
}

llvm::DenseMap<Value, Layout>
layoutHints(Block &body, llvm::ArrayRef<Layout> returnLayouts,
            llvm::function_ref<const ShardingRule *(Operation *)> ruleOf) {
  llvm::DenseMap<Value, Layout> hints;
  auto hint = [&](Value v, const Layout &layout) {
    if (std::optional<Layout> wanted = asHint(layout))
      hints.try_emplace(v, std::move(*wanted));
  };
  for (auto [v, layout] : llvm::zip(body.getTerminator()->getOperands(), returnLayouts))
    hint(v, layout);
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (op.getNumResults() != 1)
      continue;
    auto it = hints.find(op.getResult(0));
    if (it == hints.end())
      continue;
    Layout wanted = it->second;
    for (unsigned i : hintedOperands(&op, ruleOf(&op)))
      hint(op.getOperand(i), wanted);
  }
  return hints;
}

std::optional<Layout> asHint(const Layout &layout) {
  Layout whole = layout;
  whole.partial.clear();
  if (whole.isReplicated())
    return std::nullopt;
  return whole;
}

llvm::SmallVector<unsigned, 2> hintedOperands(Operation *op, const ShardingRule *rule) {
  llvm::SmallVector<unsigned, 2> hinted;
  // Elementwise: the operands with exactly the result's factors (not
  // broadcast ones) want the result's layout.
  if (op->getNumResults() != 1 || !rule || rule->results.size() != 1 ||
      llvm::any_of(rule->factorKinds, [](FactorKind k) { return k != FactorKind::Parallel; }))
    return hinted;
  for (auto [i, dims] : llvm::enumerate(rule->operands))
    if (i < op->getNumOperands() && dims == rule->results[0])
      hinted.push_back(i);
  return hinted;
}

Layout applyHint(const Layout &computed, const Layout &hint) {
  if (computed.dims.size() != hint.dims.size() ||
      llvm::any_of(computed.dims, [](const AxisList &axes) { return !axes.empty(); }))
    return computed;
  // No axis may be both split and partial.
  for (const AxisList &axes : hint.dims)
    for (const std::string &a : axes)
      if (llvm::is_contained(computed.partial, a))
        return computed;
  Layout sliced = hint;
  sliced.partial = computed.partial;
  return sliced;
}

llvm::SmallVector<ConversionStep> conversionSteps(llvm::ArrayRef<int64_t> shape, const Layout &from,
                                                  const Layout &to, const AxisSizes &sizes) {
  llvm::SmallVector<ConversionStep> steps;
  if (from == to)
    return steps;
  auto local = localShape(shape, from, sizes);
  llvm::SmallVector<int64_t> current = local ? *local : llvm::SmallVector<int64_t>(shape);
  auto elements = [&] {
    int64_t n = 1;
    for (int64_t s : current)
      n *= s;
    return n;
  };
  auto slice = [&](size_t d) {
    current[d] /= groupSize(sizes, to.dims[d]);
    steps.push_back(
        {ConversionStep::AllSlice, to.dims[d], static_cast<int64_t>(d), to.blocks[d], elements()});
  };
  // Slices over axes the value is neither partial over nor split over
  // first (they only drop data); the others wait until those axes are free.
  auto busy = [&](const AxisList &axes) {
    return llvm::any_of(axes, [&](const std::string &a) {
      return llvm::is_contained(from.partial, a) ||
             llvm::any_of(from.dims,
                          [&](const AxisList &split) { return llvm::is_contained(split, a); });
    });
  };
  llvm::SmallVector<size_t> later;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (from.sameDim(to, d) || to.dims[d].empty())
      continue;
    if (from.dims[d].empty() && !busy(to.dims[d]))
      slice(d);
    else
      later.push_back(d);
  }
  if (!from.partial.empty() && to.partial.empty()) {
    // Reduced and split over the same axes at once: a reduce-scatter.
    auto scatter = llvm::find_if(
        later, [&](size_t d) { return from.dims[d].empty() && to.dims[d] == from.partial; });
    // Split over some of them (ZeRO's gradient shard over dp of a value
    // partial over dp and tp): reduce-scatter over those, then all-reduce
    // the shard over the rest. Per rank, (s-1)/s of the whole and
    // 2(r-1)/r of a 1/s shard, against 2(sr-1)/sr of the whole for one
    // all-reduce over all (s = r = 2: 1.0 against 1.5).
    auto some = llvm::find_if(later, [&](size_t d) {
      return from.dims[d].empty() && !to.dims[d].empty() &&
             to.dims[d].size() < from.partial.size() &&
             llvm::all_of(
                 to.dims[d],
                 [&](const std::string &a) { return llvm::is_contained(from.partial, a); });
    });
    if (scatter != later.end()) {
      size_t d = *scatter;
      steps.push_back({ConversionStep::ReduceScatter, from.partial, static_cast<int64_t>(d),
                       to.blocks[d], elements()});
      current[d] /= groupSize(sizes, to.dims[d]);
      later.erase(scatter);
    } else if (some != later.end()) {
      size_t d = *some;
      steps.push_back({ConversionStep::ReduceScatter, to.dims[d], static_cast<int64_t>(d),
                       to.blocks[d], elements()});
      current[d] /= groupSize(sizes, to.dims[d]);
      later.erase(some);
      AxisList rest;
      for (const std::string &a : from.partial)
        if (!llvm::is_contained(to.dims[d], a))
          rest.push_back(a);
      steps.push_back({ConversionStep::AllReduce, rest, -1, 1, elements()});
    } else {
      steps.push_back({ConversionStep::AllReduce, from.partial, -1, 1, elements()});
    }
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (from.dims[d].empty() || from.sameDim(to, d))
      continue;
    current[d] *= groupSize(sizes, from.dims[d]);
    steps.push_back({ConversionStep::AllGather, from.dims[d], static_cast<int64_t>(d),
                     from.blocks[d], elements()});
  }
  for (size_t d : later)
    slice(d);
  if (from.partial.empty() && !to.partial.empty())
    steps.push_back({ConversionStep::ToPartial, to.partial, -1, 1, elements()});
  return steps;
}

OperandFacts::OperandFacts(func::FuncOp step,
                           llvm::function_ref<const ShardingRule *(Operation *)> ruleOf,
                           bool sequenceParallel)
    : sequenceParallel(sequenceParallel) {
  Block &body = step.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    if (!step.getArgAttr(arg.getArgNumber(), PpcDialect::kInputAttrName))
      continue;
    fromData.insert(arg);
    auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
    if (type && type.getRank() >= 2)
      sequence[arg] = 1;
  }
  for (Operation &op : body.without_terminator()) {
    if (llvm::any_of(op.getOperands(), [&](Value v) { return fromData.contains(v); }))
      fromData.insert(op.result_begin(), op.result_end());
    const ShardingRule *rule = ruleOf(&op);
    if (!sequenceParallel || !rule)
      continue;
    // The factors carrying a sequence into the op.
    llvm::SmallVector<int64_t> factors;
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      auto it = sequence.find(operand);
      if (it == sequence.end() || i >= rule->operands.size() ||
          it->second >= static_cast<int64_t>(rule->operands[i].size()))
        continue;
      for (int64_t f : llvm::reverse(rule->operands[i][it->second]))
        if (rule->factorSizes[f] > 1) {
          factors.push_back(f);
          break;
        }
    }
    for (auto [r, result] : llvm::enumerate(op.getResults()))
      for (auto [d, dimFactors] : llvm::enumerate(rule->results[r]))
        if (llvm::any_of(dimFactors, [&](int64_t f) { return llvm::is_contained(factors, f); })) {
          sequence[result] = d;
          break;
        }
  }
}

OperandInfo OperandFacts::of(Operation *op) const {
  OperandInfo info;
  for (Value v : op->getOperands()) {
    info.stationary.push_back(!fromData.contains(v));
    if (!sequenceParallel)
      continue;
    auto it = sequence.find(v);
    info.scatterDims.push_back(it == sequence.end() ? -1 : it->second);
  }
  return info;
}

} // namespace ppc
