//===- Recompute.cpp - activation recomputation ---------------------------===//

#include "passes/memory/Recompute.h"

#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "passes/Provenance.h"
#include "passes/memory/MemoryPlan.h"
#include "passes/sharding/CostModel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"

std::optional<RecomputePolicy> parseRecomputePolicy(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<RecomputePolicy>>(name)
      .Case("none", RecomputePolicy::None)
      .Case("selective", RecomputePolicy::Selective)
      .Case("full", RecomputePolicy::Full)
      .Case("auto", RecomputePolicy::Auto)
      .Default(std::nullopt);
}

namespace {

enum class Level { None, Selective, Full };

llvm::StringRef levelName(Level level) {
  return level == Level::Full ? "full" : level == Level::Selective ? "selective" : "none";
}

/// Which part of the step an op belongs to.
enum class Side { Other, Forward, Backward };

/// The block scope of an ONNX node name: the prefix up to its first
/// numbered scope ("/transformer/h.3/attn/MatMul" -> "/transformer/h.3"),
/// the last component (the node's own name) left out; "" when none.
std::string scopeOf(Location loc) {
  llvm::StringRef name;
  if (auto named = llvm::dyn_cast<NameLoc>(loc))
    name = named.getName().getValue();
  else if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto named = llvm::dyn_cast<NameLoc>(inner)) {
        name = named.getName().getValue();
        break;
      }
  llvm::SmallVector<llvm::StringRef> parts;
  name.split(parts, '/');
  if (parts.size() < 2)
    return "";
  size_t end = 0;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    end += parts[i].size() + (i > 0 ? 1 : 0);
    llvm::StringRef part = parts[i];
    size_t digits = part.size() - part.rtrim("0123456789").size();
    if (digits == 0 || digits == part.size())
      continue;
    char separator = part[part.size() - digits - 1];
    if (separator == '.' || separator == '_')
      return name.take_front(end).str();
  }
  return "";
}

bool isGemm(Operation *op) {
  return llvm::isa<ContractionOpInterface>(op) && op->getNumOperands() == 2;
}

/// The facts about one training program that recomputation needs, by op.
struct StepAnalysis {
  explicit StepAnalysis(func::FuncOp program);

  Side sideOf(Operation *op) const { return side.lookup(op); }
  /// The user of `op` that runs first in the program, if any.
  Operation *firstUser(Operation *op) const {
    Operation *first = nullptr;
    for (Operation *user : op->getUsers())
      if (index.count(user) && (!first || index.lookup(user) < index.lookup(first)))
        first = user;
    return first;
  }
  /// A backward op that a recomputed value replaces its operand for (a
  /// recomputing clone reads the kept originals).
  bool readsRecomputed(Operation *op) const {
    return sideOf(op) == Side::Backward && !op->hasAttr(kRecomputedAttrName);
  }

  llvm::SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, int64_t> index;
  llvm::DenseMap<Operation *, Side> side;
  llvm::DenseMap<Operation *, int64_t> microBatch;
  /// Forward ops only; "" outside every block.
  llvm::DenseMap<Operation *, std::string> block;
  /// The blocks in forward order.
  llvm::SmallVector<std::string> blocks;
  /// Forward ops in an attention core.
  llvm::DenseSet<Operation *> core;
  /// Forward elementwise ops whose activation operands the backward keeps
  /// anyway, or that are such ops themselves (an exported GELU's erf
  /// chain): recomputing them keeps nothing more.
  llvm::DenseSet<Operation *> pointwise;
  /// Values computed from the batch (not from parameters and constants alone).
  llvm::DenseSet<Value> fromData;

private:
  void findSides();
  void findBlocks();
  void findSegments();
  void findCores();
  void findPointwise();
};

StepAnalysis::StepAnalysis(func::FuncOp program) {
  Block &body = program.getBody().front();
  for (Operation &op : body.without_terminator()) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  for (BlockArgument arg : program.getArguments())
    if (program.getArgAttr(arg.getArgNumber(), PpcDialect::kInputAttrName))
      fromData.insert(arg);
  for (Operation *op : ops) {
    bool data = (op->getNumOperands() == 0 && !isPure(op)) ||
                llvm::any_of(op->getOperands(), [&](Value v) { return fromData.contains(v); });
    if (data)
      fromData.insert(op->result_begin(), op->result_end());
  }
  findSides();
  findBlocks();
  findCores();
  findPointwise();
}

