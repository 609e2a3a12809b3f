//===- PlanShardings.cpp - choose argument layouts by cost ----------------===//
//
// The planner of DESIGN.md §1: data inputs split along their batch over dp,
// and a tensor-parallel layout for every parameter chosen by a greedy search
// priced by the cost model (CostModel.h). See the pass description in
// Passes.td for the search; nothing here knows the names or roles of a
// transformer's weights.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcAttrs.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/memory/Offload.h"
#include "passes/memory/Recompute.h"
#include "passes/sharding/CostModel.h"
#include "passes/sharding/Layout.h"
#include "passes/sharding/Planner.h"
#include "runtime/Printable.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <set>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_PLANSHARDINGS
#include "passes/Passes.h.inc"

namespace {

/// What a parameter's uses look like a few ops deep, with its shape: the
/// same weight of every layer has the same signature.
std::string signature(BlockArgument arg) {
  constexpr int kDepth = 4;
  constexpr size_t kFrontier = 32;
  std::string shape;
  llvm::raw_string_ostream os(shape);
  os << arg.getType();
  std::vector<std::string> parts;
  llvm::SmallVector<Value> frontier{arg};
  for (int depth = 1; depth <= kDepth && !frontier.empty(); ++depth) {
    llvm::SmallVector<Value> next;
    for (Value v : frontier)
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        std::string part;
        llvm::raw_string_ostream ps(part);
        ps << depth << ':' << user->getName();
        // Where a value is returned says which parameter it is, not how
        // it is used.
        if (!user->hasTrait<OpTrait::IsTerminator>())
          ps << ':' << use.getOperandNumber();
        for (Type t : user->getResultTypes())
          ps << ':' << t;
        parts.push_back(part);
        if (next.size() < kFrontier)
          llvm::append_range(next, user->getResults());
      }
    frontier = std::move(next);
  }
  llvm::sort(parts);
  for (const std::string &p : parts)
    shape += "|" + p;
  return shape;
}

} // namespace

