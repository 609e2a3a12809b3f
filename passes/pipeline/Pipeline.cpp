//===- Pipeline.cpp - one program per pipeline rank, in schedule order ----===//
//
// ppc-pipeline turns the per-rank SPMD @train_step (partitioned over dp and
// tp) into one function per pipeline rank. It
//  1. assigns every forward op of @forward (ppc.fwd) to one of p * v
//     virtual stages: contiguous ranges of forward ops of balanced cost
//     (forward plus backward, priced by localOpSeconds), each with at least
//     one op that runs on it; backward ops (ppc.bwd) go to the stage of
//     their forward op;
//  2. places every op in a slot: F(mb, stage) or B(mb, stage) for the
//     computations of a micro-batch (ops without provenance, such as the
//     partitioner's collectives, go with their first user), the epilogue for
//     the step's own ops (gradient accumulation, clipping, the optimizer),
//     which run where their largest operand lives; values computed from
//     parameters and constants alone are recomputed on every rank that
//     uses them, right before the first use;
//  3. orders each rank's slots by the schedule (Schedule.h) and sends every
//     value a rank needs from another right after it is computed, received
//     right before its first use (or earlier, so that each channel is
//     received in the order it was sent); a value replicated over tp is
//     sent as 1/tp slices and all-gathered on arrival.
// A parameter used on several ranks (a tied embedding) is an argument of
// each; the rank of its first use updates it and sends the new value to the
// others at the end of the step. The loss and the other outputs are
// returned by the last pipeline rank.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcAttrs.h"
#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Provenance.h"
#include "passes/memory/Recompute.h"
#include "passes/pipeline/Schedule.h"
#include "passes/sharding/CostModel.h"
#include "passes/sharding/Layout.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>
#include <map>
#include <tuple>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_PIPELINE
#include "passes/Passes.h.inc"

namespace {

/// Where an op runs in one rank's program: its slot in the rank's order
/// (the epilogue is the last), then program order.
struct Position {
  int64_t slot = 0;
  int64_t index = 0;
  /// Within one op's place: 0 receives, 1 the op, 2 its sends.
  int64_t part = 1;
  bool operator<(const Position &o) const {
    return std::tie(slot, index, part) < std::tie(o.slot, o.index, o.part);
  }
};

/// A micro-batch computation an op belongs to.
struct Anchor {
  bool backward;
  int64_t forwardOp;
  int64_t microBatch;
};

class Splitter {
public:
  /// `budget`: bytes per rank the stages must fit in (0: unlimited).
  Splitter(ModuleOp module, func::FuncOp step, AxisSizes sizes, pipeline::Schedule schedule,
           double budget)
      : module(module), step(step), sizes(std::move(sizes)), schedule(std::move(schedule)),
        builder(module.getContext()), budget(budget) {}

  LogicalResult run();

private:
  void findStationary();
  /// Whether `op` computes stationary values, which every rank that uses
  /// them recomputes: such an op is placed on no stage.
  bool isRecomputed(Operation *op) const {
    return op->getNumResults() && stationary.contains(op->getResult(0));
  }
  void findAnchors();
  /// Groups the forward ops into units (unitOfForward), the smallest pieces
  /// a stage can hold, and returns how many there are.
  int64_t findUnits();
  LogicalResult assignStages();
  /// The virtual stage of each unit: `stages` contiguous ranges of balanced
  /// cost (`cost` per unit) that fit the memory budget.
  FailureOr<std::vector<int64_t>> cutStages(const std::vector<double> &cost);
  /// Estimated bytes of stage s holding units [from, to].
  using StageBytes = std::function<double(int64_t, int64_t, int64_t)>;
  /// Greedy contiguous packing of the units into stages, each under
  /// `limit` seconds (and under `memory`'s bytes, if given); false when it
  /// needs more stages than there are.
  bool pack(const std::vector<double> &cost, double limit,
            std::optional<std::pair<StageBytes, double>> memory,
            std::vector<int64_t> &stageOf) const;
  /// Stages of at most `limit` seconds each, cut where the fewest bytes
  /// cross (between layers rather than inside attention), then as balanced
  /// as possible.
  std::vector<int64_t> narrowestCuts(const std::vector<double> &cost, double limit);
  /// Estimated bytes each unit adds to its stage: the model states of the
  /// parameters it uses first, and the activations it keeps for the
  /// backward, which count once per micro-batch the schedule keeps in flight
  /// on the stage.
  void memoryPerUnit(int64_t numUnits, std::vector<double> &states,
                     std::vector<double> &activations);
  /// The most micro-batches whose forward has run and backward has not, per
  /// virtual stage.
  std::vector<int64_t> inFlight() const;
  void findParameterHomes();
  void placeOps();
  int64_t rankOfValue(Value v);
  LogicalResult buildRank(int64_t rank);
  /// What each rank needs (with the position of its first use there), the
  /// arguments it takes, who returns each result, and the messages.
  void collectNeeds();
  /// Records what the stationary values each rank needs are computed from,
  /// needed there right before them.
  void needStationaryOperands();
  /// Where `rank` first needs a result of `op`, if it needs one.
  std::optional<Position> firstNeed(int64_t rank, Operation *op) const;
  void need(int64_t rank, Value v, Position at);
  std::string slotName(int64_t rank, int64_t slot) const;