/// Forward and backward by provenance; an op without it (a collective the
/// partitioner inserted, a gathered parameter) goes with its first user.
void StepAnalysis::findSides() {
  for (Operation *op : llvm::reverse(ops)) {
    std::optional<int64_t> mb = intAttrOf(op, kMicroBatchAttrName);
    Side s = Side::Other;
    if (op->hasAttr(kForwardOpAttrName))
      s = Side::Forward;
    else if (op->hasAttr(kBackwardOfAttrName))
      s = Side::Backward;
    Operation *first = firstUser(op);
    if (first && !op->hasAttr(kForwardOpAttrName) && !op->hasAttr(kBackwardOfAttrName))
      s = side.lookup(first);
    if (!mb && first && microBatch.count(first))
      mb = microBatch[first];
    side[op] = s;
    if (mb)
      microBatch[op] = *mb;
  }
}

void StepAnalysis::findBlocks() {
  llvm::DenseSet<llvm::StringRef> scopes;
  for (Operation *op : llvm::reverse(ops)) {
    if (sideOf(op) != Side::Forward)
      continue;
    std::string scope;
    if (op->hasAttr(kForwardOpAttrName)) {
      scope = scopeOf(op->getLoc());
    } else {
      // Inserted ops go with their first user.
      Operation *first = firstUser(op);
      if (first)
        scope = block.lookup(first);
    }
    block[op] = scope;
  }
  llvm::DenseSet<llvm::StringRef> seen;
  for (Operation *op : ops)
    if (sideOf(op) == Side::Forward && !block[op].empty() && seen.insert(block[op]).second)
      blocks.push_back(block[op]);
  if (blocks.empty())
    findSegments();
}

/// Without named blocks: segments between the forward's cut points, the
/// points where one activation is all the rest of the forward reads.
void StepAnalysis::findSegments() {
  blocks.clear();
  std::map<int64_t, llvm::SmallVector<Operation *>> forwardOf;
  for (Operation *op : ops)
    if (sideOf(op) == Side::Forward)
      forwardOf[microBatch.lookup(op)].push_back(op);
  for (auto &[mb, forward] : forwardOf) {
    llvm::DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(forward))
      position[op] = i;
    // Per position, how many activations defined at or before it are read
    // after it.
    std::vector<int64_t> open(forward.size() + 1, 0);
    for (auto [i, op] : llvm::enumerate(forward))
      for (Value v : op->getResults()) {
        // Float activations: token ids and labels (integers) are read
        // throughout the forward.
        if (!fromData.contains(v) || !llvm::isa<FloatType>(getElementTypeOrSelf(v.getType())))
          continue;
        int64_t last = i;
        for (Operation *user : v.getUsers())
          if (position.count(user))
            last = std::max(last, position[user]);
        ++open[i];
        --open[last];
      }
    int64_t running = 0, segment = 0, gemms = 0;
    llvm::SmallVector<Operation *> members;
    auto close = [&] {
      std::string name = llvm::formatv("segment {0}", segment).str();
      if (gemms >= 2) {
        for (Operation *op : members)
          block[op] = name;
        ++segment;
        if (mb == forwardOf.begin()->first)
          blocks.push_back(name);
      } else {
        for (Operation *op : members)
          block[op] = "";
      }
      members.clear();
      gemms = 0;
    };
    for (auto [i, op] : llvm::enumerate(forward)) {
      running += open[i];
      members.push_back(op);
      gemms += isGemm(op);
      if (running == 1 &&
          llvm::any_of(op->getResults(), [&](Value v) { return fromData.contains(v); }))
        close();
    }
    close();
  }
}