LogicalResult Planner::setUp(llvm::ArrayRef<std::string> pins) {
  unsigned numArgs = step.getNumArguments();
  classOf.assign(numArgs, -1);
  llvm::StringMap<unsigned> paramArg;
  for (unsigned i = 0; i < numArgs; ++i)
    if (auto name = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName))
      paramArg[name.getValue()] = i;

  // Blocks the program slices dimensions in (q, k, v of a fused projection).
  std::set<int64_t> blockCounts{1};
  step.walk([&](Operation *op) {
    auto add = [&](llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
                   llvm::ArrayRef<int64_t> limits, llvm::ArrayRef<int64_t> steps) {
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t block = sliceBlockLength(shape[d], starts[d], limits[d], steps[d]);
        if (block > 1 && block < shape[d])
          blockCounts.insert(shape[d] / block);
      }
    };
    if (auto slice = llvm::dyn_cast<SliceOp>(op))
      add(slice.getInput().getType().getShape(), slice.getStarts(), slice.getLimits(),
          slice.getSteps());
    if (auto insert = llvm::dyn_cast<InsertSliceOp>(op))
      add(insert.getDest().getType().getShape(), insert.getStarts(), insert.getLimits(),
          insert.getSteps());
  });

  auto optionsFor = [&](RankedTensorType type) {
    llvm::SmallVector<TpOption> options{TpOption{}};
    for (int64_t d = 0; d < type.getRank(); ++d)
      for (int64_t b : blockCounts)
        if (type.getDimSize(d) % (b * tp()) == 0 && type.getDimSize(d) / b > 1)
          options.push_back({d, b});
    return options;
  };

  // Pinned parameters: a class of their own with one option.
  std::set<std::string> pinnedNames;
  for (const std::string &entry : pins) {
    llvm::SmallVector<StringRef, 3> fields;
    StringRef(entry).split(fields, ':');
    int64_t dim = -1, blocks = 1;
    bool bad = fields.size() < 2 || fields.size() > 3 || fields[1].getAsInteger(10, dim) ||
               dim < 0 ||
               (fields.size() == 3 && (fields[2].getAsInteger(10, blocks) || blocks < 1));
    // A parameter name may hold ':' itself only if it is not a pin's tail.
    if (bad)
      return step.emitError() << "tp-shard '" << printable(entry)
                              << "': expected NAME:DIM or NAME:DIM:BLOCKS";
    auto it = paramArg.find(fields[0]);
    if (it == paramArg.end())
      return step.emitError() << "tp-shard '" << printable(entry) << "': no parameter '"
                              << printable(fields[0]) << "'";
    auto type = llvm::cast<RankedTensorType>(step.getArgument(it->second).getType());
    if (dim >= type.getRank())
      return step.emitError() << "tp-shard '" << printable(entry) << "': parameter '"
                              << printable(fields[0]) << "' of type " << type
                              << " has no dimension " << dim;
    if (type.getDimSize(dim) % (blocks * tp()) != 0)
      return step.emitError() << "tp-shard '" << printable(entry) << "': dimension " << dim
                              << " of parameter '" << printable(fields[0]) << "' (size "
                              << type.getDimSize(dim) << ") does not split into " << blocks
                              << " blocks over mesh axis tp of size " << tp();
    ParamClass pinned;
    pinned.params.push_back(it->second);
    pinned.options.push_back({dim, blocks});
    pinned.pinned = true;
    classOf[it->second] = classes.size();
    classes.push_back(std::move(pinned));
    pinnedNames.insert(fields[0].str());
  }

  // The others, by signature, in argument order.
  std::map<std::string, int> bySignature;
  for (unsigned i = 0; i < numArgs; ++i) {
    auto name = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName);
    if (!name || pinnedNames.count(name.getValue().str()))
      continue;
    auto [it, inserted] =
        bySignature.try_emplace(signature(step.getArgument(i)), static_cast<int>(classes.size()));
    if (inserted) {
      ParamClass c;
      c.options = optionsFor(llvm::cast<RankedTensorType>(step.getArgument(i).getType()));
      classes.push_back(std::move(c));
    }
    classes[it->second].params.push_back(i);
    classOf[i] = it->second;
  }
  // Optimizer state follows its parameter (when shaped like it).
  for (unsigned i = 0; i < numArgs; ++i) {
    auto state = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kStateAttrName);
    if (!state)
      continue;
    auto it = paramArg.find(state.getValue().split(':').second);
    if (it != paramArg.end() &&
        step.getArgument(i).getType() == step.getArgument(it->second).getType())
      classOf[i] = classOf[it->second];
  }
  return success();
}

llvm::SmallVector<Layout> Planner::layoutsOf(const Plan &plan) {
  llvm::SmallVector<Layout> layouts;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto type = llvm::cast<RankedTensorType>(step.getArgument(i).getType());
    Layout layout = Layout::replicated(type.getRank());
    if (step.getArgAttr(i, PpcDialect::kInputAttrName) && type.getRank() > 0 &&
        sizes.lookup("dp") > 1)
      layout.dims[0] = {"dp"};
    if (classOf[i] >= 0) {
      TpOption option = plan[classOf[i]];
      if (option.dim >= 0) {
        layout.dims[option.dim] = {"tp"};
        layout.blocks[option.dim] = option.blocks;
      }
    }
    layouts.push_back(std::move(layout));
  }
  return layouts;
}

