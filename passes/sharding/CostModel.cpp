//===- CostModel.cpp - what a sharding plan costs per step ----------------===//

#include "passes/sharding/CostModel.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/Provenance.h"
#include "passes/Recognition.h"
#include "passes/sharding/LocalForms.h"

#include <cmath>
#include <limits>
#include <set>

using namespace mlir;

namespace ppc {

double DeviceModel::matmulFlops(Type element) const {
  bool half = element.isBF16() || element.isF16();
  return half && halfFlops > 0 ? halfFlops : flops;
}

double DeviceModel::bandwidth(llvm::ArrayRef<std::string> axes) const {
  double slowest = tpBandwidth;
  for (const std::string &axis : axes)
    if (axis != "tp")
      slowest = std::min(slowest, interNodeBandwidth);
  return slowest;
}

double bytesPerRank(ConversionStep::Kind kind, int64_t elements, int64_t elementBytes, int64_t n) {
  double bytes = static_cast<double>(elements) * elementBytes;
  switch (kind) {
  case ConversionStep::AllReduce:
    return 2.0 * (n - 1) / n * bytes;
  case ConversionStep::AllGather:
  case ConversionStep::ReduceScatter:
    return static_cast<double>(n - 1) / n * bytes;
  case ConversionStep::AllSlice:
  case ConversionStep::ToPartial:
    return 0;
  }
  return 0;
}

double DeviceModel::seconds(const ConversionStep &step, int64_t elementBytes,
                            const AxisSizes &sizes) const {
  if (step.kind == ConversionStep::AllSlice || step.kind == ConversionStep::ToPartial)
    return static_cast<double>(step.elements) * elementBytes / memoryBandwidth;
  int64_t n = groupSize(sizes, step.axes);
  return latency + bytesPerRank(step.kind, step.elements, elementBytes, n) / bandwidth(step.axes);
}

static int64_t elementBytes(Value v) {
  Type element = getElementTypeOrSelf(v.getType());
  return std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8);
}

int64_t tensorBytes(Value v) { return boundedTensorBytes(v.getType()); }

double localOpSeconds(Operation *op, const DeviceModel &device, const AxisSizes &sizes) {
  auto collective = [&](ConversionStep::Kind kind, Value whole, llvm::ArrayRef<StringRef> axes) {
    ConversionStep step{
        kind, {}, -1, 1, llvm::cast<RankedTensorType>(whole.getType()).getNumElements()};
    for (StringRef a : axes)
      step.axes.push_back(a.str());
    return device.seconds(step, elementBytes(whole), sizes);
  };
  if (auto reduce = llvm::dyn_cast<AllReduceOp>(op))
    return collective(ConversionStep::AllReduce, reduce.getInput(), reduce.getAxisNames());
  if (auto gather = llvm::dyn_cast<AllGatherOp>(op))
    return collective(ConversionStep::AllGather, gather.getResult(), gather.getAxisNames());
  if (auto scatter = llvm::dyn_cast<ReduceScatterOp>(op))
    return collective(ConversionStep::ReduceScatter, scatter.getInput(), scatter.getAxisNames());
  if (auto send = llvm::dyn_cast<SendOp>(op))
    return device.latency + tensorBytes(send.getInput()) / device.interNodeBandwidth;
  if (llvm::isa<RecvOp, AxisIndexOp, ConstantOp>(op))
    return 0;
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += tensorBytes(v);
  for (Value v : op->getResults())
    bytes += tensorBytes(v);
  if (double flops = flopsOf(op))
    return flops / device.matmulFlops(getElementTypeOrSelf(op->getOperand(0).getType()));
  return bytes / device.memoryBandwidth;
}

static std::string axesKey(llvm::ArrayRef<std::string> axes) {
  std::string key;
  for (const std::string &a : axes)
    key += (key.empty() ? "" : ",") + a;
  return key;
}