/// The attention cores: the forward ops on the paths from a GEMM of two
/// activations (Q·Kᵀ) to the next one (P·V), that GEMM excluded.
void StepAnalysis::findCores() {
  auto activationGemm = [&](Operation *op) {
    return op && sideOf(op) == Side::Forward && isGemm(op) &&
           llvm::all_of(op->getOperands(), [&](Value v) { return fromData.contains(v); });
  };
  for (Operation *product : ops) {
    if (!activationGemm(product))
      continue;
    // Back from P·V's operands, through anything but GEMMs, to Q·Kᵀ.
    llvm::SmallVector<Operation *> worklist;
    llvm::DenseSet<Operation *> between;
    llvm::DenseSet<Operation *> starts;
    for (Value v : product->getOperands())
      if (Operation *def = v.getDefiningOp())
        worklist.push_back(def);
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!index.count(op) || sideOf(op) != Side::Forward || between.contains(op) ||
          microBatch.lookup(op) != microBatch.lookup(product))
        continue;
      if (isGemm(op)) {
        if (activationGemm(op))
          starts.insert(op);
        continue;
      }
      between.insert(op);
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          worklist.push_back(def);
    }
    if (starts.empty())
      continue;
    // Of those, the ones that Q·Kᵀ reaches.
    llvm::DenseSet<Operation *> reached(starts.begin(), starts.end());
    for (Operation *op : ops)
      if (between.contains(op) && llvm::any_of(op->getOperands(), [&](Value v) {
            return reached.contains(v.getDefiningOp());
          }))
        reached.insert(op);
    core.insert(reached.begin(), reached.end());
  }
}

void StepAnalysis::findPointwise() {
  auto readByBackward = [&](Value v) {
    return llvm::any_of(v.getUsers(),
                        [&](Operation *user) { return sideOf(user) == Side::Backward; });
  };
  for (Operation *op : ops) {
    if (sideOf(op) != Side::Forward || !llvm::isa<ElementwiseOpInterface>(op) ||
        block.lookup(op).empty() || core.contains(op))
      continue;
    // An attention core's clones read the original (outside their region).
    if (llvm::any_of(op->getUsers(), [&](Operation *user) { return core.contains(user); }))
      continue;
    bool cheap = llvm::all_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return !fromData.contains(v) || pointwise.contains(def) ||
             (readByBackward(v) && !core.contains(def));
    });
    if (cheap)
      pointwise.insert(op);
  }
}

/// The forward ops of one micro-batch recomputed as one.
struct Region {
  int64_t mb;
  std::string block;
  Level level;
  llvm::SmallVector<Operation *> ops;
};

/// How a region is recomputed.
struct RegionPlan {
  /// The region's values backward ops read.
  llvm::SmallVector<Value> recomputed;
  /// The ops that compute them again, in program order.
  llvm::SmallVector<Operation *> clones;
  /// Where the clones go: the first backward op reading one of the values.
  Operation *before = nullptr;
  /// Bytes no longer kept from the forward to the backward.
  int64_t savedBytes = 0;
};

bool cloneable(Operation *op) {
  return isPure(op) && !op->hasTrait<OpTrait::ConstantLike>() && op->getNumRegions() == 0;
}

/// The regions of `levels`; with `pointwise`, every block left at none also
/// has its pointwise ops as a region of level none, which planRegion
/// recomputes only for the backward's elementwise readers (their fused
/// kernels compute the values again: nothing is stored or read back).
std::vector<Region> regionsOf(const StepAnalysis &a, const std::map<std::string, Level> &levels,
                              bool pointwise = false) {
  // Selective recomputes an attention core and the elementwise chains of
  // a block apart: each when its own values are first read.
  using Key = std::tuple<int64_t, std::string, bool>;
  llvm::MapVector<Key, Region, std::map<Key, unsigned>> regions;
  for (Operation *op : a.ops) {
    if (a.sideOf(op) != Side::Forward || !cloneable(op))
      continue;
    // A copy of what parameters and constants alone compute (a bf16 copy of
    // a weight), made for the backward (ZeRO 3 gathers the weight again for
    // it: ppc-partition), is read by backward ops only and placed after the
    // values a clone would have to precede: it is left where it is. (The
    // forward's own copy is recomputed like any other value of the block.)
    if (llvm::none_of(op->getResults(), [&](Value v) { return a.fromData.contains(v); }) &&
        llvm::none_of(op->getUsers(),
                      [&](Operation *user) { return a.sideOf(user) == Side::Forward; }))
      continue;
    const std::string &block = a.block.lookup(op);
    auto it = levels.find(block);
    Level level = it == levels.end() ? Level::None : it->second;
    bool inCore = a.core.contains(op);
    if (level == Level::None &&
        (!pointwise || block.empty() || inCore || !a.pointwise.contains(op)))
      continue;
    if (level == Level::Selective && !inCore && !a.pointwise.contains(op))
      continue;
    int64_t mb = a.microBatch.lookup(op);
    Region &region = regions[{mb, block, level == Level::Selective && inCore}];
    region.mb = mb;
    region.block = block;
    region.level = level;
    region.ops.push_back(op);
  }
  std::vector<Region> result;
  for (auto &entry : regions)
    result.push_back(std::move(entry.second));
  return result;
}

