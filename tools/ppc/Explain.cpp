//===- Explain.cpp - `ppc explain`: why each collective is there ----------===//
//
// For every collective and pipeline message of each rank's step: what asked
// for it (the op that needs the layout change, ZeRO, a contraction over a
// split dimension, a stage boundary), the layout change it makes, the ONNX
// node it serves and the value it moves, its bytes, its predicted time on a
// cluster, and how much compute the CUDA target can hide it behind. Grouped
// first (same kind, axes and reason), then one line each.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcDialect.h"
#include "passes/Pipelines.h"
#include "passes/Provenance.h"
#include "passes/sharding/CommunicationReport.h"
#include "passes/sharding/PlanSearch.h"
#include "tools/ppc/Driver.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"

#include <map>

using namespace mlir;

namespace ppc {

namespace {

std::string bytesText(double bytes) {
  if (bytes >= 1073741824.0)
    return llvm::formatv("{0:F2} GiB", bytes / 1073741824.0).str();
  if (bytes >= 1048576.0)
    return llvm::formatv("{0:F2} MiB", bytes / 1048576.0).str();
  if (bytes >= 1024.0)
    return llvm::formatv("{0:F1} KiB", bytes / 1024.0).str();
  return llvm::formatv("{0:F0} B", bytes).str();
}

std::string secondsText(double s) {
  if (s >= 1)
    return llvm::formatv("{0:F3} s", s).str();
  if (s >= 1e-3)
    return llvm::formatv("{0:F3} ms", s * 1e3).str();
  return llvm::formatv("{0:F1} us", s * 1e6).str();
}

/// The reason without the micro-batch it names (the group's key), and its
/// two halves: what asked for it, and the layout change ("A -> B").
struct Reason {
  std::string key, asker, change;
};

Reason reasonOf(const TransferExplanation &t) {
  static const llvm::Regex microBatch("micro-batch [0-9]+");
  Reason r;
  std::string why = t.why;
  while (microBatch.match(why))
    why = microBatch.sub("micro-batch N", why);
  r.key = t.record.kind + "|" + llvm::join(t.record.axes, ",") + "|" + why;
  llvm::StringRef text = why;
  size_t arrow = text.find(" -> ");
  size_t colon =
      arrow == llvm::StringRef::npos ? llvm::StringRef::npos : text.substr(0, arrow).rfind(": ");
  if (colon == llvm::StringRef::npos) {
    r.asker = why;
  } else {
    r.asker = text.substr(0, colon).str();
    r.change = text.substr(colon + 2).str();
  }
  return r;
}

std::string whereText(const TransferExplanation &t) {
  if (t.microBatch < 0)
    return t.phase;
  return llvm::formatv("{0} {1}", t.phase, t.microBatch).str();
}

} // namespace

LogicalResult writeExplanation(llvm::StringRef path, ModuleOp module, const Cluster &cluster) {
  auto found = meshPrograms(module, "--explain");
  if (failed(found))
    return failure();
  auto &[mesh, programs] = *found;
  DeviceModel device = cluster.device(cluster.inNode(mesh.getAxisSize("tp").value_or(1)));
  std::string text;
  llvm::raw_string_ostream os(text);
  // The step: its mesh as --mesh says it (dp x tp x pp), ZeRO stage,
  // micro-batches and pipeline schedule.
  auto size = [&](llvm::StringRef axis) { return mesh.getAxisSize(axis).value_or(1); };
  int64_t microBatches = 1;
  for (func::FuncOp program : programs)
    program.walk([&](Operation *op) {
      if (auto mb = intAttrOf(op, kMicroBatchAttrName))
        microBatches = std::max(microBatches, *mb + 1);
    });
  os << llvm::formatv("ppc explain: mesh {0}x{1}x{2} (dp x tp x pp)", size("dp"), size("tp"),
                      size("pp"));
  if (auto zero = programs.front()->getAttrOfType<IntegerAttr>(PpcDialect::kZeroAttrName))
    os << llvm::formatv(", ZeRO {0}", zero.getInt());
  os << llvm::formatv(", {0} micro-batch{1}", microBatches, microBatches == 1 ? "" : "es");
  if (auto schedule = module->getAttrOfType<DictionaryAttr>(PpcDialect::kScheduleAttrName))
    if (auto kind = schedule.getAs<StringAttr>("kind"))
      os << ", " << kind.getValue() << " schedule";
  os << llvm::formatv("; times priced for {0} ({1} devices a node)\n", cluster.name,
                      cluster.devicesPerNode);
  os << "hidden: the compute between a transfer and the first op that reads it, which the CUDA "
        "target\nruns while the transfer is in flight (NCCL on its own stream; the CPU target "
        "waits for each);\na send is waited for by nothing, and a recv's time is its send's.\n";
  for (func::FuncOp program : programs) {
    std::vector<TransferExplanation> transfers = explainTransfers(program, mesh, device);
    double bytes = 0, seconds = 0, exposed = 0;
    for (const TransferExplanation &t : transfers) {
      bytes += t.record.bytesPerRank;
      seconds += t.seconds;
      exposed += t.exposedSeconds();
    }
    os << "\n";
    os << llvm::formatv("@{0}", program.getSymName());
    if (auto rank = program->getAttrOfType<IntegerAttr>(PpcDialect::kPipelineRankAttrName))
      os << llvm::formatv(" (pipeline rank {0})", rank.getInt());
    os << llvm::formatv(": {0} collectives and messages a step, {1} sent per rank, {2} "
                        "predicted, {3} of it exposed\n",
                        transfers.size(), bytesText(bytes), secondsText(seconds),
                        secondsText(exposed));
    if (transfers.empty())
      continue;
    // The groups, the costliest first.
    struct Group {
      Reason reason;
      const TransferExplanation *first = nullptr;
      int64_t count = 0;
      double bytes = 0, seconds = 0, exposed = 0;
      std::vector<std::string> nodes;
      size_t moreNodes = 0;
    };
    std::map<std::string, Group> byKey;
    for (const TransferExplanation &t : transfers) {
      Reason reason = reasonOf(t);
      Group &g = byKey[reason.key];
      if (!g.first) {
        g.reason = reason;
        g.first = &t;
      }
      ++g.count;
      g.bytes += t.record.bytesPerRank;
      g.seconds += t.seconds;
      g.exposed += t.exposedSeconds();
      std::string node = t.record.node.empty() ? "(unnamed)" : t.record.node;
      if (llvm::is_contained(g.nodes, node))
        continue;
      if (g.nodes.size() < 3)
        g.nodes.push_back(node);
      else
        ++g.moreNodes;
    }
    std::vector<const Group *> groups;
    for (const auto &[key, g] : byKey)
      groups.push_back(&g);
    llvm::stable_sort(groups, [](const Group *a, const Group *b) {
      return a->seconds > b->seconds || (a->seconds == b->seconds && a->count > b->count);
    });
    os << llvm::formatv("\n  {0,-4}{1,6}  {2,-15}{3,-11}{4,12}{5,12}{6,12}\n", "#", "count", "kind",
                        "axes", "bytes/rank", "time", "exposed");
    for (auto [i, g] : llvm::enumerate(groups)) {
      os << llvm::formatv("  {0,-4}{1,6}  {2,-15}{3,-11}{4,12}{5,12}{6,12}\n", i + 1, g->count,
                          g->first->record.kind, llvm::join(g->first->record.axes, ","),
                          bytesText(g->bytes), secondsText(g->seconds), secondsText(g->exposed));
      os << "        why:    " << g->reason.asker << "\n";
      if (!g->reason.change.empty())
        os << "        layout: " << g->reason.change << "\n";
      os << "        nodes:  " << llvm::join(g->nodes, ", ");
      if (g->moreNodes)
        os << llvm::formatv(" and {0} more", g->moreNodes);
      os << "\n";
    }
    os << llvm::formatv("\n  every transfer of @{0}, in program order:\n", program.getSymName());
    os << llvm::formatv("  {0,6}  {1,-13}{2,-15}{3,-9}{4,12}{5,11}{6,11}  {7}\n", "op", "in",
                        "kind", "axes", "bytes/rank", "time", "hidden", "node <- value; group");
    for (const TransferExplanation &t : transfers) {
      Reason reason = reasonOf(t);
      size_t group =
          llvm::find_if(groups, [&](const Group *g) { return g->reason.key == reason.key; }) -
          groups.begin();
      double hidden = std::min(t.seconds, t.computeSecondsBefore);
      os << llvm::formatv("  {0,6}  {1,-13}{2,-15}{3,-9}{4,12}{5,11}{6,11}  {7} <- {8}; #{9}\n",
                          t.index, whereText(t), t.record.kind, llvm::join(t.record.axes, ","),
                          bytesText(t.record.bytesPerRank), secondsText(t.seconds),
                          secondsText(hidden), t.record.node.empty() ? "?" : t.record.node,
                          t.record.value.empty() ? "?" : t.record.value, group + 1);
    }
  }
  return writeOutput(path, [&](llvm::raw_ostream &out) { out << text; });
}

int runExplainCommand(int argc, char **argv) {
  // ppc compile's flags, explaining to stdout unless told otherwise.
  std::vector<char *> args(argv, argv + argc);
  bool given = llvm::any_of(llvm::ArrayRef(argv + 1, argv + argc), [](const char *arg) {
    llvm::StringRef a = llvm::StringRef(arg).ltrim('-');
    return a == "explain" || a.starts_with("explain=") || a == "help" || a == "help-hidden";
  });
  std::string flag = "--explain=-";
  if (!given)
    args.push_back(flag.data());
  return runCompileCommand(int(args.size()), args.data());
}

} // namespace ppc
