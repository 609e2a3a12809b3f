//===- CompileCommand.cpp - `ppc compile` ---------------------------------===//
//
// Builds the training step of a model for a mesh: import, training
// pipeline, partitioning, then emission: the training executable (`-o EXE`,
// with its initial weights beside it as EXE.weights.safetensors), or the
// per-rank program (`--emit mlir`) or the generated source (`--emit cpp` for
// the CPU target, `--emit cuda` for the CUDA one). `--target cuda-emulator`
// builds the CUDA source against ppc's CUDA emulator, to run on CPUs.
//
//===----------------------------------------------------------------------===//

#include "codegen/Emitter.h"
#include "codegen/KernelProfile.h"
#include "codegen/Toolchain.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/Pipelines.h"
#include "passes/memory/MemoryPlan.h"
#include "passes/memory/Recompute.h"
#include "runtime/Safetensors.h"
#include "runtime/ppcrt/Program.h"
#include "tools/ppc/Driver.h"
#include "tools/ppc/TrainingFlags.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <cmath>
#include <set>

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {

int runCompileCommand(int argc, char **argv) {
  cl::OptionCategory category("ppc compile options");
  cl::opt<std::string> input(cl::Positional, cl::desc("MODEL.onnx"), cl::Required,
                             cl::cat(category));
  cl::opt<std::string> output(
      "o", cl::desc("the executable to build (with --emit: the file to write, - for stdout)"),
      cl::value_desc("FILE"), cl::init(""), cl::cat(category));
  cl::opt<std::string> emit("emit",
                            cl::desc("write the partitioned program (mlir) or the generated "
                                     "source (cpp: C++ for --target cpu; cuda: CUDA C++) "
                                     "instead of building the executable"),
                            cl::value_desc("mlir|cpp|cuda"), cl::init(""), cl::cat(category));
  cl::opt<std::string> target(
      "target",
      cl::desc("what the executable runs on: cuda (one GPU per rank, NCCL), cpu (MPI, "
               "OpenBLAS, OpenMP), or cuda-emulator (the CUDA executable built against ppc's "
               "CUDA emulator: runs on CPUs, slowly, to test the CUDA target without a GPU) "
               "[cuda when ppc was built with a CUDA toolkit, else cpu]"),
      cl::value_desc("cpu|cuda|cuda-emulator"),
      cl::init(codegen::haveCudaToolkit() ? "cuda" : "cpu"), cl::cat(category));
  cl::opt<std::string> cudaArch(
      "cuda-arch", cl::desc("GPU architectures the CUDA executable carries code for"),
      cl::value_desc("sm_NN,..."), cl::init("sm_80,sm_90"), cl::cat(category));
  ReportFlag report;
  cl::opt<std::string> tracePath(
      "trace", cl::desc("write the predicted pipeline schedule as Chrome trace JSON (Perfetto)"),
      cl::value_desc("F.json"), cl::cat(category));
  cl::opt<std::string> timelinePath(
      "timeline", cl::desc("draw the predicted pipeline schedule as SVG, one row per rank"),
      cl::value_desc("F.svg"), cl::cat(category));
  report.path.addCategory(category);
  cl::opt<std::string> explainPath(
      "explain",
      cl::desc("write why each collective and pipeline message of every rank's step is there "
               "(what asks for it, the layout change, the ONNX node, bytes, predicted time on "
               "--cluster, the compute that can hide it), - for stdout; without -o or --emit, "
               "nothing else is built"),
      cl::value_desc("F.txt"), cl::cat(category));
  cl::opt<bool> profilePlan(
      "profile-plan",
      cl::desc("print the step's predicted time and MFU on one GPU of --gpu and the kernels "
               "that take the most, each with the fraction of its roofline it reaches "
               "(a roofline model of the generated kernels; no GPU needed)"),
      cl::init(false), cl::cat(category));
  cl::opt<std::string> gpu("gpu",
                           cl::desc("the GPU --profile-plan prices, and a CUDA executable's "
                                    "--profile predicts each kernel on: h100 or h200 [h100]"),
                           cl::value_desc("h100|h200"), cl::init("h100"), cl::cat(category));
  cl::opt<int> profileTop("profile-top",
                          cl::desc("kernels --profile-plan lists, by predicted time [10]"),
                          cl::init(10), cl::cat(category));
  cl::opt<int64_t> scheduleSteps("lr-total-steps",
                                 cl::desc("steps the cosine learning-rate schedule spans"),
                                 cl::init(1), cl::cat(category));
  cl::opt<int64_t> devices("devices", cl::desc("--mesh auto: the devices (ranks) to plan for"),
                           cl::init(0), cl::cat(category));
  cl::opt<std::string> clusterFlag(
      "cluster",
      cl::desc("the cluster --mesh auto plans for and --explain prices: dgx-h100, dgx-h200, "
               "dgx-a100 or a JSON file (ppc plan --print-cluster) [dgx-h100]"),
      cl::value_desc("NAME|FILE.json"), cl::init("dgx-h100"), cl::cat(category));
  TrainingFlags training(category);
  PipelineFlags pipelineFlags(category);
  parseCommandLine(argc, argv, category,
                   "ppc compile: build the training step of a model for a mesh\n\n"
                   "Imports MODEL.onnx, builds @train_step and partitions it for --mesh;\n"
                   "--emit mlir writes the per-rank program.\n");

  if (!emit.empty() && emit != "mlir" && emit != "cpp" && emit != "cuda")
    return reportError("--emit '" + emit + "': expected mlir, cpp or cuda");
  if (target != "cpu" && target != "cuda" && target != "cuda-emulator")
    return reportError("--target '" + target + "': expected cpu, cuda or cuda-emulator");
  bool cudaSource = target == "cuda" || target == "cuda-emulator";
  // --emit cuda implies a CUDA target; --emit cpp the CPU one.
  if (emit == "cuda" && target.getNumOccurrences() && !cudaSource)
    return reportError("--emit cuda: the CUDA source is that of --target cuda");
  if (emit == "cpp" && target.getNumOccurrences() && target != "cpu")
    return reportError("--emit cpp: the C++ source is that of --target cpu (use --emit cuda)");
  codegen::Target targetKind = emit == "cuda"  ? codegen::Target::Cuda
                               : emit == "cpp" ? codegen::Target::Cpu
                               : cudaSource    ? codegen::Target::Cuda
                                               : codegen::Target::Cpu;
  codegen::Build build = targetKind == codegen::Target::Cpu ? codegen::Build::Cpu
                         : target == "cuda-emulator"        ? codegen::Build::CudaEmulator
                                                            : codegen::Build::Cuda;
  std::optional<codegen::GpuModel> gpuModel = codegen::GpuModel::named(gpu);
  if (!gpuModel)
    return reportError("--gpu '" + gpu + "': expected h100 or h200");
  if (profileTop < 1)
    return reportError("--profile-top " + std::to_string(profileTop) + ": expected 1 or more");
  if (training.precision == "fp16")
    return reportError("--precision fp16: only ppc simulate trains in fp16 so far (the "
                       "targets have no f16 kernels, and the runtime no loss scaler)");
  if (targetKind == codegen::Target::Cpu && training.precision == "bf16")
    return reportError("--precision bf16: the CPU target computes in fp32; use --target cuda "
                       "(or ppc simulate, whose executor rounds to bf16 as the GPU does)");
  std::vector<std::string> archFlags;
  if (build == codegen::Build::Cuda || cudaArch.getNumOccurrences()) {
    auto flags = codegen::cudaArchFlags(cudaArch);
    if (!flags)
      return reportError(llvm::toString(flags.takeError()));
    archFlags = std::move(*flags);
    if (build == codegen::Build::Cuda && emit.empty() && !codegen::haveCudaToolkit())
      return reportError("--target cuda: this ppc was built without a CUDA toolkit (nvcc, "
                         "cuBLASLt, NCCL); use --target cpu or --target cuda-emulator, or "
                         "--emit cuda to write the source");
  }
  bool explainOnly = !explainPath.empty() && emit.empty() && output.empty();
  if (emit.empty() && (output.empty() || output == "-") && !explainOnly)
    return reportError("-o: give the executable to build (or --emit mlir|cpp|cuda, or --explain)");
  if (output.empty())
    output = "-";
  if (training.lrSchedule == "cosine" && scheduleSteps < 1)
    return reportError("--lr-total-steps must be at least 1");
  auto start = std::chrono::steady_clock::now();
  auto model = OnnxModel::load(input);
  if (!model)
    return reportError(llvm::toString(model.takeError()));
  // What this compile will write, checked before anything is: a failed or
  // refused compile leaves every file as it was, the model's own (its
  // external data too) above all.
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!explainOnly)
    outputs.push_back({"-o", output});
  if (emit.empty() && !explainOnly)
    outputs.push_back({"-o's weights", output + ".weights.safetensors"});
  outputs.push_back({"--report", report.path});
  outputs.push_back({"--trace", tracePath});
  outputs.push_back({"--timeline", timelinePath});
  outputs.push_back({"--explain", explainPath});
  std::vector<std::string> inputs = modelFiles(**model, input);
  if (failed(checkOutputs(outputs, inputs)))
    return 1;
  ImportOptions options;
  TrainingFlags::Setup setup;
  if (training.mesh == "auto") {
    // The plan ppc plan would print first decides what it decides.
    for (cl::Option *option : training.plannedFlags())
      if (option->getNumOccurrences())
        return reportError("--" + option->ArgStr +
                           ": --mesh auto chooses it (ppc plan lists "
                           "the plans; give the mesh to choose it yourself)");
    if (devices < 1 || devices > (int64_t(1) << 20))
      return reportError(llvm::formatv("--mesh auto: --devices {0}: expected 1 to {1}{2}",
                                       devices.getValue(), int64_t(1) << 20,
                                       devices.getNumOccurrences() ? "" : " (it is required)"));
    std::optional<Cluster> cluster = clusterNamed(clusterFlag);
    if (!cluster)
      return 1;
    FailureOr<PlanRun> run =
        runPlanSearch(input, training, *cluster, devices, training.batch, 0, 1, "");
    if (failed(run))
      return 1;
    if (run->result.best.empty())
      return reportError(llvm::formatv(
          "--mesh auto: no plan of {0} devices fits {1:F0} bytes per rank (--memory-per-rank); "
          "the least memory is {2:F0} bytes per rank ({3})",
          devices.getValue(), run->search.memoryPerRank, run->result.closest->peakBytes,
          describePlan(*run->result.closest)));
    const PlanChoice &c = run->result.best.front();
    training.mesh = llvm::formatv("{0}x{1}x{2}", c.dp, c.tp, c.pp).str();
    training.zero = std::to_string(c.zero);
    training.recompute = recomputeName(c.recompute).str();
    training.offload = offloadLevelName(c.offload).str();
    training.microBatches = c.microBatches;
    training.sequenceParallel = c.sequenceParallel;
    if (!c.schedule.empty())
      training.schedule = c.schedule;
    training.virtualStages = c.virtualStages;
    for (const std::string &pin : c.shards)
      training.shards.push_back(pin);
    training.batch = run->search.globalBatch;
    if (!training.memoryPerRank.getNumOccurrences())
      training.memoryPerRank = llvm::formatv("{0:F0}", run->search.memoryPerRank).str();
    llvm::errs() << llvm::formatv(
        "mesh auto: {0} --batch {1} ({2} devices of {3}: {4:F3} ms per step predicted, {5:F0} "
        "bytes per rank; ppc plan lists the others)\n",
        describePlan(c), run->search.globalBatch, devices.getValue(), cluster->name,
        1e3 * c.seconds, c.peakBytes);
  } else if (devices.getNumOccurrences() ||
             (clusterFlag.getNumOccurrences() && explainPath.empty())) {
    return reportError(std::string(devices.getNumOccurrences() ? "--devices" : "--cluster") +
                       ": only --mesh auto plans for devices (and --explain prices for a "
                       "cluster)");
  }
  std::optional<Cluster> explainCluster;
  if (!explainPath.empty() && !(explainCluster = clusterNamed(clusterFlag)))
    return 1;
  if (failed(training.setUp(**model, options, scheduleSteps, setup)))
    return 1;
  MLIRContext context;
  DriverDiagnostics diagnostics(context);
  OwningOpRef<ModuleOp> module = importModel(**model, context, options, pipelineFlags.dumpIR);
  if (!module)
    return 1;
  if (failed(runPipeline(
          *module, [&](OpPassManager &pm) { buildTrainingPipeline(pm, setup.pipeline); },
          pipelineFlags.dumpIR)))
    return 1;
  // --recompute auto fits each rank's program by its unfused plan; the
  // executable's arena (fusion, views, collectives running beside the
  // kernels) can be a little larger. Where it exceeds the budget, the step
  // is parallelized again with auto aiming that much lower, while that
  // changes what is recomputed (twice at most); --dump-ir then shows the
  // run that is kept.
  double budget = setup.parallelize.memoryPerRank;
  DumpPoint trained = dumpPoint(pipelineFlags.dumpIR);
  OwningOpRef<ModuleOp> step = module->clone();
  std::vector<codegen::ProgramLayout> layouts;
  auto levelsOf = [](ModuleOp m) {
    std::string text;
    llvm::raw_string_ostream os(text);
    for (func::FuncOp program : trainingPrograms(m))
      if (Attribute levels = program->getAttr(kRecomputeAttrName))
        os << levels;
    return text;
  };
  // cuBLASLt's aligned kernels (ppc-align-gemms).
  setup.parallelize.alignGemms = targetKind == codegen::Target::Cuda;
  // Elementwise values recomputed inside the gradients' fused kernels
  // (ppc-recompute pointwise): on a GPU those kernels are bound by memory.
  setup.parallelize.recomputePointwise = targetKind == codegen::Target::Cuda;
  // The logits' log_sum_exp computed in their gradient's kernel.
  setup.parallelize.hoistLogitsGradient = targetKind == codegen::Target::Cuda;
  // Where no plan fits by the planner's estimate, its closest is compiled
  // and the exact memory plan decides (below).
  setup.parallelize.keepClosest = true;
  // The largest arena peak of the programs laid out last (exact).
  auto exactPeak = [&] {
    int64_t peak = 0;
    for (const codegen::ProgramLayout &layout : layouts)
      peak = std::max(peak, layout.memory.peakBytes);
    return peak;
  };
  for (int attempt = 0;; ++attempt) {
    OwningOpRef<ModuleOp> parallel = step->clone();
    rewindDump(pipelineFlags.dumpIR, trained);
    if (failed(runPipeline(
            *parallel, [&](OpPassManager &pm) { buildParallelizePipeline(pm, setup.parallelize); },
            pipelineFlags.dumpIR)))
      return 1;
    auto laidOut = codegen::layOutPrograms(*parallel, targetKind);
    if (failed(laidOut))
      return 1;
    bool changed = attempt == 0 || levelsOf(*parallel) != levelsOf(*module);
    if (!changed)
      break; // Aiming lower recomputed nothing more: keep the last.
    module = std::move(parallel);
    layouts = std::move(*laidOut);
    // The arena's peak, and the unfused plans' (what auto fitted).
    int64_t peak = exactPeak(), unfused = 0;
    for (func::FuncOp program : trainingPrograms(*module))
      if (FailureOr<int64_t> live = peakLiveBytes(program); succeeded(live))
        unfused = std::max(unfused, *live);
    if (setup.parallelize.recompute.getValue() != "auto" || peak <= budget || unfused > budget ||
        attempt == 2)
      break;
    double aim = setup.parallelize.recomputeMemoryPerRank > 0
                     ? setup.parallelize.recomputeMemoryPerRank.getValue()
                     : budget;
    // The unfused plan aimed lower by the arena's excess, from where it is
    // (below the last aim when the levels chosen left room: aiming lower
    // than the aim alone would choose the same levels again). Six
    // significant digits, so that pipeline.txt (which prints the option so)
    // replays this very value.
    double from = std::min(aim, static_cast<double>(unfused));
    double lower = from * (budget / static_cast<double>(peak)) * 0.999;
    double unit = std::pow(10.0, std::floor(std::log10(lower)) - 5);
    setup.parallelize.recomputeMemoryPerRank = std::floor(lower / unit) * unit;
    llvm::errs() << llvm::formatv(
        "note: the executable's arena ({0} bytes per rank) exceeds --memory-per-rank; "
        "parallelizing again with --recompute auto fitting the unfused plan to {1:F0}\n",
        peak, setup.parallelize.recomputeMemoryPerRank.getValue());
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The planner found no plan that fits by its estimate and kept the
  // closest: the compiled programs' exact plans decide, before anything is
  // written.
  if (auto first = trainingPrograms(*module); !first.empty())
    if (auto plan = first.front()->getAttrOfType<DictionaryAttr>(PpcDialect::kPlanAttrName))
      if (auto overBudget = plan.getAs<StringAttr>("over_budget")) {
        int64_t peak = exactPeak();
        if (peak > setup.parallelize.memoryPerRank)
          return reportError(llvm::formatv("{0} by estimate, and its program {1} exactly",
                                           overBudget.getValue(), peak));
        llvm::errs() << llvm::formatv(
            "note: by estimate, {0}; compiled, its program needs {1} bytes per rank exactly, "
            "which fits\n",
            overBudget.getValue(), peak);
      }

  if (!report.path.empty() && failed(writeCommunicationReport(report.path, *module, 1)))
    return 1;
  if ((!tracePath.empty() || !timelinePath.empty()) &&
      failed(writeTimeline(*module, tracePath, timelinePath)))
    return 1;
  if (!explainPath.empty() && failed(writeExplanation(explainPath, *module, *explainCluster)))
    return 1;
  if (explainOnly)
    return 0;
  // Each program's static memory plan (`layouts`), and its size: the arena
  // the executable allocates, after fusion (values a fused kernel keeps in
  // registers take no space) and views (reshapes, folded transposes).
  // What the planner chose (meshes of more than one rank).
  if (auto first = trainingPrograms(*module); !first.empty())
    if (auto plan = first.front()->getAttrOfType<DictionaryAttr>(PpcDialect::kPlanAttrName)) {
      auto number = [&](llvm::StringRef key) {
        auto value = plan.getAs<FloatAttr>(key);
        return value ? value.getValueAsDouble() : 0.0;
      };
      auto zero = first.front()->getAttrOfType<IntegerAttr>(PpcDialect::kZeroAttrName);
      auto recomputed = plan.getAs<StringAttr>("recompute");
      auto offloaded = plan.getAs<StringAttr>("offload");
      std::string offload;
      if (offloaded && offloaded.getValue() != "none")
        offload = llvm::formatv(" and offload {0} ({1:F0} bytes of host memory per rank, "
                                "{2:F3} ms of copies and host step)",
                                offloaded.getValue(), number("host_bytes"),
                                1e3 * number("offload_seconds"))
                      .str();
      llvm::errs() << llvm::formatv(
          "plan: ZeRO stage {0}, priced with {1} recomputation{5}: {2:F3} ms per step, {3:F0} "
          "bytes per rank by estimate (--memory-per-rank {4:F0})\n",
          zero ? zero.getInt() : 0, recomputed ? recomputed.getValue() : "no",
          1e3 * (number("compute_seconds") + number("comm_seconds") + number("offload_seconds")),
          number("peak_bytes"), number("memory_per_rank"), offload);
    }
  for (auto [program, layout] : llvm::zip_equal(trainingPrograms(*module), layouts)) {
    int64_t ops = 0;
    program.walk([&](Operation *) { ++ops; });
    const MemoryPlan &plan = layout.memory;
    printMemoryTable(plan, program.getSymName(), llvm::errs());
    printBlockActivations(describeBlockActivations(program), program.getSymName(), llvm::errs());
    // The planner chose by an estimate; the plan is exact.
    if (plan.peakBytes > setup.parallelize.memoryPerRank)
      llvm::errs() << llvm::formatv("warning: @{0} needs {1} bytes per rank, more than "
                                    "--memory-per-rank {2:F0}\n",
                                    program.getSymName(), plan.peakBytes,
                                    setup.parallelize.memoryPerRank);
    llvm::errs() << llvm::formatv("compiled @{0}: {1} ops per rank\n", program.getSymName(), ops);
  }
  if (profilePlan) {
    // The first program (rank 0's stage); a CUDA layout (collectives run
    // beside the kernels) whatever the target.
    auto programs = trainingPrograms(*module);
    auto cudaLayouts = codegen::layOutPrograms(*module, codegen::Target::Cuda);
    if (failed(cudaLayouts))
      return 1;
    codegen::StepEstimate estimate =
        codegen::estimateStep(programs.front(), cudaLayouts->front(), *gpuModel);
    codegen::printStepEstimate(estimate, *gpuModel, training.precision == "bf16",
                               setup.globalBatch * setup.seqLen, profileTop, llvm::errs());
  }
  if (emit == "mlir") {
    llvm::errs() << llvm::formatv("compiled in {0:f2} s\n", seconds);
    return failed(writeOutput(output, [&](llvm::raw_ostream &os) { module->print(os); }));
  }

  // The executable's description of itself.
  codegen::ExecutableInfo info;
  info.target = targetKind;
  info.precision = training.precision;
  llvm::SmallString<256> modelPath(input);
  llvm::sys::fs::make_absolute(modelPath);
  info.model = std::string(modelPath);
  info.untie = training.parameters.untie;
  info.predictOn = gpu;
  std::string printed;
  llvm::raw_string_ostream printedStream(printed);
  module->print(printedStream);
  info.fingerprint = llvm::utohexstr(llvm::xxh3_64bits(printed), /*LowerCase=*/true);
  info.initialWeights = llvm::sys::path::filename(output).str() + ".weights.safetensors";
  info.globalBatch = setup.globalBatch;
  info.seqLen = setup.seqLen;
  info.dataDtype = training.dataDtype;
  info.description = llvm::formatv("model {0}, mesh {1} (dp={2} tp={3} pp={4}), batch {5} x "
                                   "{6}, {7} micro-batches, {8}",
                                   llvm::sys::path::filename(input), training.mesh, setup.mesh.dp,
                                   setup.mesh.tp, setup.mesh.pp, setup.globalBatch, setup.seqLen,
                                   training.microBatches, training.optimizer)
                         .str();
  // Token inputs in graph-input order; appended label inputs last.
  llvm::SmallVector<func::FuncOp> programs = trainingPrograms(*module);
  llvm::SetVector<std::string, std::vector<std::string>, std::set<std::string>> tokenKeys;
  llvm::StringMap<std::pair<func::FuncOp, unsigned>> params;
  for (func::FuncOp program : programs)
    for (unsigned i = 0; i < program.getNumArguments(); ++i) {
      if (auto name = program.getArgAttrOfType<StringAttr>(i, PpcDialect::kInputAttrName))
        tokenKeys.insert(std::string(ppcrt::kInputKey) + name.getValue().str());
      if (auto name = program.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName))
        params.try_emplace(name.getValue(), program, i);
    }
  auto ordered = orderTokenInputs(**model, tokenKeys.getArrayRef());
  if (failed(ordered))
    return 1;
  info.tokenInputs.assign(ordered->begin(), ordered->end());
  // The hyper-parameters the programs take, with the values compiled in.
  std::set<std::string> seenHypers;
  for (func::FuncOp program : programs)
    for (unsigned i = 0; i < program.getNumArguments(); ++i)
      if (auto name = program.getArgAttrOfType<StringAttr>(i, PpcDialect::kHyperAttrName)) {
        if (!seenHypers.insert(name.getValue().str()).second)
          continue;
        auto value = hyperParameter(setup.pipeline, name.getValue());
        if (!value)
          return reportError("the step takes an unknown hyper-parameter '" + name.getValue() + "'");
        info.hypers.push_back({name.getValue().str(), *value});
      }

  std::string source;
  llvm::raw_string_ostream sourceStream(source);
  if (failed(codegen::emitSource(*module, info, layouts, sourceStream)))
    return 1;
  if (emit == "cpp" || emit == "cuda") {
    llvm::errs() << llvm::formatv("compiled in {0:f2} s\n", seconds);
    return failed(writeOutput(output, [&](llvm::raw_ostream &os) { os << source; }));
  }

  // The initial weights: every parameter's global value, by ONNX name.
  std::vector<ppcrt::TensorView> views;
  std::vector<std::string> storage;
  storage.reserve(params.size());
  llvm::SmallVector<std::string> names;
  for (auto &entry : params)
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  for (const std::string &name : names) {
    auto [program, i] = params.lookup(name);
    auto value = (*model)->loadInitializer(name);
    if (!value)
      return reportError(llvm::toString(value.takeError()));
    auto type = llvm::cast<RankedTensorType>(program.getArgumentTypes()[i]);
    auto dtype = dtypeOf(type.getElementType());
    if (failed(dtype) || (*dtype != DType::F32 && *dtype != DType::F64))
      return reportError("parameter '" + name + "': only f32 and f64 parameters so far");
    storage.push_back(value->castTo(*dtype).toBytes());
    ppcrt::TensorView view;
    view.name = name;
    view.dtype = *dtype;
    view.shape.assign(value->shape().begin(), value->shape().end());
    view.data = storage.back().data();
    views.push_back(std::move(view));
  }

  // Build beside the output and rename, so a failure leaves it untouched.
  llvm::SmallString<256> sourcePath, exePath, weightsPath(output);
  llvm::sys::path::remove_filename(weightsPath);
  llvm::sys::path::append(weightsPath, info.initialWeights);
  bool cuda = targetKind == codegen::Target::Cuda;
  if (auto ec = llvm::sys::fs::createTemporaryFile("ppc-program", cuda ? "cu" : "cpp", sourcePath))
    return reportError("cannot create a temporary file: " + ec.message());
  if (failed(writeOutput(sourcePath, [&](llvm::raw_ostream &os) { os << source; })))
    return 1;
  exePath = output;
  exePath += ".building";
  auto buildStart = std::chrono::steady_clock::now();
  llvm::Error built = codegen::buildExecutable(build, sourcePath, exePath, archFlags);
  llvm::sys::fs::remove(sourcePath);
  if (built) {
    llvm::sys::fs::remove(exePath);
    return reportError(llvm::toString(std::move(built)));
  }
  std::string weightsTemp = (weightsPath + ".building").str();
  if (llvm::Error e = ppcrt::writeSafetensors(weightsTemp, views, {{"model", info.model}})) {
    llvm::sys::fs::remove(exePath);
    return reportError(llvm::toString(std::move(e)));
  }
  // checkOutputs made both renames (within one directory) likely to work;
  // should one fail all the same, the files there before are put back and
  // nothing built is left behind.
  std::string previous = (weightsPath + ".previous").str();
  bool hadWeights =
      llvm::sys::fs::exists(weightsPath) && !llvm::sys::fs::rename(weightsPath, previous);
  auto giveUp = [&](llvm::StringRef what, std::error_code ec) {
    llvm::sys::fs::remove(weightsTemp);
    llvm::sys::fs::remove(exePath);
    if (hadWeights)
      llvm::sys::fs::rename(previous, weightsPath);
    return reportError("cannot write '" + what + "': " + ec.message());
  };
  if (auto ec = llvm::sys::fs::rename(weightsTemp, weightsPath))
    return giveUp(weightsPath, ec);
  if (auto ec = llvm::sys::fs::rename(exePath, output))
    return giveUp(output, ec);
  if (hadWeights)
    llvm::sys::fs::remove(previous);
  double buildSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - buildStart).count();
  llvm::errs() << llvm::formatv("compiled in {0:f2} s, built {1} in {2:f2} s (and {3})\n", seconds,
                                output, buildSeconds, weightsPath);
  return 0;
}

} // namespace ppc