FailureOr<PlanCost> Planner::price(const Plan &plan,
                                   llvm::SmallVectorImpl<LayoutRequest> *requests) {
  std::string key;
  for (const TpOption &o : plan)
    key += std::to_string(o.dim) + "/" + std::to_string(o.blocks) + ",";
  llvm::SmallVector<Layout> layouts = layoutsOf(plan);
  // Threads price moves at once (run): the memo and the cache are shared.
  std::optional<PriceCache::Entry> found;
  {
    std::lock_guard<std::mutex> hold(lock);
    memo.insert(key);
    if (auto it = cache.entries.find(key); it != cache.entries.end())
      found = it->second;
  }
  if (!found) {
    PriceCache::Entry entry;
    auto cost = pricer.price(layouts, &entry.requests);
    if (failed(cost))
      return failure();
    entry.cost = *cost;
    std::lock_guard<std::mutex> hold(lock);
    found = cache.entries.emplace(key, std::move(entry)).first->second;
  }
  if (requests)
    requests->append(found->requests.begin(), found->requests.end());
  PlanCost cost = found->cost;
  cost.peakBytes -= zeroSavings(layouts);
  addOffload(layouts, cost);
  return cost;
}

void Planner::addOffload(llvm::ArrayRef<Layout> layouts, PlanCost &cost) {
  if (offload == OffloadLevel::None)
    return;
  bool params = offload == OffloadLevel::OptimizerAndParams;
  int64_t dp = sizes.lookup("dp");
  double saved = 0, host = 0, linkBytes = 0, stepBytes = 0;
  for (auto [i, layout] : llvm::enumerate(layouts)) {
    bool param = step.getArgAttr(i, PpcDialect::kParamAttrName) != nullptr;
    bool state = step.getArgAttr(i, PpcDialect::kStateAttrName) != nullptr;
    if (!param && !state)
      continue;
    std::optional<Share> share = shareOf(i, layout);
    if (!share)
      continue;
    double bytes = share->bytes;
    // The share of it this rank updates (ZeRO's shard from stage 1).
    bool sharded = dp > 1 && share->zeroShardable;
    double own = zero >= 1 && sharded ? bytes / dp : bytes;
    if (state) {
      // Off the device; read and written by the host's step.
      saved += own;
      host += own;
      stepBytes += 2 * own;
      continue;
    }
    // The gradient goes to the host; the parameter's share comes to the
    // host and goes back updated, or (params) lives there and comes to the
    // device for each reader: ZeRO 3's two gathers, else the forward's and
    // the backward's reads of the whole of it.
    bool fetched = params && zero >= 3 && sharded;
    linkBytes += own + (params ? 2 * (fetched ? own : bytes) : 2 * own);
    host += 2 * own;
    stepBytes += 3 * own;
    if (fetched)
      saved += own;
  }
  cost.peakBytes -= saved;
  cost.hostBytes += host;
  cost.offloadSeconds +=
      linkBytes / device.hostLinkBandwidth + stepBytes / device.hostMemoryBandwidth;
}

double Planner::zeroSavings(llvm::ArrayRef<Layout> layouts) {
  int64_t dp = sizes.lookup("dp");
  if (zero == 0 || dp == 1)
    return 0;
  double saved = 0;
  for (auto [i, layout] : llvm::enumerate(layouts)) {
    bool param = step.getArgAttr(i, PpcDialect::kParamAttrName) != nullptr;
    bool state = step.getArgAttr(i, PpcDialect::kStateAttrName) != nullptr;
    // Optimizer state from stage 1, the parameter's gradient from 2, the
    // parameter itself from 3, where ppc-partition can shard them.
    int copies = (state && zero >= 1) + (param && zero >= 2) + (param && zero >= 3);
    if (copies == 0)
      continue;
    std::optional<Share> share = shareOf(i, layout);
    if (share && share->zeroShardable)
      saved += copies * share->bytes * (1 - 1.0 / dp);
  }
  return saved;
}

std::optional<Planner::Share> Planner::shareOf(unsigned arg, const Layout &layout) {
  auto type = llvm::cast<RankedTensorType>(step.getArgument(arg).getType());
  auto local = localShape(type.getShape(), layout, sizes);
  if (!local)
    return std::nullopt;
  double bytes = type.getElementTypeBitWidth() / 8.0;
  for (int64_t n : *local)
    bytes *= n;
  return Share{bytes, zeroShardDim(type.getShape(), layout, sizes.lookup("dp")).has_value()};
}