  ModuleOp module;
  func::FuncOp step;
  AxisSizes sizes;
  pipeline::Schedule schedule;
  OpBuilder builder;
  double budget;
  DeviceModel device;

  std::vector<Operation *> ops;
  llvm::DenseMap<Operation *, int64_t> indexOf;
  /// Values computed from parameters, the step and constants alone.
  llvm::DenseSet<Value> stationary;
  llvm::DenseMap<Operation *, Anchor> anchors;
  /// The unit of each forward op index: a forward op that runs on a stage,
  /// with the forward ops before it that run nowhere (constants, shapes,
  /// values computed from parameters alone, all recomputed where used).
  std::vector<int64_t> unitOfForward;
  /// The virtual stage of each forward op index.
  std::vector<int64_t> stageOfForward;
  /// Per rank, the slot index of (backward, micro-batch, stage).
  std::vector<std::map<std::tuple<bool, int64_t, int64_t>, int64_t>> slotOf;
  std::vector<std::vector<pipeline::Action>> slotsOfRank;
  /// The rank and position of every op that is not stationary.
  llvm::DenseMap<Operation *, std::pair<int64_t, Position>> placed;
  /// The rank that updates each parameter (and holds its state), by
  /// argument number of the parameter or of its state.
  llvm::DenseMap<unsigned, int64_t> home;
  /// Per rank: the first position at which it uses each value computed on
  /// another rank (or, for stationary values, that it computes itself).
  std::vector<llvm::DenseMap<Value, Position>> needs;
  /// The messages from one rank to another, by (sender, receiver), in send
  /// order with the sender's position of each.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<Position, Value>>> channels;
  /// Per rank: the arguments it takes.
  std::vector<llvm::SmallVector<unsigned>> argsOfRank;
  /// Per result of the step: the ranks that return it.
  std::vector<llvm::SmallVector<int64_t>> holders;
};

int64_t epilogueSlot(const std::vector<pipeline::Action> &slots) { return slots.size(); }

void Splitter::findStationary() {
  Block &body = step.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    if (step.getArgAttr(i, PpcDialect::kParamAttrName) ||
        step.getArgAttr(i, PpcDialect::kStepAttrName) ||
        step.getArgAttr(i, PpcDialect::kHyperAttrName))
      stationary.insert(arg);
  // A backward op stays with its stage even when its operands are all
  // stationary (a constant loss gradient times a weight): recomputing it
  // elsewhere would make that rank hold the weight too.
  for (Operation *op : ops)
    if (!op->hasAttr(kBackwardOfAttrName) &&
        llvm::all_of(op->getOperands(), [&](Value v) { return stationary.contains(v); }))
      for (Value r : op->getResults())
        stationary.insert(r);
}

void Splitter::findAnchors() {
  for (Operation *op : llvm::reverse(ops)) {
    auto mb = intAttrOf(op, kMicroBatchAttrName);
    auto fwd = intAttrOf(op, kForwardOpAttrName);
    auto bwd = intAttrOf(op, kBackwardOfAttrName);
    if (mb && (fwd || bwd)) {
      anchors[op] = Anchor{bwd.has_value(), fwd ? *fwd : *bwd, *mb};
      continue;
    }
    // Without provenance: with the first user that has one.
    Operation *first = nullptr;
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers())
        if (anchors.count(user) && (!first || indexOf[user] < indexOf[first]))
          first = user;
    // Copied before inserting: anchors[op] may grow the map and move
    // anchors[first] (a reference into it would dangle).
    if (first) {
      Anchor anchor = anchors.lookup(first);
      anchors[op] = anchor;
    }
  }
}

int64_t Splitter::findUnits() {
  int64_t numForward = 0;
  for (auto &[op, anchor] : anchors)
    numForward = std::max(numForward, anchor.forwardOp + 1);
  // Cutting only before forward ops of which some op is placed (not
  // recomputed) gives every stage something to run.
  std::vector<bool> runs(numForward, false);
  for (auto &[op, anchor] : anchors)
    if (!isRecomputed(op))
      runs[anchor.forwardOp] = true;
  int64_t numUnits = llvm::count(runs, true);
  unitOfForward.assign(numForward, 0);
  for (int64_t i = 0, unit = 0; i < numForward; ++i) {
    unitOfForward[i] = std::min(unit, std::max<int64_t>(numUnits - 1, 0));
    unit += runs[i];
  }
  return numUnits;
}

