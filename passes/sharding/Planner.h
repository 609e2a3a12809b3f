//===- Planner.h - the tensor-parallel layout search -------------*- C++ -*-===//
//
// The search of ppc-plan-shardings (Passes.td): parameters with the same
// shape and uses form a class, a move gives a class a tp layout, and moves
// are taken greedily by bytes saved per second added while the plan exceeds
// the budget, then by time saved. `ppc plan` runs the same search with no
// budget and prices the plans it passes through (PlanSearch.h).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_SHARDING_PLANNER_H
#define PPC_PASSES_SHARDING_PLANNER_H

#include "passes/memory/Offload.h"
#include "passes/sharding/CostModel.h"

#include <map>
#include <mutex>
#include <set>

namespace ppc {

/// A tensor-parallel layout of a parameter: dimension `dim` split over tp
/// in `blocks` blocks, or replicated (dim < 0).
struct TpOption {
  int64_t dim = -1;
  int64_t blocks = 1;
  bool operator==(const TpOption &o) const { return dim == o.dim && blocks == o.blocks; }
  bool operator!=(const TpOption &o) const { return !(*this == o); }
};

/// Parameters decided together, and what they may be.
struct ParamClass {
  llvm::SmallVector<unsigned> params;
  llvm::SmallVector<TpOption> options;
  bool pinned = false;
};

/// What the pricer said of each plan of one step (by the plan's key): its
/// cost before ZeRO and the layouts its uses asked of arguments. The pricer
/// does not depend on the ZeRO stage, so the searches of every stage (for
/// steps recomputed alike) share one: most of their plans are the same.
struct PriceCache {
  struct Entry {
    PlanCost cost;
    llvm::SmallVector<LayoutRequest> requests;
  };
  std::map<std::string, Entry> entries;
};

class Planner {
public:
  /// `zero`: the ZeRO stage the plan's memory is counted for; `offload`:
  /// what lives in host memory, whose bytes must fit `hostMemoryPerRank`.
  Planner(mlir::func::FuncOp step, AxisSizes sizes, DeviceModel device, double memoryPerRank,
          bool sequenceParallel, int64_t zero, OffloadLevel offload, double hostMemoryPerRank,
          PriceCache &cache)
      : step(step), sizes(sizes), device(device), pricer(step, sizes, device, sequenceParallel),
        budget(memoryPerRank), zero(zero), offload(offload), hostBudget(hostMemoryPerRank),
        cache(cache) {}

  /// Reads parameters and pins, forms classes and their options.
  mlir::LogicalResult setUp(llvm::ArrayRef<std::string> pins);
  /// Runs the search from `warm` (argument layouts: another search's plan,
  /// whose classes' tp splits it starts from; replicated when empty); the
  /// argument layouts of the chosen plan. `passed`, when given, receives the
  /// argument layouts of every plan the search moved to, in order, from the
  /// start: with a budget of 0 bytes (nothing fits) that is the chain of
  /// plans from replicated to the most split, each taking the move that
  /// saves the most bytes per second it adds.
  mlir::FailureOr<llvm::SmallVector<Layout>>
  run(llvm::ArrayRef<Layout> warm = {}, std::vector<llvm::SmallVector<Layout>> *passed = nullptr);
  /// The chosen plan's cost, and how many plans were priced.
  const PlanCost &chosenCost() const { return chosen; }
  bool chosenFits() const { return fits(chosen); }
  size_t plansPriced() const { return memo.size(); }

private:
  using Plan = llvm::SmallVector<TpOption>;
  struct Scored {
    Plan plan;
    PlanCost cost;
  };
  llvm::SmallVector<Layout> layoutsOf(const Plan &plan);
  mlir::FailureOr<PlanCost> price(const Plan &plan, llvm::SmallVectorImpl<LayoutRequest> *requests);
  /// `plan` with every request on a free, replicated class granted, until
  /// none is left.
  mlir::FailureOr<Scored> closure(Plan plan);
  bool fits(const PlanCost &cost) const {
    return cost.peakBytes <= budget && cost.hostBytes <= hostBudget;
  }

  mlir::func::FuncOp step;
  AxisSizes sizes;
  DeviceModel device;
  PlanPricer pricer;
  double budget;
  int64_t zero;
  OffloadLevel offload;
  double hostBudget;
  /// What `offload` does to the plan with argument layouts `layouts`: the
  /// device bytes it saves, the host's bytes, and the seconds of its copies
  /// and of the host's optimizer step (PlanCost's fields).
  void addOffload(llvm::ArrayRef<Layout> layouts, PlanCost &cost);
  /// Bytes per rank that ZeRO stage `zero` takes off the model states of
  /// the plan with argument layouts `layouts` (the pricer counts them whole
  /// on every data-parallel rank).
  double zeroSavings(llvm::ArrayRef<Layout> layouts);
  /// Argument `arg`'s bytes on a rank under `layout` (none when the layout
  /// does not divide it), and whether ZeRO can shard it over dp.
  struct Share {
    double bytes;
    bool zeroShardable;
  };
  std::optional<Share> shareOf(unsigned arg, const Layout &layout);
  int64_t tp() const { return sizes.lookup("tp"); }

  llvm::SmallVector<ParamClass> classes;
  /// The class of each argument that is a parameter or its state, or -1.
  llvm::SmallVector<int> classOf;
  /// The plans this search priced.
  std::set<std::string> memo;
  /// Guards `memo` and `cache` while threads price moves.
  std::mutex lock;
  PriceCache &cache;
  PlanCost chosen;
};

} // namespace ppc

#endif // PPC_PASSES_SHARDING_PLANNER_H