FailureOr<Planner::Scored> Planner::closure(Plan plan) {
  for (int round = 0;; ++round) {
    llvm::SmallVector<LayoutRequest> requests;
    auto cost = price(plan, &requests);
    if (failed(cost))
      return failure();
    bool changed = false;
    for (const LayoutRequest &request : requests) {
      int c = classOf[request.argument];
      if (c < 0 || classes[c].pinned || plan[c].dim >= 0 || round >= 8)
        continue;
      // A split of one dimension over tp alone, if the class may take it.
      const Layout &l = request.layout;
      TpOption wanted;
      bool other = !l.partial.empty();
      for (auto [d, axes] : llvm::enumerate(l.dims)) {
        if (axes.empty())
          continue;
        if (axes.size() != 1 || axes[0] != "tp" || wanted.dim >= 0)
          other = true;
        wanted = {static_cast<int64_t>(d), l.blocks[d]};
      }
      if (other || wanted.dim < 0 || !llvm::is_contained(classes[c].options, wanted))
        continue;
      plan[c] = wanted;
      changed = true;
    }
    if (!changed)
      return Scored{plan, *cost};
  }
}

FailureOr<llvm::SmallVector<Layout>> Planner::run(llvm::ArrayRef<Layout> warm,
                                                  std::vector<llvm::SmallVector<Layout>> *passed) {
  Plan start;
  for (const ParamClass &c : classes) {
    TpOption option;
    if (!warm.empty() && !c.params.empty()) {
      const Layout &given = warm[c.params.front()];
      for (auto [d, axes] : llvm::enumerate(given.dims))
        if (axes.size() == 1 && axes[0] == "tp")
          option = {static_cast<int64_t>(d), given.blocks[d]};
      if (!llvm::is_contained(c.options, option))
        option = TpOption{};
    }
    start.push_back(c.pinned ? c.options.front() : option);
  }
  auto current = closure(start);
  if (failed(current))
    return failure();
  chosen = current->cost;
  if (passed)
    passed->push_back(layoutsOf(current->plan));
  if (tp() == 1)
    return layoutsOf(start);
  constexpr double kTiny = 1e-12;
  for (size_t round = 0; round < 4 * classes.size() + 4; ++round) {
    std::optional<Scored> best;
    double bestScore = 0;
    int bestTier = 0;
    // Every move's closure is priced on the context's threads (the pricer
    // only reads the IR); the choice is made in order, as one thread would.
    llvm::SmallVector<Plan> moves;
    for (auto [c, cls] : llvm::enumerate(classes)) {
      if (cls.pinned)
        continue;
      for (const TpOption &option : cls.options) {
        if (option == current->plan[c])
          continue;
        moves.push_back(current->plan);
        moves.back()[c] = option;
      }
    }
    std::vector<std::optional<Scored>> closures(moves.size());
    if (failed(failableParallelForEachN(step->getContext(), 0, moves.size(), [&](size_t i) {
          FailureOr<Scored> candidate = closure(moves[i]);
          if (failed(candidate))
            return failure();
          closures[i] = std::move(*candidate);
          return success();
        })))
      return failure();
    for (std::optional<Scored> &candidate : closures) {
      const PlanCost &now = current->cost, &next = candidate->cost;
      double score;
      int tier = 0;
      if (!fits(now)) {
        // Bytes saved per second added (any saving that costs no time
        // ranks above all that do). A move that saves time and costs no
        // memory ranks above every other (by the time it saves): without
        // it a layout the greedy order reached early is never revised
        // (LLaMA with grouped-query attention kept o_proj split by its
        // output columns, gathering the attention output before it).
        double saved = now.peakBytes - next.peakBytes;
        double faster = now.seconds() - next.seconds();
        if (saved >= 0 && faster > now.seconds() * 1e-9) {
          tier = 1;
          score = faster;
        } else if (saved <= 0) {
          continue;
        } else {
          score = saved / std::max(next.seconds() - now.seconds(), kTiny);
        }
      } else {
        if (!fits(next) || next.seconds() >= now.seconds() * (1 - 1e-9))
          continue;
        score = now.seconds() - next.seconds();
      }
      if (!best || tier > bestTier || (tier == bestTier && score > bestScore)) {
        best = std::move(*candidate);
        bestScore = score;
        bestTier = tier;
      }
    }
    if (!best)
      break;
    current = std::move(*best);
    // A move that saved time and cost no memory dominates the layout it
    // left: it takes that layout's place in the chain (ppc plan measures
    // every layout of it).
    if (passed && bestTier == 1 && passed->size() > 1)
      passed->back() = layoutsOf(current->plan);
    else if (passed)
      passed->push_back(layoutsOf(current->plan));
  }
  chosen = current->cost;
  return layoutsOf(current->plan);
}