LogicalResult Splitter::assignStages() {
  int64_t numUnits = findUnits();
  int64_t stages = schedule.stages();
  if (numUnits < stages) {
    // A flag asks for more stages than there is work to cut into: an error
    // naming the flag, not a rank with nothing to run. Reported at the
    // module, which names no model node.
    int64_t dp = sizes.lookup("dp"), tp = sizes.lookup("tp"), v = schedule.virtualStages;
    std::string mesh = llvm::formatv("{0}x{1}x{2}", dp, tp, schedule.ranks).str();
    std::string most =
        numUnits / v >= 1
            ? llvm::formatv("at most {0} pipeline ranks (--mesh {1}x{2}x{0})", numUnits / v, dp, tp)
                  .str()
            : llvm::formatv("at most {0} stages in all", numUnits).str();
    InFlightDiagnostic diag = module.emitError()
                              << "--mesh " << mesh << ": " << stages << " pipeline stages";
    if (v > 1)
      diag << " (" << v << " virtual stages per rank)";
    return diag << ", but the model has only " << numUnits << " forward ops that run on a stage; "
                << most;
  }
  std::vector<double> cost(numUnits, 0);
  // Summed in program order, not the map's (pointer) order: the same
  // model must cut the same way on every run.
  for (Operation *op : ops)
    if (auto it = anchors.find(op); it != anchors.end() && it->second.microBatch == 0)
      cost[unitOfForward[it->second.forwardOp]] += localOpSeconds(op, device, sizes);
  FailureOr<std::vector<int64_t>> stageOfUnit = cutStages(cost);
  if (failed(stageOfUnit))
    return failure();
  stageOfForward.clear();
  for (int64_t unit : unitOfForward)
    stageOfForward.push_back((*stageOfUnit)[unit]);
  return success();
}

FailureOr<std::vector<int64_t>> Splitter::cutStages(const std::vector<double> &cost) {
  int64_t numUnits = cost.size(), stages = schedule.stages();
  // The smallest largest-stage cost at which the units, in order,
  // fit in `stages` contiguous ranges (by bisection).
  double lo = 0, hi = 0;
  for (double c : cost) {
    lo = std::max(lo, c);
    hi += c;
  }
  for (int iteration = 0; iteration < 100 && hi - lo > 1e-9 * hi; ++iteration) {
    double mid = (lo + hi) / 2;
    std::vector<int64_t> unused(numUnits);
    (pack(cost, mid, std::nullopt, unused) ? hi : lo) = mid;
  }
  std::vector<int64_t> stageOf = narrowestCuts(cost, hi * 1.1);
  if (budget <= 0)
    return stageOf;

  // Memory: every stage's estimated bytes must fit (a rank holding v
  // stages gives each 1/v of the budget).
  std::vector<double> states, activations;
  memoryPerUnit(numUnits, states, activations);
  std::vector<int64_t> flight = inFlight();
  StageBytes bytesOf = [&](int64_t stage, int64_t from, int64_t to) {
    double bytes = 0;
    for (int64_t i = from; i <= to; ++i)
      bytes += states[i] + flight[stage] * activations[i];
    return bytes;
  };
  double share = budget / schedule.virtualStages;
  auto fitsMemory = [&](const std::vector<int64_t> &stageOf) {
    for (int64_t s = 0, i = 0; s < stages; ++s) {
      int64_t from = i;
      while (i < numUnits && stageOf[i] == s)
        ++i;
      if (bytesOf(s, from, i - 1) > share)
        return false;
    }
    return true;
  };
  std::vector<int64_t> packed(numUnits);
  double packLo = hi, packHi = 0;
  for (double c : cost)
    packHi += c;
  if (!pack(cost, packHi, std::make_pair(bytesOf, share), packed) || !fitsMemory(packed)) {
    double total = 0;
    for (int64_t s = 0; s < stages; ++s)
      total = std::max(total, bytesOf(s, 0, numUnits - 1));
    return step.emitError() << "the pipeline stages do not fit " << static_cast<int64_t>(budget)
                            << " bytes per rank (memory-per-rank): the model's states and "
                               "activations are about "
                            << static_cast<int64_t>(total) << " bytes over " << stages
                            << " stages; use more pipeline ranks, ZeRO or tensor parallelism";
  }
  // The narrowest cuts where the balanced packing fits, else the most
  // balanced packing that does.
  if (pack(cost, hi * 1.1, std::make_pair(bytesOf, share), packed) && fitsMemory(packed))
    return stageOf;
  for (int iteration = 0; iteration < 100 && packHi - packLo > 1e-9 * packHi; ++iteration) {
    double mid = (packLo + packHi) / 2;
    bool ok = pack(cost, mid, std::make_pair(bytesOf, share), packed) && fitsMemory(packed);
    (ok ? packHi : packLo) = mid;
  }
  pack(cost, packHi, std::make_pair(bytesOf, share), stageOf);
  return stageOf;
}

