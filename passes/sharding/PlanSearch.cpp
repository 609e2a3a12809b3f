//===- PlanSearch.cpp - the whole layout from the device count ------------===//
//
// See PlanSearch.h. The measurements are taken once per tensor-parallel
// size; the candidates are combined from them without pricing again, so a
// search of a thousand devices prices about as much as one of eight.
//
//===----------------------------------------------------------------------===//

#include "passes/sharding/PlanSearch.h"

#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/sharding/Planner.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include "mlir/IR/Threading.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>

using namespace mlir;

namespace ppc {

//===----------------------------------------------------------------------===//
// Clusters
//===----------------------------------------------------------------------===//

DeviceModel Cluster::device(bool tpInNode) const {
  DeviceModel d;
  d.flops = matmulFloatFlops;
  d.halfFlops = matmulHalfFlops;
  d.memoryBandwidth = memoryBandwidth;
  d.memoryBytes = memoryBytes;
  d.tpBandwidth = tpInNode ? intraNodeBandwidth : interNodeBandwidth;
  d.interNodeBandwidth = interNodeBandwidth;
  d.latency = tpInNode ? intraNodeLatency : interNodeLatency;
  d.hostLinkBandwidth = hostLinkBandwidth;
  d.hostMemoryBandwidth = hostMemoryBandwidth;
  return d;
}

namespace {

struct ClusterKey {
  const char *group, *key;
  double Cluster::*field;
};

const ClusterKey kClusterKeys[] = {
    {"device", "memory_bytes", &Cluster::memoryBytes},
    {"device", "host_memory_bytes", &Cluster::hostMemoryBytes},
    {"device", "peak_flops_bf16", &Cluster::peakHalfFlops},
    {"device", "peak_flops_f32", &Cluster::peakFloatFlops},
    {"device", "matmul_flops_bf16", &Cluster::matmulHalfFlops},
    {"device", "matmul_flops_f32", &Cluster::matmulFloatFlops},
    {"device", "memory_bandwidth", &Cluster::memoryBandwidth},
    {"intra_node", "bandwidth", &Cluster::intraNodeBandwidth},
    {"intra_node", "latency", &Cluster::intraNodeLatency},
    {"inter_node", "bandwidth", &Cluster::interNodeBandwidth},
    {"inter_node", "latency", &Cluster::interNodeLatency},
    {"host", "link_bandwidth", &Cluster::hostLinkBandwidth},
    {"host", "memory_bandwidth", &Cluster::hostMemoryBandwidth},
};

// H100 SXM5 80 GB: 989 TFLOP/s dense bf16, 67 f32 (NVIDIA H100 datasheet);
// GEMMs reach ~800 bf16 and ppc's exact-f32 ones ~50 (codegen's GpuModel);
// HBM3 3.35 TB/s, ~3.0 in streaming kernels. DGX H100: 8 GPUs on NVLink 4
// (900 GB/s per GPU, both directions: 450 each way), 8 ConnectX-7 NDR
// 400 Gb/s (50 GB/s per GPU each way), 2 TB of host memory (256 GB a GPU),
// PCIe Gen5 x16 to the host (64 GB/s in theory, ~50 in pinned copies).
// Latencies: NCCL's small-message all-reduce, ~10 us in a node and ~20 us
// across (nccl-tests' order of magnitude; not measured here).
constexpr const char *kDgxH100 = R"({
  "name": "dgx-h100",
  "source": "NVIDIA H100 and DGX H100 datasheets; GEMM rates as codegen's GpuModel",
  "devices_per_node": 8,
  "device": {"memory_bytes": 80e9, "host_memory_bytes": 274877906944,
             "peak_flops_bf16": 989e12, "peak_flops_f32": 67e12,
             "matmul_flops_bf16": 800e12, "matmul_flops_f32": 50e12,
             "memory_bandwidth": 3.0e12},
  "intra_node": {"bandwidth": 450e9, "latency": 10e-6},
  "inter_node": {"bandwidth": 50e9, "latency": 20e-6},
  "host": {"link_bandwidth": 50e9, "memory_bandwidth": 50e9}
})";