PlanPricer::PlanPricer(func::FuncOp step, AxisSizes sizes, DeviceModel device,
                       bool sequenceParallel)
    : step(step), sizes(std::move(sizes)), device(device) {
  Block &body = step.getBody().front();
  for (Value arg : body.getArguments()) {
    numbers[arg] = values.size();
    values.push_back(arg);
  }
  for (Operation &op : body.without_terminator()) {
    opIndex[&op] = ops.size();
    ops.push_back(&op);
    inMicroBatch.push_back(op.hasAttr(kMicroBatchAttrName));
    rules.push_back(ShardingRuleRegistry::get().lookup(&op));
    firstResult.push_back(values.size());
    for (Value result : op.getResults()) {
      numbers[result] = values.size();
      values.push_back(result);
    }
  }
  updated = updatedArguments(step);
  OperandFacts facts(
      step,
      [&](Operation *op) -> const ShardingRule * {
        auto it = opIndex.find(op);
        return it != opIndex.end() && rules[it->second] ? &*rules[it->second] : nullptr;
      },
      sequenceParallel);
  for (Operation *op : ops)
    operandInfo.push_back(facts.of(op));
  splat.assign(values.size(), false);
  for (auto [n, v] : llvm::enumerate(values))
    splat[n] = splatValue(v).has_value();
  lastUse.assign(values.size(), 0);
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value v : op->getOperands())
      lastUse[numbers.lookup(v)] = i;
  for (Value v : body.getTerminator()->getOperands())
    lastUse[numbers.lookup(v)] = ops.size();
  // What layoutHints (Layout.h) walks, once: the same propagation, by number.
  for (auto [i, op] : llvm::enumerate(llvm::reverse(ops))) {
    size_t index = ops.size() - 1 - i;
    HintEdge edge{firstResult[index], {}};
    for (unsigned k : hintedOperands(op, rules[index] ? &*rules[index] : nullptr))
      edge.operands.push_back(numbers.lookup(op->getOperand(k)));
    if (!edge.operands.empty())
      hintEdges.push_back(std::move(edge));
  }
  for (auto [i, op] : llvm::enumerate(ops)) {
    auto &operands = operandNumbers.emplace_back();
    auto &dying = dyingNumbers.emplace_back();
    for (Value v : op->getOperands()) {
      unsigned n = numbers.lookup(v);
      operands.push_back(n);
      if (n >= body.getNumArguments() && lastUse[n] == i && !llvm::is_contained(dying, n))
        dying.push_back(n);
    }
    // A result nothing uses (a statistic the gradient did not need) dies
    // with its op.
    for (Value r : op->getResults())
      if (r.use_empty())
        dying.push_back(numbers.lookup(r));
  }
}