RegionPlan planRegion(const StepAnalysis &a, const Region &region) {
  RegionPlan plan;
  llvm::DenseSet<Operation *> members(region.ops.begin(), region.ops.end());
  llvm::DenseSet<Operation *> needed;
  llvm::SmallVector<Operation *> worklist;
  // At level none (pointwise), a value is recomputed only where every
  // backward op reading it is elementwise, so that their fused kernel
  // computes it again; a value a GEMM reads is kept.
  auto keptForOthers = [&](Value v) {
    return region.level == Level::None && llvm::any_of(v.getUsers(), [&](Operation *user) {
             return a.readsRecomputed(user) && !llvm::isa<ElementwiseOpInterface>(user);
           });
  };
  for (Operation *op : region.ops)
    for (Value v : op->getResults()) {
      if (keptForOthers(v))
        continue;
      for (Operation *user : v.getUsers()) {
        if (!a.readsRecomputed(user))
          continue;
        if (plan.recomputed.empty() || plan.recomputed.back() != v) {
          plan.recomputed.push_back(v);
          plan.savedBytes += tensorBytes(v);
        }
        if (!plan.before || a.index.lookup(user) < a.index.lookup(plan.before))
          plan.before = user;
        if (needed.insert(op).second)
          worklist.push_back(op);
      }
    }
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (def && members.contains(def) && needed.insert(def).second)
        worklist.push_back(def);
    }
  }
  for (Operation *op : region.ops)
    if (needed.contains(op))
      plan.clones.push_back(op);
  return plan;
}

void applyRegion(StepAnalysis &a, const Region &region, const RegionPlan &plan) {
  if (plan.clones.empty())
    return;
  OpBuilder b(plan.before);
  IRMapping mapping;
  StringAttr blockName = b.getStringAttr(region.block);
  Attribute slot = plan.before->getAttr(PpcDialect::kSlotAttrName);
  for (Operation *op : plan.clones) {
    Operation *clone = b.clone(*op, mapping);
    std::optional<int64_t> forward = intAttrOf(op, kForwardOpAttrName);
    clone->removeAttr(kForwardOpAttrName);
    if (forward)
      clone->setAttr(kBackwardOfAttrName, b.getI64IntegerAttr(*forward));
    clone->setAttr(kRecomputedAttrName, blockName);
    if (slot)
      clone->setAttr(PpcDialect::kSlotAttrName, slot);
    a.side[clone] = Side::Backward;
    a.microBatch[clone] = region.mb;
  }
  for (Value v : plan.recomputed) {
    Value again = mapping.lookup(v);
    for (OpOperand &use : llvm::make_early_inc_range(v.getUses()))
      if (a.readsRecomputed(use.getOwner()))
        use.set(again);
  }
}

void recompute(func::FuncOp program, const std::map<std::string, Level> &levels,
               bool pointwise = false) {
  StepAnalysis a(program);
  for (const Region &region : regionsOf(a, levels, pointwise))
    applyRegion(a, region, planRegion(a, region));
  llvm::SmallVector<NamedAttribute> chosen;
  Builder b(program.getContext());
  for (const std::string &block : a.blocks) {
    auto it = levels.find(block);
    if (it != levels.end() && it->second != Level::None)
      chosen.push_back(b.getNamedAttr(block, b.getStringAttr(levelName(it->second))));
  }
  if (!chosen.empty())
    program->setAttr(kRecomputeAttrName, b.getDictionaryAttr(chosen));
}