// H200 SXM 141 GB: the H100's chip with HBM3e, 4.8 TB/s (~4.3 streaming);
// DGX H200: the same NVLink and network as DGX H100.
constexpr const char *kDgxH200 = R"({
  "name": "dgx-h200",
  "source": "NVIDIA H200 and DGX H200 datasheets; GEMM rates as codegen's GpuModel",
  "devices_per_node": 8,
  "device": {"memory_bytes": 141e9, "host_memory_bytes": 274877906944,
             "peak_flops_bf16": 989e12, "peak_flops_f32": 67e12,
             "matmul_flops_bf16": 800e12, "matmul_flops_f32": 50e12,
             "memory_bandwidth": 4.3e12},
  "intra_node": {"bandwidth": 450e9, "latency": 10e-6},
  "inter_node": {"bandwidth": 50e9, "latency": 20e-6},
  "host": {"link_bandwidth": 50e9, "memory_bandwidth": 50e9}
})";

// A100 SXM4 80 GB: 312 TFLOP/s dense bf16/fp16, 19.5 f32 (A100 datasheet);
// GEMMs reach ~250 in fp16 (Megatron-LM's 2021 runs: 163 per GPU end to
// end, 52% of peak) and ~18 in exact f32; HBM2e 2.0 TB/s, ~1.8 streaming.
// DGX A100: 8 GPUs on NVLink 3 (600 GB/s per GPU, both directions: 300
// each way), 8 ConnectX-6 HDR 200 Gb/s for compute (25 GB/s per GPU each
// way), 2 TB of host memory (256 GB a GPU), PCIe Gen4 x16 (32 GB/s in
// theory, ~25 pinned). The cluster of Megatron-LM's and MT-NLG's runs
// (Selene).
constexpr const char *kDgxA100 = R"({
  "name": "dgx-a100",
  "source": "NVIDIA A100 80GB and DGX A100 datasheets; GEMM rates estimated",
  "devices_per_node": 8,
  "device": {"memory_bytes": 80e9, "host_memory_bytes": 274877906944,
             "peak_flops_bf16": 312e12, "peak_flops_f32": 19.5e12,
             "matmul_flops_bf16": 250e12, "matmul_flops_f32": 18e12,
             "memory_bandwidth": 1.8e12},
  "intra_node": {"bandwidth": 300e9, "latency": 10e-6},
  "inter_node": {"bandwidth": 25e9, "latency": 20e-6},
  "host": {"link_bandwidth": 25e9, "memory_bandwidth": 50e9}
})";

} // namespace

llvm::Expected<Cluster> parseCluster(llvm::StringRef text, llvm::StringRef what) {
  auto fail = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), (what + ": " + message).str());
  };
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return fail("not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return fail("expected a JSON object");
  Cluster cluster;
  if (auto name = root->getString("name"))
    cluster.name = name->str();
  else
    return fail("'name' (a string) is missing");
  if (auto source = root->getString("source"))
    cluster.source = source->str();
  std::optional<int64_t> perNode = root->getInteger("devices_per_node");
  if (!perNode || *perNode < 1 || *perNode > (int64_t(1) << 20))
    return fail("'devices_per_node' must be an integer from 1 to 2^20");
  cluster.devicesPerNode = *perNode;
  for (const ClusterKey &k : kClusterKeys) {
    const llvm::json::Object *group = root->getObject(k.group);
    if (!group)
      return fail(llvm::formatv("'{0}' (an object) is missing", k.group));
    std::optional<double> value = group->getNumber(k.key);
    // Latencies may be 0; everything else is a rate or a size.
    bool latency = llvm::StringRef(k.key) == "latency";
    if (!value || !std::isfinite(*value) || *value < 0 || (!latency && *value == 0))
      return fail(llvm::formatv("'{0}.{1}' must be a {2} number", k.group, k.key,
                                latency ? "non-negative" : "positive"));
    cluster.*k.field = *value;
  }
  return cluster;
}

std::optional<Cluster> presetCluster(llvm::StringRef name) {
  const char *text = name == "dgx-h100"   ? kDgxH100
                     : name == "dgx-h200" ? kDgxH200
                     : name == "dgx-a100" ? kDgxA100
                                          : nullptr;
  if (!text)
    return std::nullopt;
  llvm::Expected<Cluster> cluster = parseCluster(text, name);
  if (!cluster) {
    llvm::consumeError(cluster.takeError());
    return std::nullopt;
  }
  return *cluster;
}

std::vector<std::string> presetClusterNames() { return {"dgx-h100", "dgx-h200", "dgx-a100"}; }

