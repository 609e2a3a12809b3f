//===- PlanSearch.h - the whole layout from the device count -----*- C++ -*-===//
//
// `ppc plan`'s search: every factorisation of N devices into dp x tp x pp,
// with the ZeRO stage, sequence parallelism, the micro-batch count, the
// pipeline schedule and its virtual stages, recomputation and offload,
// each candidate priced for a cluster (nodes of identical devices).
//
// Pricing uses the compiler's own cost model (CostModel.h) on the training
// step, not a formula of transformers:
//  - for each tensor-parallel size, the planner's search (Planner.h) with no
//    memory budget gives the chain of parameter layouts it would pass
//    through, from replicated to the most split;
//  - each layout of each chain is priced by PlanPricer for every
//    recomputation level and with and without sequence parallelism, on one
//    micro-batch at two per-rank batch sizes: what grows with the batch
//    (matmuls, activations, tensor-parallel collectives) is told apart from
//    what does not (the optimizer, the model states, latencies);
//  - a candidate combines those measurements with the mesh: pipeline stages
//    take 1/pp of the step each (balanced), the schedule's bubble and the
//    activations it keeps in flight, the data-parallel collectives of the
//    ZeRO stage over the bandwidth their group's placement gives (ranks are
//    numbered tp fastest, then dp, then pp: runtime/Mesh.h), and offload's
//    copies and host step as ppc-plan-shardings prices them.
// Nothing is overlapped: every collective and message is exposed (an upper
// bound, as the compiler's planner has it). docs/usage.md ("ppc plan") and
// docs/architecture.md ("Searching the whole layout") say what is left out.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_SHARDING_PLANSEARCH_H
#define PPC_PASSES_SHARDING_PLANSEARCH_H

#include "passes/memory/Offload.h"
#include "passes/memory/Recompute.h"
#include "passes/sharding/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace ppc {

/// Nodes of identical devices: what `--cluster` reads (JSON; the keys are
/// those of docs/usage.md's example, every one required).
struct Cluster {
  std::string name;
  /// Where the figures come from.
  std::string source;
  int64_t devicesPerNode = 8;
  /// Per device.
  double memoryBytes = 0, hostMemoryBytes = 0;
  /// Datasheet dense peaks (MFU's denominators), and the rates GEMMs reach,
  /// FLOP/s, for bf16/f16 operands (half) and f32 ones.
  double peakHalfFlops = 0, peakFloatFlops = 0;
  double matmulHalfFlops = 0, matmulFloatFlops = 0;
  double memoryBandwidth = 0;
  /// Per device and direction, bytes/s; seconds per collective or message.
  double intraNodeBandwidth = 0, intraNodeLatency = 0;
  double interNodeBandwidth = 0, interNodeLatency = 0;
  double hostLinkBandwidth = 0, hostMemoryBandwidth = 0;

  /// Whether a group of `ranks` consecutive ranks is inside one node.
  bool inNode(int64_t ranks) const {
    return ranks <= devicesPerNode && devicesPerNode % ranks == 0;
  }
  /// The cost model's device, with the tensor-parallel axis inside a node
  /// (`tpInNode`) or across nodes.
  DeviceModel device(bool tpInNode) const;
};

/// Reads a cluster file's text; the error names `what` (the file) and the
/// key at fault.
llvm::Expected<Cluster> parseCluster(llvm::StringRef json, llvm::StringRef what);
/// The shipped clusters by name ("dgx-h100", "dgx-h200"), and their names.
std::optional<Cluster> presetCluster(llvm::StringRef name);
std::vector<std::string> presetClusterNames();
/// A cluster as the JSON parseCluster reads.
std::string clusterJson(const Cluster &cluster);

/// What the user fixed (`ppc plan`'s --mesh, --zero, ...): only plans that
/// agree are priced; an unset knob is searched. A pin may name what the
/// search leaves out by itself (the interleaved schedule, ZeRO 2 or 3 with
/// a pipeline): such a plan is priced, and marked `outsideSearch`, since
/// the compiler does not yet hold its memory to the price.
struct PlanPins {
  std::optional<int64_t> dp, tp, pp, zero, microBatches, virtualStages;
  std::optional<bool> sequenceParallel;
  std::optional<std::string> schedule;
  std::optional<RecomputePolicy> recompute;
  std::optional<OffloadLevel> offload;

  bool any() const {
    return dp || tp || pp || zero || microBatches || virtualStages || sequenceParallel ||
           schedule || recompute || offload;
  }
};

struct SearchOptions {
  int64_t devices = 1;
  /// Sequences per step, and tokens per sequence (tokens/s).
  int64_t globalBatch = 1, seqLen = 1;
  /// The step's batch (the sequences of its one micro-batch, over all data-
  /// parallel ranks), and whether the model fixes it (then every plan has
  /// micro-batches of that many sequences).
  int64_t stepBatch = 1;
  bool batchFixed = false;
  double memoryPerRank = 0, hostMemoryPerRank = 0;
  /// The largest tensor-parallel size tried (0: a node's devices).
  int64_t maxTp = 0;
  /// Mixed precision: MFU against the half-precision peak.
  bool halfPrecision = false;
  /// Plans kept, fastest first.
  size_t keep = 10;
  PlanPins pins;
};

/// One priced candidate.
struct PlanChoice {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t zero = 0;
  bool sequenceParallel = false;
  /// Micro-batches per step, and the sequences of each on one rank.
  int64_t microBatches = 1, rankBatch = 1;
  /// "" without a pipeline; else gpipe, 1f1b or interleaved.
  std::string schedule;
  int64_t virtualStages = 1;
  RecomputePolicy recompute = RecomputePolicy::None;
  OffloadLevel offload = OffloadLevel::None;
  /// Parameters split over tp (of those the model has), in the chain's plan.
  int64_t splitParams = 0, params = 0;
  /// The split parameters as `ppc compile --shard` pins them (NAME:DIM:BLOCKS),
  /// filled in for the plans returned: the layout priced is the one compiled
  /// (ppc compile's own planner would choose for the whole step).
  std::vector<std::string> shards;
  /// Internal: the layout's place in its tp's chain.
  size_t layoutIndex = 0;
  double seconds = 0, bubbleSeconds = 0, commSeconds = 0, offloadSeconds = 0;
  double peakBytes = 0, hostBytes = 0;
  double tokensPerSecond = 0, mfu = 0;
  /// Priced only because a pin asked for it (PlanPins): what the search
  /// leaves out, and why; empty otherwise.
  std::string outsideSearch;
};

struct SearchResult {
  /// The fastest plans that fit, fastest first.
  std::vector<PlanChoice> best;
  /// Without any: the plan that needs the least memory.
  std::optional<PlanChoice> closest;
  int64_t candidates = 0, pricings = 0;
  /// The step's blocks (the deepest pipeline: one block a stage).
  int64_t blocks = 0;
};

/// Searches the plans of `step` (@train_step, built with one micro-batch of
/// `options.stepBatch` sequences). Fails, with an error on the step, when
/// the cost model cannot price it (an op without a sharding rule).
mlir::FailureOr<SearchResult> searchPlans(mlir::func::FuncOp step, const Cluster &cluster,
                                          const SearchOptions &options);

/// "none", "selective" or "full".
llvm::StringRef recomputeName(RecomputePolicy policy);

} // namespace ppc

#endif // PPC_PASSES_SHARDING_PLANSEARCH_H