/// The least recomputation under which `program`'s memory plan fits
/// `budget`: per block, upgrades by memory saved per second of
/// recomputation (selective before full: the attention core is cheap to
/// recompute and large), the shortest prefix of them that fits, found by
/// bisection over trial copies of the program.
FailureOr<std::map<std::string, Level>> chooseLevels(func::FuncOp program, double budget,
                                                     const AxisSizes &sizes, bool pointwise) {
  auto peakOf = [&](const std::map<std::string, Level> &levels) -> FailureOr<int64_t> {
    if (levels.empty() && !pointwise)
      return peakLiveBytes(program);
    func::FuncOp copy = program.clone();
    recompute(copy, levels, pointwise);
    FailureOr<int64_t> peak = peakLiveBytes(copy);
    copy->erase();
    return peak;
  };
  FailureOr<int64_t> peak = peakOf({});
  if (failed(peak))
    return failure();
  if (*peak <= budget)
    return std::map<std::string, Level>{};

  StepAnalysis a(program);
  DeviceModel device;
  struct Upgrade {
    std::string block;
    Level level;
    double ratio;
  };
  std::vector<Upgrade> selective, full;
  for (const std::string &block : a.blocks)
    for (Level level : {Level::Selective, Level::Full}) {
      double saved = 0, seconds = 0;
      for (const Region &region : regionsOf(a, {{block, level}})) {
        if (region.mb != 0)
          continue;
        RegionPlan plan = planRegion(a, region);
        saved += plan.savedBytes;
        for (Operation *op : plan.clones)
          seconds += localOpSeconds(op, device, sizes);
      }
      if (saved <= 0)
        continue;
      Upgrade upgrade{block, level, saved / std::max(seconds, 1e-12)};
      (level == Level::Selective ? selective : full).push_back(upgrade);
    }
  auto byRatio = [](const Upgrade &x, const Upgrade &y) { return x.ratio > y.ratio; };
  std::stable_sort(selective.begin(), selective.end(), byRatio);
  std::stable_sort(full.begin(), full.end(), byRatio);
  std::vector<Upgrade> upgrades = selective;
  upgrades.insert(upgrades.end(), full.begin(), full.end());
  auto levelsOf = [&](size_t k) {
    std::map<std::string, Level> levels;
    for (size_t i = 0; i < k; ++i)
      levels[upgrades[i].block] = upgrades[i].level;
    return levels;
  };
  size_t lo = 1, hi = upgrades.size();
  if (hi == 0)
    return std::map<std::string, Level>{};
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    FailureOr<int64_t> trial = peakOf(levelsOf(mid));
    if (failed(trial))
      return failure();
    if (*trial <= budget)
      hi = mid;
    else
      lo = mid + 1;
  }
  return levelsOf(lo);
}

struct RecomputePass : impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<RecomputePolicy> parsed = parseRecomputePolicy(policy);
    if (!parsed) {
      module.emitError() << "recompute policy '" << policy
                         << "' is not one of none, selective, full, auto";
      return signalPassFailure();
    }
    if (*parsed == RecomputePolicy::None) {
      if (pointwise)
        for (func::FuncOp program : trainingPrograms(module))
          recompute(program, {}, /*pointwise=*/true);
      return;
    }
    AxisSizes sizes;
    if (auto mesh = module.lookupSymbol<MeshOp>("mesh"))
      for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
        sizes[name] = size;
    for (func::FuncOp program : trainingPrograms(module)) {
      if (*parsed == RecomputePolicy::Auto) {
        std::map<std::string, Level> levels;
        FailureOr<std::map<std::string, Level>> chosen =
            chooseLevels(program, memoryPerRank, sizes, pointwise);
        if (failed(chosen))
          return signalPassFailure();
        levels = std::move(*chosen);
        if (!levels.empty() || pointwise)
          recompute(program, levels, pointwise);
      } else {
        recomputeEveryBlock(program, *parsed);
      }
    }
  }
};

} // namespace

void recomputeEveryBlock(func::FuncOp program, RecomputePolicy policy) {
  if (policy != RecomputePolicy::Selective && policy != RecomputePolicy::Full)
    return;
  Level level = policy == RecomputePolicy::Full ? Level::Full : Level::Selective;
  std::map<std::string, Level> levels;
  for (const std::string &block : StepAnalysis(program).blocks)
    levels[block] = level;
  if (!levels.empty())
    recompute(program, levels);
}