std::string clusterJson(const Cluster &cluster) {
  llvm::json::Object root{{"name", cluster.name},
                          {"source", cluster.source},
                          {"devices_per_node", cluster.devicesPerNode}};
  for (const ClusterKey &k : kClusterKeys) {
    llvm::json::Value &group = root[k.group];
    if (!group.getAsObject())
      group = llvm::json::Object();
    (*group.getAsObject())[k.key] = cluster.*k.field;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return text;
}

llvm::StringRef recomputeName(RecomputePolicy policy) {
  switch (policy) {
  case RecomputePolicy::Selective:
    return "selective";
  case RecomputePolicy::Full:
    return "full";
  default:
    return "none";
  }
}

//===----------------------------------------------------------------------===//
// Measurements
//===----------------------------------------------------------------------===//

namespace {

constexpr RecomputePolicy kLevels[] = {RecomputePolicy::None, RecomputePolicy::Selective,
                                       RecomputePolicy::Full};

/// What one argument layout costs a micro-batch, split into a part per
/// sequence on the rank and a part that is not (from two prices at two
/// per-rank batch sizes).
struct Measured {
  bool valid = false;
  double computeFixed = 0, computePerRow = 0;
  /// Collectives over tp (per micro-batch).
  double tpFixed = 0, tpPerRow = 0;
  /// Peak bytes beyond the arguments while the micro-batch runs
  /// (activations, gradients, temporaries): the peak is the largest of
  /// several values, each growing with the batch at its own rate, so two
  /// lines, through the prices at the fewest rows and at the most.
  struct Line {
    double fixed = 0, perRow = 0;
  };
  Line fewRows, manyRows;
  double flopsPerRow = 0;
  /// The data-parallel reduction: bytes of the whole reduced payload per
  /// rank (the gradient), and how many collectives carry it.
  double reducedBytes = 0;
  int64_t reductions = 0;
};

/// The arguments that are model states, by their bytes on a rank of a tp
/// layout, and whether ZeRO can shard each over a given dp.
struct StateBytes {
  double paramsShardable = 0, paramsWhole = 0;
  double statesShardable = 0, statesWhole = 0;
};

/// One tensor-parallel layout of the chain, measured every way.
struct Element {
  llvm::SmallVector<Layout> layouts;
  int64_t splitParams = 0;
  /// By recomputation level (kLevels), and sequence parallelism.
  Measured measured[3][2];
  std::map<int64_t, StateBytes> byDp;
};

/// One price of a layout, at `rows` sequences per rank (data-parallel
/// size `dp`).
struct Point {
  int64_t dp;
  double rows;
  PlanCost cost;
};

/// Prices at several batch sizes (most rows first) -> a measurement: time
/// grows with the batch in proportion, from the two with the most rows;
/// memory is the larger of the lines through the two with the fewest and
/// the two with the most.
Measured measure(llvm::ArrayRef<Point> points) {
  Measured m;
  for (const Point &p : points)
    if (!std::isfinite(p.cost.computeSeconds))
      return m;
  m.valid = true;
  auto tpSeconds = [](const PlanCost &c) {
    double s = 0;
    for (const auto &[key, seconds] : c.secondsByAxes)
      if (key != "dp")
        s += seconds;
    return s;
  };
  // What a plan holds beyond its arguments at its peak: the micro-batches'
  // or the step's, as ppc compile's planner prices it (Planner::fits).
  auto transient = [](const PlanCost &c) { return c.peakBytes - c.argumentBytes; };
  // The line through two points (one: through the origin), its fixed part
  // held at 0 or more where `clamp` (a time).
  auto line = [](const Point &x, const Point *y, auto &&of, bool clamp) {
    Measured::Line l;
    double at = of(x.cost);
    l.perRow = y ? (at - of(y->cost)) / (x.rows - y->rows) : at / x.rows;
    l.fixed = at - l.perRow * x.rows;
    if (clamp && l.fixed < 0) {
      l.fixed = 0;
      l.perRow = at / x.rows;
    }
    return l;
  };
  const Point &most = points.front();
  const Point *next = points.size() > 1 ? &points[1] : nullptr;
  auto compute = line(most, next, [](const PlanCost &c) { return c.computeSeconds; }, true);
  m.computeFixed = compute.fixed;
  m.computePerRow = compute.perRow;
  auto tp = line(most, next, tpSeconds, true);
  m.tpFixed = tp.fixed;
  m.tpPerRow = tp.perRow;
  m.flopsPerRow = line(most, next, [](const PlanCost &c) { return c.flops; }, true).perRow;
  m.manyRows = line(most, next, transient, false);
  m.fewRows = points.size() > 2 ? line(points[points.size() - 2], &points.back(), transient, false)
                                : m.manyRows;
  // The gradient's reduction, where data parallelism first splits the batch.
  if (next) {
    int64_t q = next->dp;
    if (auto it = next->cost.bytesByAxes.find("dp"); it != next->cost.bytesByAxes.end())
      m.reducedBytes = it->second / (2.0 * (q - 1) / q);
    if (auto it = next->cost.collectivesByAxes.find("dp"); it != next->cost.collectivesByAxes.end())
      m.reductions = it->second;
  }
  return m;
}

llvm::SmallVector<int64_t> divisorsOf(int64_t n) {
  llvm::SmallVector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      out.push_back(d);
      if (d != n / d)
        out.push_back(n / d);
    }
  llvm::sort(out);
  return out;
}

class Search {
public:
  Search(func::FuncOp step, const Cluster &cluster, const SearchOptions &options)
      : step(step), cluster(cluster), options(options) {}

  FailureOr<SearchResult> run();

private:
  /// The planner's chain at `tp`: with no budget, its memory moves from
  /// replicated to the most split (`chain`).
  LogicalResult searchChain(int64_t tp);
  /// Measures every layout of the chain that divides over `tp`.
  LogicalResult measureTp(int64_t tp, std::vector<Element> &elements);
  const StateBytes &statesAt(Element &element, int64_t tp, int64_t dp);
  void consider(const PlanChoice &choice);

  func::FuncOp step;
  const Cluster &cluster;
  const SearchOptions &options;
  /// The step with each recomputation level (none: the step itself).
  func::FuncOp recomputed[3];
  /// The chain of argument layouts, searched at the largest tp.
  std::vector<llvm::SmallVector<Layout>> chain;
  /// Prices of the step (threads add to it).
  std::atomic<int64_t> pricings{0};
  /// The rows (sequences) the step's micro-batch has, and the data-
  /// parallel sizes it is priced at (most rows per rank first).
  int64_t rows = 1;
  llvm::SmallVector<int64_t, 4> measuredDp;
  SearchResult result;
  /// The largest share of the step one of N pipeline chunks takes (run()).
  std::function<double(int64_t, int64_t)> shareOf;
  /// The best plan of each mesh shape (dp, tp, pp).
  std::map<std::tuple<int64_t, int64_t, int64_t>, PlanChoice> bestByMesh;
};

AxisSizes sizesOf(int64_t dp, int64_t tp) {
  AxisSizes sizes;
  sizes["dp"] = dp;
  sizes["tp"] = tp;
  sizes["pp"] = 1;
  return sizes;
}

LogicalResult Search::searchChain(int64_t tp) {
  bool tpInNode = cluster.inNode(tp);
  PriceCache cache;
  Planner planner(step, sizesOf(1, tp), cluster.device(tpInNode), /*memoryPerRank=*/0, false, 0,
                  OffloadLevel::None, std::numeric_limits<double>::infinity(), cache);
  if (failed(planner.setUp({})) || failed(planner.run({}, &chain)))
    return failure();
  pricings += planner.plansPriced();
  return success();
}

LogicalResult Search::measureTp(int64_t tp, std::vector<Element> &elements) {
  bool tpInNode = cluster.inNode(tp);
  DeviceModel device = cluster.device(tpInNode);
  // The chain's plans that divide over this tp (a split that divides over
  // the largest tp divides over its divisors), each once.
  AxisSizes sizes = sizesOf(1, tp);
  for (const llvm::SmallVector<Layout> &layouts : chain) {
    if (tp == 1 && !elements.empty())
      break;
    llvm::SmallVector<Layout> here = layouts;
    bool divides = true;
    for (unsigned i = 0; i < step.getNumArguments() && divides; ++i) {
      if (tp == 1)
        here[i] = Layout::replicated(here[i].dims.size());
      auto type = llvm::cast<RankedTensorType>(step.getArgument(i).getType());
      divides = localShape(type.getShape(), here[i], sizes).has_value();
    }
    if (!divides || llvm::any_of(elements, [&](const Element &e) { return e.layouts == here; }))
      continue;
    Element e;
    e.layouts = std::move(here);
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (step.getArgAttr(i, PpcDialect::kParamAttrName) && !e.layouts[i].isReplicated())
        ++e.splitParams;
    elements.push_back(std::move(e));
  }
  for (auto [level, program] : llvm::enumerate(recomputed))
    for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
      // The step's batch split over each data-parallel size measured.
      std::vector<PlanPricer> pricers;
      for (int64_t dp : measuredDp)
        pricers.emplace_back(program, sizesOf(dp, tp), device, sp);
      for (Element &e : elements) {
        // Sequence parallelism changes nothing where no parameter is split.
        if (sp && e.splitParams == 0) {
          e.measured[level][sp] = e.measured[level][0];
          continue;
        }
        llvm::SmallVector<Point, 4> points;
        for (auto [dp, pricer] : llvm::zip_equal(measuredDp, pricers)) {
          llvm::SmallVector<Layout> layouts = e.layouts;
          if (dp > 1)
            for (unsigned i = 0; i < program.getNumArguments(); ++i)
              if (program.getArgAttr(i, PpcDialect::kInputAttrName) && !layouts[i].dims.empty())
                layouts[i].dims[0] = {"dp"};
          FailureOr<PlanCost> cost = pricer.price(layouts);
          if (failed(cost))
            return failure();
          ++pricings;
          points.push_back({dp, double(rows) / dp, *cost});
        }
        e.measured[level][sp] = measure(points);
      }
    }
  return success();
}