bool Splitter::pack(const std::vector<double> &cost, double limit,
                    std::optional<std::pair<StageBytes, double>> memory,
                    std::vector<int64_t> &stageOf) const {
  int64_t stages = schedule.stages(), s = 0, from = 0;
  double load = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(cost.size()); ++i) {
    bool over = load + cost[i] > limit && load > 0;
    if (memory && i > from)
      over |= memory->first(std::min(s, stages - 1), from, i) > memory->second;
    if (over) {
      ++s;
      from = i;
      load = 0;
    }
    load += cost[i];
    stageOf[i] = s;
  }
  return s < stages;
}

std::vector<int64_t> Splitter::narrowestCuts(const std::vector<double> &cost, double limit) {
  // The width of the cut after unit i: bytes computed at or before i and
  // used by a forward op after it.
  int64_t numUnits = cost.size(), stages = schedule.stages();
  std::vector<double> width(numUnits + 1, 0);
  for (auto &[op, anchor] : anchors) {
    if (anchor.backward || anchor.microBatch != 0)
      continue;
    for (Value r : op->getResults()) {
      if (stationary.contains(r))
        continue;
      int64_t unit = unitOfForward[anchor.forwardOp], last = unit;
      for (Operation *user : r.getUsers())
        if (auto it = anchors.find(user); it != anchors.end() && !it->second.backward)
          last = std::max(last, unitOfForward[it->second.forwardOp]);
      width[unit] += tensorBytes(r);
      width[last] -= tensorBytes(r);
    }
  }
  for (int64_t i = 1; i < numUnits; ++i)
    width[i] += width[i - 1];
  std::vector<double> suffix(numUnits + 1, 0);
  for (int64_t i = numUnits - 1; i >= 0; --i)
    suffix[i] = suffix[i + 1] + cost[i];
  double balanced = suffix[0] / stages;
  std::vector<int64_t> stageOf(numUnits, 0);
  int64_t begin = 0;
  for (int64_t stage = 0; stage < stages; ++stage) {
    int64_t end = numUnits - 1; // the stage's last op
    if (stage + 1 < stages) {
      // Candidates: the stage stays under the limit and leaves the rest
      // enough room; the narrowest cut wins, then the most balanced.
      double load = 0, bestLoad = 0;
      std::optional<int64_t> best;
      auto key = [&](int64_t j, double l) {
        return std::make_pair(width[j], std::abs(l - balanced));
      };
      for (int64_t i = begin; i < numUnits - (stages - stage - 1); ++i) {
        load += cost[i];
        if (load > limit && i > begin)
          break;
        if (suffix[i + 1] > limit * (stages - stage - 1))
          continue;
        if (!best || key(i, load) < key(*best, bestLoad)) {
          best = i;
          bestLoad = load;
        }
      }
      end = best ? *best : begin;
    }
    for (int64_t i = begin; i <= end; ++i)
      stageOf[i] = stage;
    begin = end + 1;
  }
  return stageOf;
}

void Splitter::memoryPerUnit(int64_t numUnits, std::vector<double> &states,
                             std::vector<double> &activations) {
  states.assign(numUnits, 0);
  activations.assign(numUnits, 0);
  Block &body = step.getBody().front();
  // A parameter's states: itself, its gradient, its optimizer state.
  llvm::StringMap<double> stateBytes;
  for (BlockArgument arg : body.getArguments())
    if (auto state =
            step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), PpcDialect::kStateAttrName))
      stateBytes[state.getValue().split(':').second] += tensorBytes(arg);
  for (BlockArgument arg : body.getArguments()) {
    auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), PpcDialect::kParamAttrName);
    if (!name)
      continue;
    int64_t first = -1;
    for (Operation *user : arg.getUsers())
      if (auto it = anchors.find(user); it != anchors.end() && !it->second.backward)
        if (first < 0 || it->second.forwardOp < first)
          first = it->second.forwardOp;
    if (first >= 0)
      states[unitOfForward[first]] += 2 * tensorBytes(arg) + stateBytes.lookup(name.getValue());
  }
  // Activations kept for the backward (what a micro-batch in flight holds):
  // with the recomputation the planner priced (ppc-recompute applies it to
  // each stage's program later), what the backward and the recomputing
  // clones read in the step recomputed so.
  std::optional<RecomputePolicy> level;
  if (auto plan = step->getAttrOfType<DictionaryAttr>(PpcDialect::kPlanAttrName))
    if (auto name = plan.getAs<StringAttr>("recompute"))
      level = parseRecomputePolicy(name.getValue());
  IRMapping mapping;
  func::FuncOp recomputed;
  if (level == RecomputePolicy::Selective || level == RecomputePolicy::Full) {
    recomputed = step.clone(mapping);
    recomputeEveryBlock(recomputed, *level);
  }
  for (auto &[op, anchor] : anchors)
    if (!anchor.backward && anchor.microBatch == 0)
      for (Value r : op->getResults()) {
        if (stationary.contains(r))
          continue;
        bool kept =
            recomputed
                ? llvm::any_of(mapping.lookup(r).getUsers(),
                               [](Operation *user) { return user->hasAttr(kBackwardOfAttrName); })
                : llvm::any_of(r.getUsers(), [&](Operation *user) {
                    auto it = anchors.find(user);
                    return it != anchors.end() && it->second.backward;
                  });
        if (kept)
          activations[unitOfForward[anchor.forwardOp]] += tensorBytes(r);
      }
  if (recomputed)
    recomputed->erase();
}