FailureOr<PlanCost> PlanPricer::price(llvm::ArrayRef<Layout> arguments,
                                      llvm::SmallVectorImpl<LayoutRequest> *requests) {
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  unsigned numArgs = step.getNumArguments();
  std::vector<Layout> layouts(values.size());
  std::set<std::pair<unsigned, std::string>> converted;
  std::vector<bool> made(values.size(), false);
  std::vector<Layout> heldAs(values.size());
  // The bytes each live value holds, subtracted exactly when it dies (its
  // layout may change in between: a partial one used reduced).
  std::vector<double> held(values.size(), 0);
  PlanCost cost;

  auto bytesOf = [&](Value v, const Layout &layout) -> double {
    auto shape = localShape(llvm::cast<RankedTensorType>(v.getType()).getShape(), layout, sizes);
    if (!shape)
      return kInfinity;
    double n = elementBytes(v);
    for (int64_t s : *shape)
      n *= s;
    return n;
  };
  double argumentBytes = 0;
  for (unsigned i = 0; i < numArgs; ++i) {
    layouts[i] = arguments[i];
    argumentBytes += bytesOf(values[i], arguments[i]);
  }
  // Adds one collective's time and bytes.
  auto charge = [&](const ConversionStep &s, int64_t bytes) {
    double seconds = device.seconds(s, bytes, sizes);
    cost.commSeconds += seconds;
    if (s.kind == ConversionStep::AllReduce || s.kind == ConversionStep::AllGather ||
        s.kind == ConversionStep::ReduceScatter) {
      std::string key = axesKey(s.axes);
      cost.bytesByAxes[key] += bytesPerRank(s.kind, s.elements, bytes, groupSize(sizes, s.axes));
      cost.secondsByAxes[key] += seconds;
      ++cost.collectivesByAxes[key];
    }
  };
  // Converts value `n` from `from` to `to` (once per target layout), adding
  // the collectives' cost; returns the bytes of the converted copy.
  auto convert = [&](unsigned n, const Layout &from, const Layout &to) -> double {
    if (from == to || !converted.insert({n, to.str()}).second)
      return 0;
    Value v = values[n];
    auto shape = llvm::cast<RankedTensorType>(v.getType()).getShape();
    auto steps = conversionSteps(shape, from, to, sizes);
    bool slicesOnly = true;
    for (const ConversionStep &s : steps) {
      charge(s, elementBytes(v));
      slicesOnly &= s.kind == ConversionStep::AllSlice;
    }
    if (requests && n < numArgs && slicesOnly)
      requests->push_back({n, to});
    return bytesOf(v, to);
  };

  // Where results end up, and the hints that follow (layoutHints, by
  // number: the same propagation along the edges found once).
  auto ret = step.getBody().front().getTerminator();
  llvm::SmallVector<Layout> resultLayouts = returnLayouts(step, arguments);
  llvm::DenseMap<unsigned, Layout> hints;
  auto addHint = [&](unsigned n, const Layout &layout) {
    if (std::optional<Layout> wanted = asHint(layout))
      hints.try_emplace(n, std::move(*wanted));
  };
  for (auto [v, layout] : llvm::zip(ret->getOperands(), resultLayouts))
    addHint(numbers.lookup(v), layout);
  for (const HintEdge &edge : hintEdges) {
    auto it = hints.find(edge.result);
    if (it == hints.end())
      continue;
    Layout wanted = it->second;
    for (unsigned n : edge.operands)
      addHint(n, wanted);
  }

  double live = 0;
  cost.argumentBytes = argumentBytes;
  cost.peakBytes = argumentBytes;
  cost.microBatchPeakBytes = cost.stepPeakBytes = argumentBytes;
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (!rules[i])
      return op->emitError() << "'" << op->getName() << "' has no sharding rule";
    const llvm::SmallVector<unsigned, 4> &operands = operandNumbers[i];
    // A partial value reduced for an earlier use is used reduced.
    for (unsigned n : operands) {
      Layout &layout = layouts[n];
      if (layout.partial.empty())
        continue;
      Layout full = layout;
      full.partial.clear();
      if (converted.count({n, full.str()}))
        layout = full;
    }
    llvm::SmallVector<const Layout *> in;
    for (unsigned n : operands)
      in.push_back(&layouts[n]);
    OpLayouts decided = layoutsForOp(op, *rules[i], in, sizes, &operandInfo[i]);

    double temporaries = 0, touched = 0;
    for (auto [k, n] : llvm::enumerate(operands)) {
      touched += bytesOf(values[n], decided.operands[k]);
      if (!splat[n]) {
        // The converted copy serves every later use that wants the same
        // layout (convert makes it once), so it lives until the value's
        // last use, as the partitioner's collective result does: the
        // all-gathers of a recomputed block live through its backward.
        // A partial value reduced (used reduced from then on) and an
        // argument's copy (gathered where used) are temporaries.
        double copy = convert(n, *in[k], decided.operands[k]);
        Layout reduced = *in[k];
        reduced.partial.clear();
        if (copy > 0 && n >= numArgs && lastUse[n] > i && reduced != decided.operands[k]) {
          held[n] += copy;
          live += copy;
        } else {
          temporaries += copy;
        }
        continue;
      }
      // A splat constant: held from its first use, in the layout wanted
      // there, until its last; made again, without a collective, for a use
      // that wants another (Partitioner::convert moves each constant to its
      // first use and makes it anew in another layout). Its own layout
      // stays what the rules gave it, as in the partitioner. A partial
      // layout is a copy (Partitioner::convert's ToPartial).
      Layout wanted = decided.operands[k];
      bool partial = !wanted.partial.empty();
      wanted.partial.clear();
      if (!made[n]) {
        made[n] = true;
        heldAs[n] = wanted;
        held[n] = bytesOf(values[n], wanted);
        live += held[n];
      } else if (wanted != heldAs[n] && converted.insert({n, wanted.str()}).second) {
        temporaries += bytesOf(values[n], wanted);
      }
      if (partial)
        temporaries += bytesOf(values[n], wanted);
    }
    // The collectives of the op's local form (a split softmax's statistics).
    for (const ConversionStep &s : localCollectives(op, *rules[i], decided, sizes))
      charge(s, elementBytes(op->getOperand(0)));
    // resultBytes: what the op writes (its time); heldBytes: what stays
    // live after it, a result sliced to a hint held as the slice (the
    // whole is a temporary of this op).
    double resultBytes = 0, heldBytes = 0;
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      unsigned n = firstResult[i] + r;
      if (splat[n]) {
        // Held from its first use (above); slicing it to a hint is free.
        layouts[n] = std::move(decided.results[r]);
        if (auto hint = hints.find(n); hint != hints.end())
          layouts[n] = applyHint(layouts[n], hint->second);
        continue;
      }
      double computed = bytesOf(result, decided.results[r]);
      resultBytes += computed;
      layouts[n] = std::move(decided.results[r]);
      if (auto hint = hints.find(n); hint != hints.end()) {
        Layout sliced = applyHint(layouts[n], hint->second);
        if (sliced != layouts[n]) {
          convert(n, layouts[n], sliced);
          temporaries += computed;
          computed = bytesOf(result, sliced);
        }
        layouts[n] = std::move(sliced);
      }
      held[n] = computed;
      heldBytes += computed;
    }
    // A contraction's FLOPs on the rank's local blocks of its operands.
    double flops = 0;
    if (auto contraction = llvm::dyn_cast<ContractionOpInterface>(op)) {
      llvm::SmallVector<llvm::SmallVector<int64_t>> local;
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        auto global = llvm::cast<RankedTensorType>(v.getType()).getShape();
        auto shape = localShape(global, decided.operands[i], sizes);
        local.push_back(shape ? *shape : llvm::SmallVector<int64_t>(global));
      }
      flops = contraction.getFlops(
          llvm::SmallVector<llvm::ArrayRef<int64_t>>(local.begin(), local.end()));
    }
    if (flops > 0) {
      cost.flops += flops;
      cost.computeSeconds +=
          flops / device.matmulFlops(getElementTypeOrSelf(op->getOperand(0).getType()));
    } else
      cost.computeSeconds += (touched + resultBytes) / device.memoryBandwidth;
    live += heldBytes;
    double now = argumentBytes + live + temporaries;
    if (now > cost.peakBytes) {
      cost.peakBytes = now;
      cost.peakOp = i;
    }
    double &phase = inMicroBatch[i] ? cost.microBatchPeakBytes : cost.stepPeakBytes;
    phase = std::max(phase, now);
    for (unsigned n : dyingNumbers[i])
      live -= held[n];
  }

  // Updated parameters and state return in their argument's layout;
  // everything else whole.
  for (auto [r, v] : llvm::enumerate(ret->getOperands())) {
    unsigned n = numbers.lookup(v);
    if (layouts[n] == resultLayouts[r])
      continue;
    convert(n, layouts[n], resultLayouts[r]);
    // The update came out split: its argument could have been split so.
    Layout computed = layouts[n];
    computed.partial.clear();
    if (requests && updated[r] && !computed.isReplicated())
      requests->push_back({*updated[r], computed});
  }
  if (!std::isfinite(cost.peakBytes))
    cost.computeSeconds = kInfinity;
  return cost;
}

} // namespace ppc