const StateBytes &Search::statesAt(Element &element, int64_t tp, int64_t dp) {
  auto [it, inserted] = element.byDp.try_emplace(dp);
  if (!inserted)
    return it->second;
  StateBytes &s = it->second;
  AxisSizes sizes = sizesOf(dp, tp);
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    bool param = step.getArgAttr(i, PpcDialect::kParamAttrName) != nullptr;
    bool state = step.getArgAttr(i, PpcDialect::kStateAttrName) != nullptr;
    if (!param && !state)
      continue;
    auto type = llvm::cast<RankedTensorType>(step.getArgument(i).getType());
    auto local = localShape(type.getShape(), element.layouts[i], sizes);
    if (!local)
      continue;
    double bytes = type.getElementTypeBitWidth() / 8.0;
    for (int64_t n : *local)
      bytes *= n;
    bool shardable = zeroShardDim(type.getShape(), element.layouts[i], dp).has_value();
    (param ? (shardable ? s.paramsShardable : s.paramsWhole)
           : (shardable ? s.statesShardable : s.statesWhole)) += bytes;
  }
  return s;
}

void Search::consider(const PlanChoice &choice) {
  ++result.candidates;
  if (!result.closest || choice.peakBytes < result.closest->peakBytes)
    result.closest = choice;
  if (choice.peakBytes > options.memoryPerRank || choice.hostBytes > options.hostMemoryPerRank)
    return;
  auto key = std::make_tuple(choice.dp, choice.tp, choice.pp);
  auto [it, inserted] = bestByMesh.try_emplace(key, choice);
  if (inserted)
    return;
  const PlanChoice &held = it->second;
  if (choice.seconds < held.seconds * (1 - 1e-9) ||
      (choice.seconds <= held.seconds * (1 + 1e-9) && choice.peakBytes < held.peakBytes))
    it->second = choice;
}