std::vector<int64_t> Splitter::inFlight() const {
  std::vector<int64_t> peak(schedule.stages(), 0), now(schedule.stages(), 0);
  for (const auto &order : schedule.order)
    for (const pipeline::Action &a : order) {
      if (!a.isCompute())
        continue;
      now[a.stage] += a.kind == pipeline::Action::Forward ? 1 : -1;
      peak[a.stage] = std::max(peak[a.stage], now[a.stage]);
    }
  return peak;
}

void Splitter::findParameterHomes() {
  Block &body = step.getBody().front();
  // The parameters each stationary value is computed from.
  llvm::DenseMap<Value, llvm::SmallVector<unsigned, 2>> roots;
  for (BlockArgument arg : body.getArguments())
    if (step.getArgAttr(arg.getArgNumber(), PpcDialect::kParamAttrName))
      roots[arg] = {arg.getArgNumber()};
  for (Operation *op : ops) {
    if (!isRecomputed(op))
      continue;
    llvm::SmallVector<unsigned, 2> from;
    for (Value v : op->getOperands())
      for (unsigned p : roots.lookup(v))
        if (!llvm::is_contained(from, p))
          from.push_back(p);
    for (Value r : op->getResults())
      roots[r] = from;
  }
  for (auto &[op, anchor] : anchors) {
    int64_t stage = stageOfForward[anchor.forwardOp];
    for (Value v : op->getOperands())
      for (unsigned p : roots.lookup(v)) {
        auto [it, inserted] = home.try_emplace(p, stage);
        if (!inserted)
          it->second = std::min(it->second, stage);
      }
  }
  // Stages to ranks; a state lives with its parameter.
  llvm::StringMap<unsigned> paramByName;
  for (BlockArgument arg : body.getArguments())
    if (auto name =
            step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), PpcDialect::kParamAttrName)) {
      paramByName[name.getValue()] = arg.getArgNumber();
      auto it = home.find(arg.getArgNumber());
      home[arg.getArgNumber()] = it == home.end() ? 0 : schedule.rankOf(it->second);
    }
  for (BlockArgument arg : body.getArguments())
    if (auto state =
            step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), PpcDialect::kStateAttrName))
      home[arg.getArgNumber()] =
          home.lookup(paramByName.lookup(state.getValue().split(':').second));
}

int64_t Splitter::rankOfValue(Value v) {
  if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
    auto it = home.find(arg.getArgNumber());
    return it == home.end() ? -1 : it->second;
  }
  auto it = placed.find(v.getDefiningOp());
  return it == placed.end() ? -1 : it->second.first;
}

void Splitter::placeOps() {
  slotOf.resize(schedule.ranks);
  slotsOfRank.resize(schedule.ranks);
  for (int64_t r = 0; r < schedule.ranks; ++r)
    for (const pipeline::Action &a : schedule.order[r])
      if (a.isCompute()) {
        slotOf[r][{a.kind == pipeline::Action::Backward, a.microBatch, a.stage}] =
            slotsOfRank[r].size();
        slotsOfRank[r].push_back(a);
      }
  for (Operation *op : ops) {
    if (isRecomputed(op))
      continue;
    int64_t index = indexOf[op];
    if (auto it = anchors.find(op); it != anchors.end()) {
      const Anchor &a = it->second;
      int64_t stage = stageOfForward[a.forwardOp];
      int64_t rank = schedule.rankOf(stage);
      placed[op] = {rank, Position{slotOf[rank].at({a.backward, a.microBatch, stage}), index}};
      continue;
    }
    // An elementwise op of the step whose operands the micro-batches'
    // slots of one rank compute (the accumulation of each micro-batch's
    // gradient) runs in the slot of the last of them: in the epilogue it
    // would hold every micro-batch's gradient until the step ends.
    if (llvm::isa<ElementwiseOpInterface>(op)) {
      std::optional<std::pair<int64_t, Position>> latest;
      bool local = op->getNumOperands() > 0;
      for (Value v : op->getOperands()) {
        auto it = placed.find(v.getDefiningOp());
        if (it == placed.end() ||
            it->second.second.slot == epilogueSlot(slotsOfRank[it->second.first]) ||
            (latest && latest->first != it->second.first)) {
          local = false;
          break;
        }
        if (!latest || latest->second < it->second.second)
          latest = it->second;
      }
      if (local) {
        placed[op] = {latest->first, Position{latest->second.slot, index}};
        continue;
      }
    }
    // An op of the step itself: where its largest operand is (ties: a
    // parameter's or state's home, then the later rank).
    int64_t rank = -1, bestBytes = -1;
    bool bestIsArg = false;
    for (Value v : op->getOperands()) {
      int64_t r = rankOfValue(v);
      if (r < 0 || (stationary.contains(v) && !llvm::isa<BlockArgument>(v)))
        continue;
      auto type = llvm::cast<RankedTensorType>(v.getType());
      int64_t bytes = type.getNumElements();
      bool isArg = llvm::isa<BlockArgument>(v);
      if (std::tie(bytes, isArg, r) > std::tie(bestBytes, bestIsArg, rank)) {
        bestBytes = bytes;
        bestIsArg = isArg;
        rank = r;
      }
    }
    if (rank < 0)
      rank = schedule.ranks - 1;
    placed[op] = {rank, Position{epilogueSlot(slotsOfRank[rank]), index}};
  }
}

