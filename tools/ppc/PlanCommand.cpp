//===- PlanCommand.cpp - `ppc plan` ---------------------------------------===//
//
// Chooses the whole layout of a model's training from the device count:
// builds @train_step as `ppc compile` does (one micro-batch), searches
// dp x tp x pp, ZeRO, sequence parallelism, micro-batches, the schedule,
// recomputation and offload for the cluster (passes/sharding/PlanSearch.h),
// and prints the fastest plans that fit with the `ppc compile` line of each.
// Writes nothing.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcDialect.h"
#include "passes/Pipelines.h"
#include "passes/sharding/PlanSearch.h"
#include "runtime/Mesh.h"
#include "tools/ppc/Driver.h"
#include "tools/ppc/TrainingFlags.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <chrono>

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {

namespace {

std::string gib(double bytes) {
  if (bytes >= 1073741824.0)
    return llvm::formatv("{0:F2} GiB", bytes / 1073741824.0).str();
  return llvm::formatv("{0:F1} MiB", bytes / 1048576.0).str();
}

std::string duration(double seconds) {
  if (seconds >= 1)
    return llvm::formatv("{0:F3} s", seconds).str();
  return llvm::formatv("{0:F3} ms", seconds * 1e3).str();
}

std::string rate(double tokensPerSecond) {
  if (tokensPerSecond >= 1e6)
    return llvm::formatv("{0:F2}M", tokensPerSecond / 1e6).str();
  if (tokensPerSecond >= 1e3)
    return llvm::formatv("{0:F1}k", tokensPerSecond / 1e3).str();
  return llvm::formatv("{0:F1}", tokensPerSecond).str();
}

std::string scheduleText(const PlanChoice &c) {
  if (c.schedule.empty())
    return "-";
  if (c.virtualStages > 1)
    return llvm::formatv("{0} v{1}", c.schedule, c.virtualStages).str();
  return c.schedule;
}

/// `arg` as one shell word.
std::string shellQuoted(llvm::StringRef arg) {
  if (!arg.empty() && llvm::all_of(arg, [](char c) {
        return llvm::isAlnum(c) || llvm::StringRef("_./=:,+-@%").contains(c);
      }))
    return arg.str();
  std::string quoted = "'";
  for (char c : arg)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// The flags of `ppc plan` that its compile lines do not copy, and whether
/// each has a value: those `ppc compile` does not take, and the pins (each
/// plan's own flags say them).
bool isPlanOnlyFlag(llvm::StringRef arg, bool &hasValue) {
  static const char *const withValue[] = {
      "devices", "cluster",       "global-batch",   "max-tp",   "top",       "json",   "mesh",
      "zero",    "micro-batches", "virtual-stages", "schedule", "recompute", "offload"};
  static const char *const without[] = {"print-cluster", "sequence-parallel"};
  arg = arg.ltrim('-');
  llvm::StringRef name = arg.split('=').first;
  for (const char *flag : withValue)
    if (name == flag) {
      hasValue = !arg.contains('=');
      return true;
    }
  for (const char *flag : without)
    if (name == flag) {
      hasValue = false;
      return true;
    }
  return false;
}

} // namespace

FailureOr<PlanPins> pinsOf(TrainingFlags &training) {
  PlanPins pins;
  if (training.mesh.getNumOccurrences()) {
    auto mesh = parseMesh(training.mesh);
    if (!mesh)
      return failure(reportError(llvm::toString(mesh.takeError())));
    pins.dp = mesh->dp;
    pins.tp = mesh->tp;
    pins.pp = mesh->pp;
  }
  if (training.zero.getNumOccurrences()) {
    if (training.zero.getValue().size() != 1 || training.zero[0] < '0' || training.zero[0] > '3')
      return failure(reportError("--zero '" + printable(training.zero) + "': expected 0 to 3"));
    pins.zero = training.zero[0] - '0';
  }
  if (training.sequenceParallel.getNumOccurrences())
    pins.sequenceParallel = training.sequenceParallel.getValue();
  if (training.microBatches.getNumOccurrences()) {
    if (training.microBatches < 1 || training.microBatches > (int64_t(1) << 24))
      return failure(reportError(llvm::formatv("--micro-batches {0}: expected 1 to {1}",
                                               training.microBatches.getValue(), 1 << 24)));
    pins.microBatches = training.microBatches.getValue();
  }
  if (training.schedule.getNumOccurrences()) {
    llvm::StringRef s = training.schedule;
    if (s != "gpipe" && s != "1f1b" && s != "interleaved")
      return failure(
          reportError("--schedule '" + printable(s) + "': expected gpipe, 1f1b or interleaved"));
    pins.schedule = s.str();
  }
  if (training.virtualStages.getNumOccurrences()) {
    if (pins.schedule != "interleaved" || training.virtualStages < 2 ||
        training.virtualStages > 1024)
      return failure(reportError(
          llvm::formatv("--virtual-stages {0}: expected 2 to 1024, with --schedule interleaved",
                        training.virtualStages.getValue())));
    pins.virtualStages = training.virtualStages.getValue();
  }
  if (training.recompute.getNumOccurrences() && training.recompute != "auto") {
    pins.recompute = parseRecomputePolicy(training.recompute);
    if (!pins.recompute)
      return failure(reportError("--recompute '" + printable(training.recompute) +
                                 "': expected none, selective, full or auto"));
  }
  if (training.offload.getNumOccurrences() && training.offload != "auto") {
    pins.offload = parseOffloadLevel(training.offload);
    if (!pins.offload)
      return failure(reportError("--offload '" + printable(training.offload) +
                                 "': expected none, optimizer, optimizer+params or auto"));
  }
  return pins;
}

FailureOr<PlanRun> runPlanSearch(llvm::StringRef path, TrainingFlags &training,
                                 const Cluster &cluster, int64_t devices, int64_t globalBatch,
                                 int64_t maxTp, size_t keep, llvm::StringRef dumpIR,
                                 const PlanPins &pins) {
  auto start = std::chrono::steady_clock::now();
  auto model = OnnxModel::load(path);
  if (!model)
    return failure(reportError(llvm::toString(model.takeError())));
  // The step is built with one micro-batch: of the model's batch when it is
  // fixed, else of 64 sequences (the cost model prices shapes, so the size
  // costs nothing; the search prices it split from 1 to 64 ways, which tells
  // what grows with the batch from what does not).
  FailureOr<int64_t> fixed = training.fixedBatch(**model);
  if (failed(fixed))
    return failure();
  int64_t stepBatch = *fixed > 0 ? *fixed : 64;
  int64_t global = globalBatch > 0 ? globalBatch : *fixed;
  if (global == 0)
    return failure(reportError("--global-batch is required: the model's batch dimension is "
                               "symbolic"));
  if (*fixed > 0 && global % *fixed != 0)
    return failure(reportError(llvm::formatv(
        "--global-batch {0}: the model's batch dimension is fixed at {1}, so a step is a whole "
        "number of micro-batches of {1} sequences; export it with a dynamic batch axis to "
        "choose them",
        global, *fixed)));
  // One rank, one micro-batch of stepBatch sequences, none of the knobs
  // the plan decides (the pins filter the search instead). A symbolic batch
  // of 64 sequences is cut to 16, 4, then 1 where a tensor of the step would
  // pass ppc's limit of 2^40 bytes (Llama 3 405B's attention scores at 8192
  // tokens: 2.2e12 bytes for 64 sequences, before ppc-fuse-attention).
  struct Given {
    std::string mesh, zero, schedule, recompute, offload;
    int64_t batch, microBatches, virtualStages;
    bool sequenceParallel;
  } given{training.mesh,         training.zero,          training.schedule,
          training.recompute,    training.offload,       training.batch,
          training.microBatches, training.virtualStages, training.sequenceParallel};
  auto restore = llvm::make_scope_exit([&] {
    training.batch = given.batch;
    training.mesh = given.mesh;
    training.zero = given.zero;
    training.schedule = given.schedule;
    training.recompute = given.recompute;
    training.offload = given.offload;
    training.microBatches = given.microBatches;
    training.virtualStages = given.virtualStages;
    training.sequenceParallel = given.sequenceParallel;
  });
  training.mesh = "1";
  training.zero = "";
  training.schedule = "1f1b";
  training.recompute = "auto";
  training.offload = "auto";
  training.microBatches = 1;
  training.virtualStages = 1;
  training.sequenceParallel = false;
  auto context = std::make_unique<MLIRContext>();
  auto diagnostics = std::make_unique<DriverDiagnostics>(*context);
  OwningOpRef<ModuleOp> module;
  TrainingFlags::Setup setup;
  for (;;) {
    training.batch = stepBatch;
    ImportOptions options;
    if (failed(training.setUp(**model, options, 1, setup)))
      return failure();
    bool tooLarge = false;
    {
      // A smaller batch may do: the limit's errors are held back meanwhile.
      bool smaller = *fixed == 0 && stepBatch > 1;
      ScopedDiagnosticHandler sizes(context.get(), [&](Diagnostic &d) {
        if (!smaller || !llvm::StringRef(d.str()).contains("allows one tensor at most"))
          return failure();
        tooLarge = true;
        return success();
      });
      module = importModel(**model, *context, options, dumpIR, [&](const llvm::Twine &m) {
        if (smaller && llvm::StringRef(m.str()).contains("allows one tensor at most"))
          tooLarge = true;
        else
          reportError(m);
      });
      if (module &&
          failed(runPipeline(
              *module, [&](OpPassManager &pm) { buildTrainingPipeline(pm, setup.pipeline); },
              dumpIR)))
        module = nullptr;
    }
    if (module)
      break;
    if (!tooLarge)
      return failure();
    stepBatch = stepBatch > 4 ? stepBatch / 4 : 1;
    module = nullptr;
    diagnostics.reset();
    context = std::make_unique<MLIRContext>();
    diagnostics = std::make_unique<DriverDiagnostics>(*context);
  }
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return failure(reportError("the training pipeline built no @train_step"));
  PlanRun run;
  run.buildSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  SearchOptions &search = run.search;
  search.devices = devices;
  search.globalBatch = global;
  search.seqLen = setup.seqLen;
  search.stepBatch = stepBatch;
  search.batchFixed = *fixed > 0;
  search.memoryPerRank = training.memoryPerRank.getNumOccurrences()
                             ? setup.parallelize.memoryPerRank.getValue()
                             : cluster.memoryBytes;
  search.hostMemoryPerRank = training.hostMemoryPerRank.getNumOccurrences()
                                 ? setup.parallelize.hostMemoryPerRank.getValue()
                                 : cluster.hostMemoryBytes;
  search.maxTp = maxTp;
  search.halfPrecision = training.precision == "bf16";
  search.keep = keep;
  search.pins = pins;
  FailureOr<SearchResult> result = searchPlans(step, cluster, search);
  if (failed(result))
    return failure();
  run.result = std::move(*result);
  return run;
}

std::optional<Cluster> clusterNamed(llvm::StringRef flag) {
  if (std::optional<Cluster> preset = presetCluster(flag))
    return preset;
  auto buffer = llvm::MemoryBuffer::getFile(flag);
  if (!buffer) {
    reportError("--cluster '" + printable(flag) + "': not one of " +
                llvm::join(presetClusterNames(), ", ") +
                ", and no "
                "such file (" +
                buffer.getError().message() + ")");
    return std::nullopt;
  }
  llvm::Expected<Cluster> parsed =
      parseCluster((*buffer)->getBuffer(), "--cluster " + printable(flag));
  if (!parsed) {
    reportError(llvm::toString(parsed.takeError()));
    return std::nullopt;
  }
  return *parsed;
}

std::string describePlan(const PlanChoice &c) {
  std::string text = llvm::formatv("--mesh {0}x{1}x{2} --micro-batches {3} --zero {4} "
                                   "--recompute {5} --offload {6}",
                                   c.dp, c.tp, c.pp, c.microBatches, c.zero,
                                   recomputeName(c.recompute), offloadLevelName(c.offload))
                         .str();
  if (c.sequenceParallel)
    text += " --sequence-parallel";
  if (!c.schedule.empty())
    text += " --schedule " + c.schedule;
  if (c.virtualStages > 1)
    text += " --virtual-stages " + std::to_string(c.virtualStages);
  return text;
}

int runPlanCommand(int argc, char **argv) {
  cl::OptionCategory category("ppc plan options");
  cl::opt<std::string> input(cl::Positional, cl::desc("MODEL.onnx"), cl::cat(category));
  cl::opt<int64_t> devices("devices", cl::desc("devices (ranks) to plan for"), cl::init(0),
                           cl::cat(category));
  cl::opt<std::string> clusterFlag(
      "cluster",
      cl::desc("the cluster: dgx-h100, dgx-h200, dgx-a100, or a JSON file of the same keys "
               "(--print-cluster shows one) [dgx-h100]"),
      cl::value_desc("NAME|FILE.json"), cl::init("dgx-h100"), cl::cat(category));
  cl::opt<bool> printCluster("print-cluster",
                             cl::desc("print the cluster's figures as JSON and exit"),
                             cl::init(false), cl::cat(category));
  cl::opt<int64_t> globalBatch(
      "global-batch", cl::desc("sequences per step [the model's batch dimension when fixed]"),
      cl::init(0), cl::cat(category));
  cl::opt<int64_t> maxTp("max-tp",
                         cl::desc("the largest tensor-parallel size tried [a node's devices]"),
                         cl::init(0), cl::cat(category));
  cl::opt<int> top("top", cl::desc("plans printed, fastest first [10]"), cl::init(10),
                   cl::cat(category));
  cl::opt<std::string> jsonPath("json",
                                cl::desc("also write the plans, with their commands, as JSON"),
                                cl::value_desc("F.json"), cl::init(""), cl::cat(category));
  TrainingFlags training(category);
  PipelineFlags pipelineFlags(category);
  // What the plan decides may be pinned (PlanPins), but not the batch (it is
  // --global-batch) or the tensor-parallel layout (the plan's own).
  llvm::SmallVector<cl::Option *> decided = {
      &training.batch, static_cast<cl::Option *>(std::addressof(training.shards))};
  for (cl::Option *option : decided)
    option->setHiddenFlag(cl::ReallyHidden);
  parseCommandLine(argc, argv, category,
                   "ppc plan: choose the whole layout of a model's training from the device "
                   "count\n\n"
                   "Builds the training step of MODEL.onnx, searches every factorisation of "
                   "--devices into\ndata x tensor x pipeline parallelism with the ZeRO stage, "
                   "sequence parallelism,\nmicro-batches, pipeline schedule, recomputation and "
                   "offload, prices each with the\ncompiler's cost model for --cluster, and "
                   "prints the fastest plans that fit\n--memory-per-rank, each with its ppc "
                   "compile command. Writes nothing.\n\n"
                   "--mesh, --zero, --sequence-parallel, --micro-batches, --schedule,\n"
                   "--virtual-stages, --recompute and --offload pin what they name: only plans "
                   "that agree\nare priced (--mesh DPxTPxPP alone prices one layout; "
                   "--devices is then its product).\n");

  // The cluster first: --print-cluster needs nothing else.
  std::optional<Cluster> cluster = clusterNamed(clusterFlag);
  if (!cluster)
    return 1;
  if (printCluster) {
    llvm::outs() << clusterJson(*cluster);
    return 0;
  }
  if (input.empty())
    return reportError("give the model: ppc plan MODEL.onnx --devices N");
  for (cl::Option *option : decided)
    if (option->getNumOccurrences())
      return reportError("--" + option->ArgStr +
                         ": ppc plan chooses it (each plan's ppc compile command sets it)");
  FailureOr<PlanPins> pins = pinsOf(training);
  if (failed(pins))
    return 1;
  if (pins->dp && !devices.getNumOccurrences())
    devices = *pins->dp * *pins->tp * *pins->pp;
  if (pins->dp && devices != *pins->dp * *pins->tp * *pins->pp)
    return reportError(llvm::formatv("--mesh {0}: {1} devices, not --devices {2}",
                                     training.mesh.getValue(), *pins->dp * *pins->tp * *pins->pp,
                                     devices.getValue()));
  constexpr int64_t kMaxDevices = int64_t(1) << 20;
  if (devices < 1 || devices > kMaxDevices)
    return reportError(llvm::formatv("--devices {0}: expected 1 to {1}{2}", devices.getValue(),
                                     kMaxDevices,
                                     devices.getNumOccurrences() ? "" : " (it is required)"));
  if (maxTp.getNumOccurrences() && maxTp < 1)
    return reportError(llvm::formatv("--max-tp {0}: expected 1 or more", maxTp.getValue()));
  if (top < 1)
    return reportError(llvm::formatv("--top {0}: expected 1 or more", top.getValue()));
  if (globalBatch.getNumOccurrences() && (globalBatch < 1 || globalBatch > (int64_t(1) << 24)))
    return reportError(
        llvm::formatv("--global-batch {0}: expected 1 to {1}", globalBatch.getValue(), 1 << 24));
  if (training.precision == "fp16")
    return reportError("--precision fp16: only ppc simulate trains in fp16 so far; plan fp32 or "
                       "bf16");

  auto start = std::chrono::steady_clock::now();
  auto model = OnnxModel::load(input);
  if (!model)
    return reportError(llvm::toString(model.takeError()));
  // --json may not overwrite the model or its weights.
  std::vector<std::string> inputs = modelFiles(**model, input);
  if (failed(checkOutputs({{"--json", jsonPath}}, inputs)))
    return 1;
  FailureOr<PlanRun> run = runPlanSearch(input, training, *cluster, devices, globalBatch, maxTp,
                                         top, pipelineFlags.dumpIR, *pins);
  if (failed(run))
    return 1;
  const SearchOptions &search = run->search;
  const SearchResult *result = &run->result;
  int64_t global = search.globalBatch;
  double built = run->buildSeconds;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  bool pinned = pins->any();
  if (!result->closest)
    return reportError(llvm::formatv(
        "no plan of {0} devices agrees with the pinned knobs (a pipeline deeper than the "
        "model's {1} blocks, micro-batches that do not divide --global-batch {2} over dp, "
        "sequence parallelism without tp, or --offload optimizer+params below ZeRO 3)",
        devices.getValue(), result->blocks, search.globalBatch));
  if (result->best.empty()) {
    const PlanChoice &c = *result->closest;
    return reportError(llvm::formatv(
        "no plan {8}fits {0:F0} bytes per rank (--memory-per-rank): the least memory is {1:F0} "
        "bytes per rank ({2}x{3}x{4}, ZeRO {5}, recompute {6}, offload {7}; {9} per step "
        "predicted)",
        search.memoryPerRank, c.peakBytes, c.dp, c.tp, c.pp, c.zero, recomputeName(c.recompute),
        offloadLevelName(c.offload), pinned ? "with the pinned knobs " : "", duration(c.seconds)));
  }
  llvm::raw_ostream &os = llvm::outs();
  os << llvm::formatv("ppc plan: {0} on {1} x {2} ({3} devices a node; {4} per rank)\n",
                      printable(input), devices.getValue(), cluster->name, cluster->devicesPerNode,
                      gib(search.memoryPerRank));
  os << llvm::formatv("step: {0} sequences of {1} tokens, {2}, {3} blocks; searched {4} plans "
                      "({5} prices of the step) in {6:F1} s ({7:F1} s building the step)\n",
                      global, search.seqLen, training.precision.getValue(), result->blocks,
                      result->candidates, result->pricings, seconds, built);
  os << "\n";
  os << llvm::formatv("{0,-4}{1,-14}{2,-6}{3,-4}{4,-15}{5,-16}{6,-11}{7,-17}{8,10}{9,10}{10,7}"
                      "{11,12}{12,8}{13,7}\n",
                      "#", "dp x tp x pp", "ZeRO", "SP", "micro-batches", "schedule", "recompute",
                      "offload", "step", "tokens/s", "MFU", "peak/rank", "bubble", "comm");
  for (auto [i, c] : llvm::enumerate(result->best)) {
    std::string mesh = llvm::formatv("{0}x{1}x{2}", c.dp, c.tp, c.pp).str();
    std::string batches = llvm::formatv("{0} x {1}", c.microBatches, c.rankBatch).str();
    os << llvm::formatv("{0,-4}{1,-14}{2,-6}{3,-4}{4,-15}{5,-16}{6,-11}{7,-17}{8,10}{9,10}"
                        "{10,7}{11,12}{12,8}{13,7}\n",
                        i + 1, mesh, c.zero, c.sequenceParallel ? "on" : "-", batches,
                        scheduleText(c), recomputeName(c.recompute), offloadLevelName(c.offload),
                        duration(c.seconds), rate(c.tokensPerSecond),
                        llvm::formatv("{0:F1}%", 100 * c.mfu).str(), gib(c.peakBytes),
                        llvm::formatv("{0:F1}%", 100 * c.bubbleSeconds / c.seconds).str(),
                        llvm::formatv("{0:F1}%", 100 * c.commSeconds / c.seconds).str());
  }
  os << "\nmicro-batches: count x sequences per rank; bubble and comm: shares of the step "
        "(comm: collectives and\npipeline messages, none overlapped); each command pins the "
        "tensor-parallel layout priced (--shard).\n";
  for (auto [i, c] : llvm::enumerate(result->best))
    if (!c.outsideSearch.empty())
      os << llvm::formatv("plan {0} is priced only because it was pinned: {1}\n", i + 1,
                          c.outsideSearch);
  os << "\n";
  // The compile lines: this command's own flags that compile shares, and
  // what the plan decided.
  std::string shared;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    bool hasValue = false;
    if (arg == input.getValue())
      continue;
    if (arg.starts_with("-") && isPlanOnlyFlag(arg, hasValue)) {
      i += hasValue;
      continue;
    }
    shared += " " + shellQuoted(arg);
  }
  std::vector<std::string> commands;
  for (const PlanChoice &c : result->best) {
    std::string line;
    llvm::raw_string_ostream cmd(line);
    cmd << "ppc compile " << shellQuoted(input) << " " << describePlan(c) << " --batch " << global;
    for (const std::string &pin : c.shards)
      cmd << " --shard " << shellQuoted(pin);
    if (!training.memoryPerRank.getNumOccurrences())
      cmd << llvm::formatv(" --memory-per-rank {0:F0}", search.memoryPerRank);
    cmd << shared;
    commands.push_back(printable(line));
  }
  for (auto [i, command] : llvm::enumerate(commands))
    os << llvm::formatv("{0,-4}{1}\n", i + 1, command);
  if (!jsonPath.empty()) {
    llvm::json::Array plans;
    for (auto [c, command] : llvm::zip_equal(result->best, commands))
      plans.push_back(llvm::json::Object{
          {"dp", c.dp},
          {"tp", c.tp},
          {"pp", c.pp},
          {"zero", c.zero},
          {"sequence_parallel", c.sequenceParallel},
          {"micro_batches", c.microBatches},
          {"sequences_per_rank", c.rankBatch},
          {"schedule", c.schedule},
          {"virtual_stages", c.virtualStages},
          {"recompute", recomputeName(c.recompute)},
          {"offload", offloadLevelName(c.offload)},
          {"step_seconds", c.seconds},
          {"bubble_seconds", c.bubbleSeconds},
          {"comm_seconds", c.commSeconds},
          {"offload_seconds", c.offloadSeconds},
          {"tokens_per_second", c.tokensPerSecond},
          {"mfu", c.mfu},
          {"peak_bytes", c.peakBytes},
          {"host_bytes", c.hostBytes},
          {"outside_search", c.outsideSearch},
          {"command", command},
      });
    llvm::json::Object root{
        {"model", printable(input)},
        {"devices", devices.getValue()},
        {"cluster", cluster->name},
        {"memory_per_rank", search.memoryPerRank},
        {"global_batch", global},
        {"seq", search.seqLen},
        {"precision", training.precision.getValue()},
        {"blocks", result->blocks},
        {"candidates", result->candidates},
        {"pricings", result->pricings},
        {"search_seconds", seconds},
        {"plans", std::move(plans)},
    };
    if (failed(writeOutput(jsonPath, [&](llvm::raw_ostream &out) {
          out << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
        })))
      return 1;
  }
  return 0;
}

} // namespace ppc