namespace {

struct PlanShardingsPass : impl::PlanShardingsBase<PlanShardingsPass> {
  using PlanShardingsBase::PlanShardingsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError() << "no @train_step to plan; run the training pipeline first";
      return signalPassFailure();
    }
    auto sizes = declareMesh(module, dataParallel, tensorParallel, pipelineParallel);
    if (failed(sizes))
      return signalPassFailure();
    if (!tpShards.empty() && tensorParallel == 1) {
      module.emitError() << "tp-shard needs a tensor-parallel axis (tp > 1)";
      return signalPassFailure();
    }
    if (zero > 3) {
      module.emitError() << "ZeRO stage " << zero << " is not one of 0, 1, 2, 3";
      return signalPassFailure();
    }
    std::optional<RecomputePolicy> policy = parseRecomputePolicy(recompute);
    if (!policy) {
      module.emitError() << "recompute policy '" << recompute
                         << "' is not one of none, selective, full, auto";
      return signalPassFailure();
    }
    std::optional<OffloadLevel> offloadLevel = parseOffloadLevel(offload);
    bool offloadAuto = offload == "auto";
    if (!offloadLevel && !offloadAuto) {
      module.emitError() << "offload '" << offload
                         << "' is not one of none, optimizer, optimizer+params, auto";
      return signalPassFailure();
    }
    OffloadLevel given = offloadLevel.value_or(OffloadLevel::None);
    // The given ZeRO stage, or the lowest that fits; with recompute=auto,
    // also each stage with recomputation, the fastest plan that fits.
    DeviceModel device;
    llvm::SmallVector<std::string> pins(tpShards.begin(), tpShards.end());
    struct Candidate {
      int64_t stage;
      RecomputePolicy recompute;
      OffloadLevel offload;
      llvm::SmallVector<Layout> layouts;
      PlanCost cost;
      size_t priced;
      bool fits;
    };
    std::optional<Candidate> best, closest;
    std::map<RecomputePolicy, PriceCache> caches;
    // The plan each stage got without recomputation: where the search with
    // recomputation starts (it mostly stays there, pricing a round of moves
    // rather than the whole search again).
    std::map<int64_t, llvm::SmallVector<Layout>> withoutRecomputation;
    int64_t last = zero >= 0 || dataParallel == 1 ? std::max<int64_t>(zero, 0) : 3;
    // Prices a plan at `stage` with `level`, keeps it as the best or the
    // closest, and says whether it fits.
    auto priceWith = [&](int64_t stage, RecomputePolicy level,
                         OffloadLevel offloaded) -> FailureOr<bool> {
      // The plan prices the whole step; pipeline stages each hold about
      // 1/pp of it (ppc-pipeline checks each stage against the budget).
      func::FuncOp priced = step;
      if (level != RecomputePolicy::None) {
        priced = step.clone();
        recomputeEveryBlock(priced, level);
      }
      std::optional<Planner> planner;
      planner.emplace(priced, *sizes, device, memoryPerRank * pipelineParallel, sequenceParallel,
                      stage, offloaded, hostMemoryPerRank * pipelineParallel, caches[level]);
      FailureOr<llvm::SmallVector<Layout>> layouts = failure();
      llvm::ArrayRef<Layout> warm;
      if (level != RecomputePolicy::None && withoutRecomputation.count(stage))
        warm = withoutRecomputation[stage];
      if (succeeded(planner->setUp(pins)))
        layouts = planner->run(warm);
      if (succeeded(layouts) && level == RecomputePolicy::None)
        withoutRecomputation[stage] = *layouts;
      Candidate candidate{stage,
                          level,
                          offloaded,
                          succeeded(layouts) ? *layouts : llvm::SmallVector<Layout>{},
                          planner->chosenCost(),
                          planner->plansPriced(),
                          planner->chosenFits()};
      planner.reset();
      if (priced != step)
        priced->erase();
      if (failed(layouts))
        return failure();
      bool fits = candidate.fits;
      if (!fits && (!closest || candidate.cost.peakBytes < closest->cost.peakBytes))
        closest = candidate;
      if (fits && (!best || candidate.cost.seconds() < best->cost.seconds() * (1 - 1e-9)))
        best = std::move(candidate);
      return fits;
    };
    // Prices `stage` with the recomputation `policy` allows and `offloaded`;
    // says whether a plan fits (failure: the search failed), and sets
    // `fitsWithout` when one fits without recomputation (auto).
    bool fitsWithout = false;
    auto priceStage = [&](int64_t stage, OffloadLevel offloaded) -> FailureOr<bool> {
      if (*policy != RecomputePolicy::Auto)
        return priceWith(stage, *policy, offloaded);
      // auto: without recomputation; where that does not fit, selective
      // (less time), then full. (Full does not always take less memory than
      // selective: recomputing a whole block is a transient of its own.)
      FailureOr<bool> without = priceWith(stage, RecomputePolicy::None, offloaded);
      if (failed(without) || *without) {
        fitsWithout = succeeded(without);
        return without;
      }
      // A higher stage with as much recomputation as a plan that fits
      // already adds communication to the same recomputation: only less is
      // priced there.
      for (RecomputePolicy level : {RecomputePolicy::Selective, RecomputePolicy::Full}) {
        if (best && best->offload == offloaded && level >= best->recompute)
          break;
        FailureOr<bool> fits = priceWith(stage, level, offloaded);
        if (failed(fits) || *fits)
          return fits;
      }
      return false;
    };
    for (int64_t stage = zero >= 0 ? zero : 0; stage <= last; ++stage) {
      fitsWithout = false;
      FailureOr<bool> fits = priceStage(stage, given);
      if (failed(fits))
        return signalPassFailure();
      if (*fits && (*policy != RecomputePolicy::Auto || fitsWithout))
        break;
      // offload=auto: where nothing fits so far, the optimizer state in host
      // memory, then (ZeRO 3, where the shards can be fetched per gather)
      // the parameters too.
      if (!offloadAuto || best)
        continue;
      for (OffloadLevel level : {OffloadLevel::Optimizer, OffloadLevel::OptimizerAndParams}) {
        if (level == OffloadLevel::OptimizerAndParams && stage < 3)
          break;
        FailureOr<bool> offloaded = priceStage(stage, level);
        if (failed(offloaded))
          return signalPassFailure();
        if (*offloaded)
          break;
      }
    }
    // Nothing fits by estimate: an error, or (keep-closest, where ppc
    // compile checks the exact memory plan) the plan that needs the least
    // device memory, its host memory within budget. The estimate is not
    // the program: it prices ops unfused and holds a step's transients
    // longer than the compiled program does (GPT on 4x2x1, full
    // recomputation, the optimizer offloaded: 19.7 MB by estimate, 17.5
    // exactly).
    std::string overBudget;
    if (!best) {
      std::string message;
      llvm::raw_string_ostream diag(message);
      diag << "no plan found fits in " << static_cast<int64_t>(memoryPerRank)
           << " bytes per rank (memory-per-rank"
           << (pipelineParallel > 1 ? ", times pp for the whole step" : "") << ") with ZeRO stage "
           << closest->stage
           << (closest->recompute == RecomputePolicy::Full        ? " and full recomputation"
               : closest->recompute == RecomputePolicy::Selective ? " and selective recomputation"
                                                                  : "")
           << (closest->offload == OffloadLevel::None
                   ? ""
                   : ", offloading the " + std::string(closest->offload == OffloadLevel::Optimizer
                                                           ? "optimizer state"
                                                           : "optimizer state and parameters"))
           << ": the best needs " << static_cast<int64_t>(closest->cost.peakBytes)
           << (closest->cost.hostBytes > hostMemoryPerRank * pipelineParallel
                   ? " (and " + std::to_string(static_cast<int64_t>(closest->cost.hostBytes)) +
                         " bytes of host memory, over host-memory-per-rank)"
                   : "");
      if (!keepClosest || closest->cost.hostBytes > hostMemoryPerRank * pipelineParallel) {
        step.emitError() << diag.str();
        return signalPassFailure();
      }
      overBudget = diag.str();
      best = std::move(closest);
    }
    int64_t stage = best->stage;
    llvm::SmallVector<Layout> *layouts = &best->layouts;
    int64_t pricerRuns = 0;
    for (const auto &entry : caches)
      pricerRuns += entry.second.entries.size();
    step->setAttr(PpcDialect::kZeroAttrName,
                  IntegerAttr::get(IntegerType::get(&getContext(), 64), stage));
    for (auto [i, layout] : llvm::enumerate(*layouts))
      step.setArgAttr(i, PpcDialect::kShardingAttrName, toAttr(&getContext(), layout));
    // The cost model's estimate for the chosen plan, for reports and tests.
    Builder b(&getContext());
    const PlanCost &cost = best->cost;
    llvm::StringRef recomputed = best->recompute == RecomputePolicy::Full        ? "full"
                                 : best->recompute == RecomputePolicy::Selective ? "selective"
                                                                                 : "none";
    step->setAttr(PpcDialect::kPlanAttrName,
                  b.getDictionaryAttr({
                      b.getNamedAttr("compute_seconds", b.getF64FloatAttr(cost.computeSeconds)),
                      b.getNamedAttr("comm_seconds", b.getF64FloatAttr(cost.commSeconds)),
                      b.getNamedAttr("peak_bytes", b.getF64FloatAttr(cost.peakBytes)),
                      b.getNamedAttr("memory_per_rank", b.getF64FloatAttr(memoryPerRank)),
                      b.getNamedAttr("plans_priced", b.getI64IntegerAttr(best->priced)),
                      b.getNamedAttr("pricer_runs", b.getI64IntegerAttr(pricerRuns)),
                      b.getNamedAttr("recompute", b.getStringAttr(recomputed)),
                      b.getNamedAttr("offload", b.getStringAttr(offloadLevelName(best->offload))),
                      b.getNamedAttr("offload_seconds", b.getF64FloatAttr(cost.offloadSeconds)),
                      b.getNamedAttr("host_bytes", b.getF64FloatAttr(cost.hostBytes)),
                  }));
    if (!overBudget.empty()) {
      NamedAttrList plan(step->getAttrOfType<DictionaryAttr>(PpcDialect::kPlanAttrName));
      plan.set("over_budget", b.getStringAttr(overBudget));
      step->setAttr(PpcDialect::kPlanAttrName, plan.getDictionary(&getContext()));
    }
  }
};

} // namespace
} // namespace ppc