void Splitter::need(int64_t rank, Value v, Position at) {
  auto [it, inserted] = needs[rank].try_emplace(v, at);
  if (!inserted && at < it->second)
    it->second = at;
}

std::optional<Position> Splitter::firstNeed(int64_t rank, Operation *op) const {
  std::optional<Position> first;
  for (Value res : op->getResults())
    if (auto it = needs[rank].find(res); it != needs[rank].end())
      if (!first || it->second < *first)
        first = it->second;
  return first;
}

void Splitter::needStationaryOperands() {
  // In reverse program order, users first.
  for (Operation *op : llvm::reverse(ops)) {
    if (placed.count(op))
      continue;
    for (int64_t r = 0; r < schedule.ranks; ++r)
      if (std::optional<Position> first = firstNeed(r, op))
        for (Value v : op->getOperands())
          need(r, v, Position{first->slot, indexOf[op], 0});
  }
}

void Splitter::collectNeeds() {
  int64_t p = schedule.ranks;
  needs.clear();
  needs.resize(p);
  Block &body = step.getBody().front();
  auto ret = body.getTerminator();
  for (Operation *op : ops) {
    auto it = placed.find(op);
    if (it == placed.end())
      continue;
    for (Value v : op->getOperands())
      need(it->second.first, v, Position{it->second.second.slot, it->second.second.index, 0});
  }
  // Who returns each result: a parameter and its state by every rank
  // taking the parameter; the outputs by the last rank. A returned value
  // may be stationary (the learning rate the step reports, a parameter
  // whose gradient is a constant), computed only where it is returned: a
  // rank that returns it needs its operands too, even where nothing else
  // of the step runs (a last stage without parameters). Taking a parameter
  // for it makes that rank return the parameter too, hence the fixed point.
  holders.assign(ret->getNumOperands(), {});
  auto updated = updatedArguments(step);
  for (bool changed = true; changed;) {
    needStationaryOperands();
    changed = false;
    for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
      llvm::SmallVector<int64_t> &who = holders[i];
      for (int64_t r = 0; r < p; ++r) {
        bool holds = updated[i] ? needs[r].count(body.getArgument(*updated[i])) ||
                                      home.lookup(*updated[i]) == r
                                : r == p - 1;
        if (!holds || llvm::is_contained(who, r))
          continue;
        who.push_back(r);
        need(r, v, Position{epilogueSlot(slotsOfRank[r]), static_cast<int64_t>(ops.size()), 0});
        changed = true;
      }
    }
  }
  argsOfRank.assign(p, {});
  for (int64_t r = 0; r < p; ++r)
    for (BlockArgument arg : body.getArguments())
      if (needs[r].count(arg))
        argsOfRank[r].push_back(arg.getArgNumber());
  // The messages: what each rank needs that another computes, in the order
  // the sender computes it (the results of one op by number).
  for (int64_t to = 0; to < p; ++to)
    for (auto &[v, at] : needs[to]) {
      int64_t from = rankOfValue(v);
      if (stationary.contains(v) || from < 0 || from == to)
        continue;
      Position sent =
          llvm::isa<BlockArgument>(v) ? Position{0, -1, 2} : placed[v.getDefiningOp()].second;
      sent.part = 2;
      channels[{from, to}].push_back({sent, v});
    }
  auto number = [](Value v) {
    if (auto arg = llvm::dyn_cast<BlockArgument>(v))
      return arg.getArgNumber();
    return llvm::cast<OpResult>(v).getResultNumber();
  };
  for (auto &[ends, messages] : channels)
    llvm::sort(messages, [&](const auto &a, const auto &b) {
      return a.first < b.first || (!(b.first < a.first) && number(a.second) < number(b.second));
    });
}