FailureOr<SearchResult> Search::run() {
  int64_t n = options.devices;
  rows = options.stepBatch;
  // The data-parallel sizes the step's batch is priced at: 1 and the
  // smallest that divides it (the most rows per rank), the batch itself and
  // half of it (the fewest).
  llvm::SmallVector<int64_t> rowDivisors = divisorsOf(rows);
  for (int64_t dp : {int64_t(1), rowDivisors.size() > 1 ? rowDivisors[1] : int64_t(1),
                     rowDivisors.size() > 1 ? rows / rowDivisors[1] : int64_t(1), rows})
    if (!llvm::is_contained(measuredDp, dp))
      measuredDp.push_back(dp);
  llvm::sort(measuredDp);
  recomputed[0] = step;
  for (int level = 1; level < 3; ++level) {
    recomputed[level] = step.clone();
    recomputeEveryBlock(recomputed[level], kLevels[level]);
  }
  auto eraseClones = llvm::make_scope_exit([&] {
    for (int level = 1; level < 3; ++level)
      recomputed[level]->erase();
  });
  result.blocks = describeBlockActivations(step).size();
  // The largest share of the blocks one of `chunks` pipeline chunks holds
  // (the stage cut keeps blocks whole), times `v`: 1/chunks when they divide.
  int64_t blocks = result.blocks;
  shareOf = [blocks](int64_t chunks, int64_t v) {
    if (chunks <= 1 || blocks < chunks)
      return 1.0 / double(std::max<int64_t>(1, chunks)) * double(v);
    return double(v) * double((blocks + chunks - 1) / chunks) / double(blocks);
  };
  int64_t params = 0;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    params += step.getArgAttr(i, PpcDialect::kParamAttrName) != nullptr;

  // A pipeline message: the residual stream of one sequence, the result of
  // the first lookup of a parameter table (the token embedding).
  double messageBytesPerRow = 0;
  step.walk([&](GatherOp gather) {
    if (messageBytesPerRow > 0 || !llvm::isa<BlockArgument>(gather->getOperand(0)))
      return;
    auto type = llvm::cast<RankedTensorType>(gather->getResult(0).getType());
    messageBytesPerRow = double(type.getNumElements()) / rows * (options.halfPrecision ? 2 : 4);
  });

  int64_t maxTp = options.maxTp > 0 ? options.maxTp : cluster.devicesPerNode;
  double peakRate = options.halfPrecision ? cluster.peakHalfFlops : cluster.peakFloatFlops;
  double modelFlopsPerRow = 0;
  // The chain is searched at the largest tensor-parallel size; each size is
  // then measured on its own thread (the cost model only reads the IR), the
  // largest (the most plans) first.
  llvm::SmallVector<int64_t> tps, divisors = divisorsOf(n);
  const PlanPins &pins = options.pins;
  for (int64_t tp : llvm::reverse(divisors))
    if (pins.tp ? tp == *pins.tp || tp == 1 : tp <= maxTp)
      tps.push_back(tp); // (tp 1 prices the model's FLOPs: MFU)
  if (tps.empty())
    return result;
  if (failed(searchChain(tps.front())))
    return failure();
  std::vector<std::vector<Element>> measuredByTp(tps.size());
  if (failed(failableParallelForEachN(step->getContext(), 0, tps.size(), [&](size_t i) {
        return measureTp(tps[i], measuredByTp[i]);
      })))
    return failure();
  for (auto [tp, elements] : llvm::zip_equal(tps, measuredByTp))
    if (tp == 1 && elements.front().measured[0][0].valid)
      modelFlopsPerRow = elements.front().measured[0][0].flopsPerRow;
  for (auto [tp, elements] : llvm::zip_equal(tps, measuredByTp)) {
    if (pins.tp && tp != *pins.tp)
      continue;
    for (int64_t pp : divisorsOf(n / tp)) {
      if (pp > std::max<int64_t>(1, result.blocks) || (pins.pp && pp != *pins.pp))
        continue;
      int64_t dp = n / (tp * pp);
      if (pins.dp && dp != *pins.dp)
        continue;
      // Ranks are tp fastest, then dp, then pp (runtime/Mesh.h): a group is
      // inside a node when the ranks it spans are.
      bool dpInNode = cluster.inNode(tp * dp);
      bool ppInNode = n <= cluster.devicesPerNode;
      double dpBandwidth = dpInNode ? cluster.intraNodeBandwidth : cluster.interNodeBandwidth;
      double dpLatency = dpInNode ? cluster.intraNodeLatency : cluster.interNodeLatency;
      double ppBandwidth = ppInNode ? cluster.intraNodeBandwidth : cluster.interNodeBandwidth;
      double ppLatency = ppInNode ? cluster.intraNodeLatency : cluster.interNodeLatency;
      llvm::SmallVector<int64_t> counts;
      if (options.batchFixed) {
        if (options.globalBatch % rows == 0 && rows % dp == 0)
          counts.push_back(options.globalBatch / rows);
      } else {
        for (int64_t m : divisorsOf(options.globalBatch))
          if ((options.globalBatch / m) % dp == 0)
            counts.push_back(m);
      }
      if (pins.microBatches)
        llvm::erase_if(counts, [&](int64_t m) { return m != *pins.microBatches; });
      struct Schedule {
        const char *name;
        int64_t v;
      };
      llvm::SmallVector<Schedule> schedules;
      if (pp == 1)
        schedules.push_back({"", 1});
      else if (pins.schedule) {
        int64_t v = *pins.schedule == "interleaved" ? pins.virtualStages.value_or(2) : 1;
        // Each rank's v stages of whole blocks.
        if (pp * v <= std::max<int64_t>(1, result.blocks))
          schedules.push_back({pins.schedule->c_str(), v});
      } else {
        schedules.push_back({"1f1b", 1});
        schedules.push_back({"gpipe", 1});
        // Not yet the interleaved schedule: its compiled stages hold more
        // than its plans are priced at (e2e-plan-compile with it: 0.81 to
        // 0.91 of the compiled peak, over the budget), so its plans could
        // say they fit where they do not.
      }
      for (Element &element : elements) {
        // tp ranks that split no parameter compute the same thing: not
        // tensor parallelism (fewer devices would do).
        if (tp > 1 && element.splitParams == 0)
          continue;
        for (int level = 0; level < 3; ++level)
          for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
            const Measured &mz = element.measured[level][sp];
            if (!mz.valid || (pins.recompute && kLevels[level] != *pins.recompute) ||
                (pins.sequenceParallel && bool(sp) != *pins.sequenceParallel))
              continue;
            for (int64_t zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
              if (pins.zero && zero != *pins.zero)
                continue;
              // Not yet ZeRO 2 or 3 with a pipeline: ppc-pipeline runs each
              // micro-batch's gradient reduce-scatter (a collective) in the
              // step's epilogue, so every micro-batch's whole gradient lives
              // until then (GPT d = 128 on 4x1x2, 8 micro-batches: 25 MiB of
              // gradients at the peak against 5.6 with ZeRO 1).
              if (pp > 1 && zero >= 2 && !pins.zero)
                continue;
              const StateBytes &sb = statesAt(element, tp, dp);
              double ownParams =
                  (zero >= 1 ? sb.paramsShardable / dp : sb.paramsShardable) + sb.paramsWhole;
              double ownStates =
                  (zero >= 1 ? sb.statesShardable / dp : sb.statesShardable) + sb.statesWhole;
              // ZeRO as ppc-partition shards: the optimizer state from
              // stage 1, each micro-batch's gradient from 2, the
              // parameter from 3, of what can be sharded.
              double shave = 1 - 1.0 / dp;
              double argsSaved = (zero >= 1 ? sb.statesShardable * shave : 0) +
                                 (zero >= 3 ? sb.paramsShardable * shave : 0);
              double gradSaved = zero >= 2 ? sb.paramsShardable * shave : 0;
              double stateBytes =
                  sb.paramsShardable + sb.paramsWhole + sb.statesShardable + sb.statesWhole;
              for (OffloadLevel offload : {OffloadLevel::None, OffloadLevel::Optimizer,
                                           OffloadLevel::OptimizerAndParams}) {
                if ((offload == OffloadLevel::OptimizerAndParams && (zero < 3 || dp == 1)) ||
                    (pins.offload && offload != *pins.offload))
                  continue;
                // Offload as Planner::addOffload prices it.
                double saved = 0, host = 0, link = 0, hostStep = 0;
                if (offload != OffloadLevel::None) {
                  saved = ownStates;
                  host = ownStates + 2 * ownParams;
                  hostStep = 2 * ownStates + 3 * ownParams;
                  link = 3 * ownParams;
                  if (offload == OffloadLevel::OptimizerAndParams)
                    saved += sb.paramsShardable / dp;
                }
                double offloadSeconds =
                    (link / cluster.hostLinkBandwidth + hostStep / cluster.hostMemoryBandwidth) *
                    shareOf(pp, 1);
                for (int64_t m : counts) {
                  int64_t b = options.globalBatch / (m * dp);
                  for (const Schedule &schedule : schedules) {
                    if (schedule.v > 1 && m % pp != 0)
                      continue;
                    PlanChoice c;
                    c.dp = dp;
                    c.tp = tp;
                    c.pp = pp;
                    c.zero = zero;
                    c.sequenceParallel = sp;
                    c.microBatches = m;
                    c.rankBatch = b;
                    c.schedule = schedule.name;
                    c.virtualStages = schedule.v;
                    c.recompute = kLevels[level];
                    c.offload = offload;
                    c.splitParams = element.splitParams;
                    c.layoutIndex = &element - elements.data();
                    c.params = params;
                    if (schedule.v > 1)
                      c.outsideSearch = "the interleaved schedule: its compiled stages hold more "
                                        "than priced (0.81-0.91 of the compiled peak)";
                    else if (pp > 1 && zero >= 2)
                      c.outsideSearch = "ZeRO 2/3 with a pipeline: ppc-pipeline keeps each "
                                        "micro-batch's whole gradient until the epilogue";
                    // The slowest rank's share of the step: its v chunks of
                    // whole blocks (1/pp when pp v divides the blocks).
                    double chunk = shareOf(pp * schedule.v, 1);
                    double share = schedule.v * chunk;
                    // Time. One micro-batch on the slowest stage, its
                    // messages (forward and backward, per virtual stage)
                    // included.
                    double tpSeconds = mz.tpFixed + mz.tpPerRow * b;
                    double message = 0;
                    if (pp > 1)
                      message =
                          2 * schedule.v * (ppLatency + messageBytesPerRow * b / tp / ppBandwidth);
                    double perMicroBatch = (mz.computePerRow * b + tpSeconds) * share + message;
                    double bubbleSlots = double(pp - 1) / schedule.v;
                    double pipeline = (m + bubbleSlots) * perMicroBatch;
                    double optimizer = mz.computeFixed * share / (zero >= 1 ? dp : 1);
                    double dpSeconds = 0;
                    if (dp > 1) {
                      double payload = mz.reducedBytes * share * (dp - 1) / dp;
                      double collectives = std::max<double>(1, double(mz.reductions) * share);
                      double rounds = zero <= 1 ? 2 : zero == 2 ? m + 1 : 3 * m;
                      double times = zero <= 1 ? 1 : zero == 2 ? m + 1 : 3 * m;
                      dpSeconds = rounds * payload / dpBandwidth + times * collectives * dpLatency;
                    }
                    c.seconds = pipeline + optimizer + dpSeconds + offloadSeconds;
                    c.bubbleSeconds = bubbleSlots * perMicroBatch;
                    c.commSeconds = (m + bubbleSlots) * (tpSeconds * share + message) + dpSeconds;
                    c.offloadSeconds = offloadSeconds;
                    // Memory. The activations the slowest stage keeps in
                    // flight, in micro-batches of the whole model (Megatron-
                    // LM's counts: GPipe m, 1F1B min(m, pp), interleaved
                    // min(m v, pp v + pp - 1) micro-batches of a chunk).
                    double inFlight = 1;
                    if (pp > 1) {
                      if (c.schedule == "gpipe")
                        inFlight = double(m) * share;
                      else if (schedule.v > 1)
                        inFlight =
                            std::min<double>(m * schedule.v, pp * schedule.v + pp - 1) * chunk;
                      else
                        inFlight = double(std::min(m, pp)) * share;
                    }
                    // The peak ppc compile's planner judges a plan by (the
                    // micro-batches' and the step's, `transient` above), so
                    // that every plan printed compiles (docs/architecture.md,
                    // "Searching the whole layout").
                    double held = stateBytes - argsSaved - saved;
                    auto activations = [&](const Measured::Line &l) {
                      return l.fixed * share + l.perRow * b * inFlight;
                    };
                    // Several micro-batches add the gradient's accumulator
                    // (sharded by ZeRO 2 and 3) to one micro-batch's step.
                    double accumulator =
                        m > 1 ? sb.paramsShardable + sb.paramsWhole - gradSaved : 0;
                    c.peakBytes = (held - gradSaved + accumulator) * share +
                                  std::max(activations(mz.fewRows), activations(mz.manyRows));
                    c.hostBytes = host * share;
                    double tokens = double(options.globalBatch) * options.seqLen;
                    c.tokensPerSecond = tokens / c.seconds;
                    c.mfu = modelFlopsPerRow * options.globalBatch / (n * peakRate * c.seconds);
                    consider(c);
                  }
                }
              }
            }
          }
      }
    }
  }
  result.pricings = pricings;
  for (auto &[key, choice] : bestByMesh)
    result.best.push_back(choice);
  // The pins of each plan's tp layout.
  for (PlanChoice &c : result.best) {
    if (c.tp == 1)
      continue;
    size_t at = llvm::find(tps, c.tp) - tps.begin();
    const Element &element = measuredByTp[at][c.layoutIndex];
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      auto name = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName);
      if (!name)
        continue;
      const Layout &layout = element.layouts[i];
      for (auto [d, axes] : llvm::enumerate(layout.dims))
        if (!axes.empty())
          c.shards.push_back(
              llvm::formatv("{0}:{1}:{2}", name.getValue(), d, layout.blocks[d]).str());
    }
  }
  llvm::sort(result.best,
             [](const PlanChoice &a, const PlanChoice &b) { return a.seconds < b.seconds; });
  if (result.best.size() > options.keep)
    result.best.resize(options.keep);
  return result;
}

} // namespace

FailureOr<SearchResult> searchPlans(func::FuncOp step, const Cluster &cluster,
                                    const SearchOptions &options) {
  return Search(step, cluster, options).run();
}

} // namespace ppc