std::vector<BlockActivations> describeBlockActivations(func::FuncOp program) {
  StepAnalysis a(program);
  std::vector<BlockActivations> result;
  llvm::StringMap<size_t> position;
  auto dict = program->getAttrOfType<DictionaryAttr>(kRecomputeAttrName);
  for (const std::string &block : a.blocks) {
    position[block] = result.size();
    BlockActivations entry;
    entry.block = block;
    if (dict)
      if (auto level = dict.getAs<StringAttr>(block))
        entry.level = level.getValue().str();
    result.push_back(entry);
  }
  // The block whose backward an op of micro-batch 0 is part of: a clone's
  // own, a gradient op's forward op's, an inserted op's first user's.
  llvm::DenseMap<int64_t, std::string> blockOfForward;
  for (Operation *op : a.ops)
    if (a.sideOf(op) == Side::Forward && a.microBatch.lookup(op) == 0)
      if (auto forward = intAttrOf(op, kForwardOpAttrName))
        blockOfForward[*forward] = a.block.lookup(op);
  llvm::DenseMap<Operation *, std::string> backwardBlock;
  for (Operation *op : llvm::reverse(a.ops)) {
    if (a.sideOf(op) != Side::Backward || a.microBatch.lookup(op) != 0)
      continue;
    std::string block;
    if (auto recomputed = op->getAttrOfType<StringAttr>(kRecomputedAttrName)) {
      block = recomputed.getValue().str();
      auto it = position.find(block);
      if (it != position.end()) {
        ++result[it->second].recomputedOps;
        for (Value v : op->getResults())
          if (llvm::any_of(v.getUsers(),
                           [&](Operation *user) { return !user->hasAttr(kRecomputedAttrName); }))
            result[it->second].recomputedBytes += tensorBytes(v);
      }
    } else if (auto forward = intAttrOf(op, kBackwardOfAttrName)) {
      block = blockOfForward.lookup(*forward);
    } else {
      Operation *first = a.firstUser(op);
      if (first)
        block = backwardBlock.lookup(first);
    }
    backwardBlock[op] = block;
  }
  // An activation of the forward (computed from the batch: not a weight,
  // nor a value computed from weights alone) counts for the first block (in
  // forward order) whose backward reads it: a block's input counts for the
  // block, as in Megatron-LM's per-layer formulas.
  auto count = [&](Value v) {
    if (!a.fromData.contains(v))
      return;
    std::optional<size_t> first;
    for (Operation *user : v.getUsers()) {
      auto it = backwardBlock.find(user);
      if (it == backwardBlock.end())
        continue;
      auto at = position.find(it->second);
      if (at != position.end() && (!first || at->second < *first))
        first = at->second;
    }
    if (first)
      result[*first].keptBytes += tensorBytes(v);
  };
  for (BlockArgument arg : program.getArguments())
    count(arg);
  for (Operation *op : a.ops)
    if (a.sideOf(op) == Side::Forward && a.microBatch.lookup(op) == 0)
      for (Value v : op->getResults())
        count(v);
  return result;
}

void printBlockActivations(llvm::ArrayRef<BlockActivations> blocks, llvm::StringRef title,
                           llvm::raw_ostream &os) {
  if (blocks.empty())
    return;
  auto size = [](int64_t bytes) {
    return bytes >= (int64_t(1) << 20) ? llvm::formatv("{0:F2} MiB", bytes / 1048576.0).str()
                                       : llvm::formatv("{0:F1} KiB", bytes / 1024.0).str();
  };
  os << "activations kept for the backward per block (micro-batch 0): " << title << "\n";
  for (size_t i = 0; i < blocks.size();) {
    size_t j = i + 1;
    while (j < blocks.size() && blocks[j].keptBytes == blocks[i].keptBytes &&
           blocks[j].level == blocks[i].level &&
           blocks[j].recomputedOps == blocks[i].recomputedOps &&
           blocks[j].recomputedBytes == blocks[i].recomputedBytes)
      ++j;
    std::string name = j == i + 1 ? blocks[i].block
                                  : llvm::formatv("{0} .. {1} ({2} blocks)", blocks[i].block,
                                                  blocks[j - 1].block, j - i)
                                        .str();
    os << llvm::formatv("  {0,-40} {1,12} ({2} bytes)  recompute {3}", name,
                        size(blocks[i].keptBytes), blocks[i].keptBytes, blocks[i].level);
    if (blocks[i].recomputedOps && blocks[i].level == "none")
      os << " (pointwise values in the gradients' kernels)";
    if (blocks[i].recomputedOps)
      os << llvm::formatv(", {0} ops again, {1} recomputed", blocks[i].recomputedOps,
                          size(blocks[i].recomputedBytes));
    os << "\n";
    i = j;
  }
}

} // namespace ppc