std::string Splitter::slotName(int64_t rank, int64_t slot) const {
  if (slot == epilogueSlot(slotsOfRank[rank]))
    return "step";
  const pipeline::Action &a = slotsOfRank[rank][slot];
  return (a.kind == pipeline::Action::Backward ? "B" : "F") + std::to_string(a.microBatch) + "@s" +
         std::to_string(a.stage);
}

/// The dimension a value replicated over tp is sent in slices along: its
/// first that tp divides, or -1 (sent whole).
int64_t sliceDimForTp(Value v, int64_t tp) {
  if (tp == 1)
    return -1;
  auto type = llvm::cast<RankedTensorType>(v.getType());
  Operation *def = v.getDefiningOp();
  auto shardings =
      def ? def->getAttrOfType<ArrayAttr>(PpcDialect::kShardingsAttrName) : ArrayAttr();
  if (!shardings)
    return -1;
  Layout layout =
      fromAttr(llvm::cast<ShardingAttr>(shardings[llvm::cast<OpResult>(v).getResultNumber()]));
  for (const AxisList &axes : layout.dims)
    if (llvm::is_contained(axes, "tp"))
      return -1;
  if (llvm::is_contained(layout.partial, "tp"))
    return -1;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.getDimSize(d) % tp == 0)
      return d;
  return -1;
}

LogicalResult Splitter::buildRank(int64_t rank) {
  Block &body = step.getBody().front();
  MLIRContext *ctx = module.getContext();
  auto mesh = FlatSymbolRefAttr::get(ctx, "mesh");
  int64_t tp = sizes.lookup("tp");

  // What the rank runs, in order: its ops, the stationary ops it needs,
  // its receives (in each channel's send order) and its sends.
  struct Item {
    Position at;
    Operation *op = nullptr;
    Value message;
    int64_t peer = -1;
    bool send = false;
  };
  std::vector<Item> items;
  for (auto &[op, where] : placed)
    if (where.first == rank)
      items.push_back({where.second, op});
  for (Operation *op : ops)
    if (!placed.count(op))
      if (std::optional<Position> first = firstNeed(rank, op))
        items.push_back({Position{first->slot, indexOf[op], 1}, op});
  // Messages: for each other rank, what it computes that this one needs
  // (receive), and what this one computes that it needs (send).
  for (int64_t peer = 0; peer < schedule.ranks; ++peer) {
    if (peer == rank)
      continue;
    for (auto &[sent, v] : channels[{rank, peer}])
      items.push_back({sent, nullptr, v, peer, true});
    auto &incoming = channels[{peer, rank}];
    // Received no later than needed, and in send order.
    std::vector<Item> receives;
    std::optional<Position> latest;
    for (auto &[sent, v] : llvm::reverse(incoming)) {
      Position at = needs[rank][v];
      at.part = 0;
      if (latest && *latest < at)
        at = *latest;
      latest = at;
      receives.push_back({at, nullptr, v, peer, false});
    }
    items.insert(items.end(), receives.rbegin(), receives.rend());
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item &a, const Item &b) { return a.at < b.at; });

  llvm::SmallVector<Type> argTypes;
  for (unsigned i : argsOfRank[rank])
    argTypes.push_back(body.getArgument(i).getType());
  builder.setInsertionPoint(step);
  auto fn = builder.create<func::FuncOp>(step.getLoc(),
                                         (step.getSymName() + "_pp" + std::to_string(rank)).str(),
                                         builder.getFunctionType(argTypes, {}));
  for (auto [n, i] : llvm::enumerate(argsOfRank[rank]))
    fn.setArgAttrs(n, step.getArgAttrDict(i));
  Block *entry = fn.addEntryBlock();
  IRMapping mapping;
  for (auto [n, i] : llvm::enumerate(argsOfRank[rank]))
    mapping.map(body.getArgument(i), entry->getArgument(n));
  builder.setInsertionPointToEnd(entry);
  for (const Item &item : items) {
    std::string slot = slotName(rank, item.at.slot);
    if (item.op) {
      for (Value v : item.op->getOperands())
        if (!mapping.contains(v))
          return item.op->emitError()
                 << "pipeline rank " << rank << " runs this op in slot " << slot
                 << " before one of its operands is there (a schedule or placement bug)";
      Operation *clone = builder.clone(*item.op, mapping);
      clone->setAttr(PpcDialect::kSlotAttrName, builder.getStringAttr(slot));
      continue;
    }
    Value v = item.message;
    Location loc = v.getLoc();
    auto type = llvm::cast<RankedTensorType>(v.getType());
    int64_t dim = sliceDimForTp(v, tp);
    auto named = [&](Operation *op) {
      if (Operation *def = v.getDefiningOp())
        if (auto name = llvm::dyn_cast<NameLoc>(def->getLoc()))
          op->setAttr(PpcDialect::kValueAttrName, name.getName());
      op->setAttr(PpcDialect::kSlotAttrName, builder.getStringAttr(slot));
    };
    if (item.send) {
      if (!mapping.contains(v))
        return step.emitError() << "pipeline rank " << rank << " sends a value before computing it";
      Value out = mapping.lookup(v);
      if (dim >= 0) {
        llvm::SmallVector<int64_t> shape(type.getShape());
        shape[dim] /= tp;
        out = builder.create<AllSliceOp>(loc, type.clone(shape), out, mesh,
                                         builder.getStrArrayAttr({"tp"}), dim);
        named(out.getDefiningOp());
      }
      named(builder.create<SendOp>(loc, out, mesh, "pp", item.peer));
      continue;
    }
    llvm::SmallVector<int64_t> shape(type.getShape());
    if (dim >= 0)
      shape[dim] /= tp;
    auto recv = builder.create<RecvOp>(loc, type.clone(shape), mesh, "pp", item.peer);
    named(recv);
    Value in = recv;
    if (dim >= 0) {
      in = builder.create<AllGatherOp>(loc, type, in, mesh, builder.getStrArrayAttr({"tp"}), dim);
      named(in.getDefiningOp());
    }
    mapping.map(v, in);
  }

  llvm::SmallVector<Value> results;
  llvm::SmallVector<DictionaryAttr> resultAttrs;
  auto ret = body.getTerminator();
  for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
    if (!llvm::is_contained(holders[i], rank))
      continue;
    if (!mapping.contains(v))
      return step.emitError() << "pipeline rank " << rank << " returns result " << i
                              << " without computing or receiving it";
    results.push_back(mapping.lookup(v));
    resultAttrs.push_back(step.getResultAttrDict(i));
  }
  builder.create<func::ReturnOp>(ret->getLoc(), results);
  fn.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  fn.setAllResultAttrs(resultAttrs);
  for (NamedAttribute attr : step->getDiscardableAttrs())
    fn->setAttr(attr.getName(), attr.getValue());
  fn->setAttr(PpcDialect::kPipelineRankAttrName, builder.getI64IntegerAttr(rank));
  llvm::SmallVector<int64_t> stages;
  for (int64_t s = rank; s < schedule.stages(); s += schedule.ranks)
    stages.push_back(s);
  fn->setAttr(PpcDialect::kStagesAttrName, builder.getDenseI64ArrayAttr(stages));
  return success();
}

LogicalResult Splitter::run() {
  for (Operation &op : step.getBody().front().without_terminator()) {
    indexOf[&op] = ops.size();
    ops.push_back(&op);
  }
  findStationary();
  findAnchors();
  if (failed(assignStages()))
    return failure();
  findParameterHomes();
  placeOps();
  collectNeeds();
  for (int64_t r = 0; r < schedule.ranks; ++r)
    if (failed(buildRank(r)))
      return failure();
  Builder b(module.getContext());
  module->setAttr(
      PpcDialect::kScheduleAttrName,
      b.getDictionaryAttr({
          b.getNamedAttr("kind", b.getStringAttr(pipeline::scheduleName(schedule.kind))),
          b.getNamedAttr("ranks", b.getI64IntegerAttr(schedule.ranks)),
          b.getNamedAttr("virtual_stages", b.getI64IntegerAttr(schedule.virtualStages)),
          b.getNamedAttr("micro_batches", b.getI64IntegerAttr(schedule.microBatches)),
      }));
  step.erase();
  return success();
}

struct PipelinePass : impl::PipelineBase<PipelinePass> {
  using PipelineBase::PipelineBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    auto mesh = module.lookupSymbol<MeshOp>("mesh");
    if (!step || !mesh) {
      module.emitError() << "no partitioned @train_step and @mesh; run ppc-partition first";
      return signalPassFailure();
    }
    AxisSizes sizes;
    for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
      sizes[name] = size;
    int64_t p = sizes.lookup("pp");
    auto kind = pipeline::parseScheduleKind(scheduleName);
    if (!kind) {
      module.emitError() << "schedule '" << scheduleName
                         << "' is not one of gpipe, 1f1b, interleaved";
      return signalPassFailure();
    }
    int64_t v = virtualStages > 0                              ? virtualStages
                : *kind == pipeline::ScheduleKind::Interleaved ? 2
                                                               : 1;
    int64_t m = 0;
    step.walk([&](Operation *op) {
      if (auto mb = intAttrOf(op, kMicroBatchAttrName))
        m = std::max(m, *mb + 1);
    });
    auto schedule = pipeline::buildSchedule(*kind, p, std::max<int64_t>(m, 1), v);
    if (!schedule) {
      module.emitError() << llvm::toString(schedule.takeError());
      return signalPassFailure();
    }
    if (auto error = pipeline::checkSchedule(*schedule)) {
      module.emitError() << "schedule check failed: " << llvm::toString(std::move(error));
      return signalPassFailure();
    }
    if (p == 1 && v == 1)
      return;
    if (failed(Splitter(module, step, std::move(sizes), std::move(*schedule), memoryPerRank).run()))
      return signalPassFailure();
  }
};

} // namespace
} // namespace ppc
