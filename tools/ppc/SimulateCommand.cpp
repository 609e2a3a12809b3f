//===- SimulateCommand.cpp - `ppc simulate` -------------------------------===//
//
// Trains a model on the reference executor: imports it, builds @train_step
// with the training pipeline, and runs it step after step on the data of
// DESIGN.md §4, logging one JSON line per step.
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "executor/Spmd.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcAttrs.h"
#include "ir/PpcDialect.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "runtime/Mesh.h"
#include "runtime/TokenData.h"
#include "runtime/TrainedModel.h"
#include "runtime/ppcrt/Program.h"
#include "tools/ppc/Driver.h"
#include "tools/ppc/TrainingFlags.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {

int runSimulateCommand(int argc, char **argv) {
  cl::OptionCategory category("ppc simulate options");
  cl::opt<std::string> input(cl::Positional, cl::desc("MODEL.onnx"), cl::Required,
                             cl::cat(category));
  cl::opt<std::string> data("data", cl::desc("token file (DESIGN.md §4)"), cl::value_desc("FILE"),
                            cl::Required, cl::cat(category));
  cl::opt<int64_t> steps("steps", cl::desc("training steps"), cl::Required, cl::cat(category));
  cl::opt<std::string> logPath("log", cl::desc("one JSON line per step"), cl::value_desc("F.jsonl"),
                               cl::cat(category));
  cl::opt<std::string> exportPath("export", cl::desc("write the trained model as ONNX"),
                                  cl::value_desc("OUT.onnx"), cl::cat(category));
  ReportFlag report;
  report.path.addCategory(category);
  TrainingFlags training(category);
  PipelineFlags pipelineFlags(category);
  parseCommandLine(argc, argv, category,
                   "ppc simulate: train a model on the reference executor\n\n"
                   "Builds the training step of MODEL.onnx and runs it for --steps steps on\n"
                   "--data, one JSON line per step to --log; --export writes the trained model.\n");

  if (steps < 1)
    return reportError("--steps must be at least 1");
  auto tokens = TokenData::open(data, training.dataDtype);
  if (!tokens)
    return reportError(llvm::toString(tokens.takeError()));
  auto model = OnnxModel::load(input);
  if (!model)
    return reportError(llvm::toString(model.takeError()));

  ImportOptions options;
  TrainingFlags::Setup setup;
  if (failed(training.setUp(**model, options, steps, setup)))
    return 1;
  int64_t globalBatch = setup.globalBatch, seqLen = setup.seqLen;
  if (llvm::Error e = tokens->checkSequence(seqLen))
    return reportError(llvm::toString(std::move(e)));

  MLIRContext context;
  DriverDiagnostics diagnostics(context);
  const OnnxModel &imported = **model;
  OwningOpRef<ModuleOp> module = importModel(imported, context, options, pipelineFlags.dumpIR);
  if (!module)
    return 1;
  if (failed(runPipeline(
          *module, [&](OpPassManager &pm) { TrainingFlags::buildPipeline(pm, setup); },
          pipelineFlags.dumpIR)))
    return 1;
  // The programs: @train_step, or one @train_step_pp<r> per pipeline rank.
  auto meshOps = module->getOps<MeshOp>();
  MeshOp meshOp = meshOps.empty() ? MeshOp() : *meshOps.begin();
  int64_t numRanks = meshOp ? meshOp.getNumRanks() : 1;
  llvm::SmallVector<func::FuncOp> programs;
  if (auto step = module->lookupSymbol<func::FuncOp>("train_step"))
    programs.push_back(step);
  else
    for (auto fn : module->getOps<func::FuncOp>())
      if (fn->hasAttr(PpcDialect::kPipelineRankAttrName))
        programs.push_back(fn);
  if (programs.empty())
    return reportError("the training pipeline produced no @train_step");
  llvm::SmallVector<func::FuncOp> programOfRank;
  for (int64_t r = 0; r < numRanks; ++r)
    programOfRank.push_back(programs.size() == 1 ? programs[0]
                                                 : programs[meshOp.getCoordinates(r)[0]]);
  if (!report.path.empty() && failed(writeCommunicationReport(report.path, *module, steps)))
    return 1;

  // Arguments, as global tensors by key ("param:wte", "state:exp_avg:wte",
  // "input:ids", "step"): the step, parameters (from the model), optimizer
  // state (zeros), and token windows: inputs to the first integer input,
  // labels to the second (DESIGN.md §4). Each rank gets its block of each
  // argument its program takes, as the argument's ppc.sharding says.
  ExecOptions exec;
  llvm::StringMap<Tensor> global;
  llvm::StringMap<ShardingAttr> shardingOf;
  llvm::SmallVector<std::string> tokenKeys, paramNames;
  llvm::SmallVector<std::string> inputOrder;
  for (func::FuncOp fn : programs)
    for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
      std::string key = programKey(fn, i, false);
      if (global.count(key))
        continue;
      auto type = llvm::cast<RankedTensorType>(arg.getType());
      auto sharding = fn.getArgAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName);
      shardingOf[key] = sharding;
      llvm::SmallVector<int64_t> shape(type.getShape());
      // The global shape: the local one times the blocks of each dimension.
      if (sharding)
        for (auto [d, axes] : llvm::enumerate(sharding.getDimAxes())) {
          llvm::SmallVector<StringRef> names;
          for (StringAttr a : axes)
            names.push_back(a.getValue());
          shape[d] *= *meshOp.getGroupSize(names);
        }
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName)) {
        auto value = imported.loadInitializer(name.getValue());
        if (!value)
          return reportError(llvm::toString(value.takeError()));
        global[key] = value->castTo(exec.storage(type));
        paramNames.push_back(name.getValue().str());
        continue;
      }
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, PpcDialect::kInputAttrName)) {
        if (shape != llvm::ArrayRef<int64_t>{globalBatch, seqLen} || isFloat(exec.storage(type)))
          return reportError("input '" + printable(name.getValue()) +
                             "': training feeds integer token windows [" +
                             llvm::Twine(globalBatch) + ", " + llvm::Twine(seqLen) + "]");
        inputOrder.push_back(key);
      }
      global[key] = Tensor(exec.storage(type), shape);
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, PpcDialect::kHyperAttrName)) {
        auto value = hyperParameter(setup.pipeline, name.getValue());
        if (!value)
          return reportError("the step takes an unknown hyper-parameter '" + name.getValue() + "'");
        global[key].setDouble(0, *value);
      }
    }
  // Inputs in graph-input order (the step lists them so; the first
  // pipeline rank may take only the first, the last only the labels).
  auto ordered = orderTokenInputs(imported, inputOrder);
  if (failed(ordered))
    return 1;
  tokenKeys = std::move(*ordered);
  auto shard = [&](llvm::StringRef key, const Tensor &value, int64_t rank) -> FailureOr<Tensor> {
    ShardingAttr sharding = shardingOf.lookup(key);
    if (!sharding)
      return value;
    auto local = shardTensor(value, sharding, meshOp, rank);
    if (!local) {
      reportError(llvm::toString(local.takeError()));
      return failure();
    }
    return std::move(*local);
  };
  // Each rank's arguments and results by key, and its values: what its
  // program takes and returns.
  std::vector<llvm::SmallVector<std::string>> argKeys(numRanks), resultKeys(numRanks);
  for (int64_t r = 0; r < numRanks; ++r) {
    for (unsigned i = 0; i < programOfRank[r].getNumArguments(); ++i)
      argKeys[r].push_back(programKey(programOfRank[r], i, false));
    for (unsigned i = 0; i < programOfRank[r].getNumResults(); ++i)
      resultKeys[r].push_back(programKey(programOfRank[r], i, true));
  }
  std::vector<llvm::StringMap<Tensor>> held(numRanks);
  for (int64_t r = 0; r < numRanks; ++r)
    for (const std::string &key : argKeys[r]) {
      auto local = shard(key, global[key], r);
      if (failed(local))
        return 1;
      held[r][key] = std::move(*local);
    }

  std::unique_ptr<llvm::raw_fd_ostream> log;
  if (!logPath.empty()) {
    std::error_code ec;
    log = std::make_unique<llvm::raw_fd_ostream>(logPath, ec);
    if (ec)
      return reportError("--log '" + logPath + "': " + ec.message());
  }
  llvm::SmallVector<int64_t> peakBytes, hostPeakBytes;
  // --precision fp16: the loss scale, kept as torch's GradScaler keeps it
  // (halved on a step whose gradients overflow, which updates nothing;
  // doubled after the growth interval of good steps), fed to each step with
  // the steps skipped so far.
  double lossScale = setup.pipeline.lossScale;
  int64_t goodSteps = 0, skippedSteps = 0;
  const std::string scaleKey = std::string(ppcrt::kHyperKey) + "loss_scale",
                    skippedKey = std::string(ppcrt::kHyperKey) + "skipped_steps";
  for (int64_t s = 0; s < steps; ++s) {
    Tensor &inputs = global[tokenKeys[0]];
    Tensor labels(inputs.dtype(), inputs.shape());
    for (int64_t b = 0; b < globalBatch; ++b)
      tokens->window(s, globalBatch, seqLen, b, inputs.ints().data() + b * seqLen,
                     labels.ints().data() + b * seqLen);
    if (tokenKeys.size() == 2)
      global[tokenKeys[1]] = labels;
    std::vector<llvm::SmallVector<Tensor>> args(numRanks);
    for (int64_t r = 0; r < numRanks; ++r) {
      for (const std::string &key : argKeys[r]) {
        if (key == "step") {
          held[r][key].setInt(0, s);
        } else if (key == scaleKey) {
          held[r][key].setDouble(0, lossScale);
        } else if (key == skippedKey) {
          held[r][key].setDouble(0, skippedSteps);
        } else if (llvm::is_contained(tokenKeys, key)) {
          auto local = shard(key, global[key], r);
          if (failed(local))
            return 1;
          held[r][key] = std::move(*local);
        }
        // What the step returns comes back into `held`; the rest is copied.
        if (llvm::is_contained(resultKeys[r], key))
          args[r].push_back(std::move(held[r][key]));
        else
          args[r].push_back(held[r][key]);
      }
    }

    auto start = std::chrono::steady_clock::now();
    FailureOr<llvm::SmallVector<llvm::SmallVector<Tensor>>> results;
    if (meshOp) {
      results = runMesh(programOfRank, meshOp, args, exec, &peakBytes, &hostPeakBytes);
    } else {
      RunStats stats;
      auto single = runFunction(programOfRank[0], args[0], exec, &stats);
      if (succeeded(single))
        results = llvm::SmallVector<llvm::SmallVector<Tensor>>{std::move(*single)};
      peakBytes.assign(1, stats.peakBytes);
      hostPeakBytes.assign(1, stats.hostPeakBytes);
    }
    if (failed(results))
      return 1;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Each rank's new parameters and state go back in as its next
    // arguments; the outputs come from the rank that returns them.
    llvm::StringMap<double> outputs;
    for (int64_t r = 0; r < numRanks; ++r) {
      for (auto [i, key] : llvm::enumerate(resultKeys[r])) {
        if (llvm::StringRef(key).starts_with(ppcrt::kOutputKey))
          outputs.try_emplace(llvm::StringRef(key).drop_front(ppcrt::kOutputKey.size()),
                              (*results)[r][i].getDouble(0));
        else
          held[r][key] = std::move((*results)[r][i]);
      }
    }
    double loss = outputs.lookup("loss");
    double gradNorm = outputs.lookup("grad_norm");
    double rate = outputs.lookup("lr");
    bool scaling = outputs.count("overflow");
    bool overflow = scaling && outputs.lookup("overflow") != 0;
    double scaleUsed = lossScale;
    if (overflow) {
      lossScale *= 0.5;
      goodSteps = 0;
      ++skippedSteps;
    } else if (scaling && ++goodSteps == setup.pipeline.lossScaleGrowthInterval) {
      lossScale *= 2;
      goodSteps = 0;
    }
    double tokensPerSecond = globalBatch * seqLen / seconds;
    int64_t peak = peakBytes.empty() ? 0 : *llvm::max_element(peakBytes);
    // JSON has no inf or NaN: a non-finite value is logged as null.
    auto number = [](double v) { return std::isfinite(v) ? llvm::json::Value(v) : nullptr; };
    if (log) {
      llvm::json::OStream json(*log);
      json.object([&] {
        json.attribute("step", s);
        json.attribute("loss", number(loss));
        json.attribute("lr", number(rate));
        json.attribute("grad_norm", number(gradNorm));
        if (scaling) {
          json.attribute("loss_scale", scaleUsed);
          json.attribute("overflow", overflow);
        }
        json.attribute("step_time", seconds);
        json.attribute("tokens_per_s", tokensPerSecond);
        json.attribute("peak_bytes", peak);
        json.attributeArray("peak_bytes_per_rank", [&] {
          for (int64_t b : peakBytes)
            json.value(b);
        });
        // --offload: what the host's memory held at its peak, per rank.
        if (llvm::any_of(hostPeakBytes, [](int64_t b) { return b > 0; }))
          json.attributeArray("host_peak_bytes_per_rank", [&] {
            for (int64_t b : hostPeakBytes)
              json.value(b);
          });
      });
      *log << "\n";
      log->flush();
    }
    std::string scaleNote;
    if (scaling)
      scaleNote = llvm::formatv(scaleUsed >= 1 && scaleUsed == std::floor(scaleUsed)
                                    ? "  loss scale {0:F0}{1}"
                                    : "  loss scale {0:E3}{1}",
                                scaleUsed, overflow ? " (overflow: step skipped)" : "")
                      .str();
    llvm::errs() << llvm::formatv("step {0}/{1}  loss {2:f6}  lr {3:e2}  grad norm {4:f4}  "
                                  "{5:f2} s  {6:f0} tok/s{7}\n",
                                  s + 1, steps, loss, rate, gradNorm, seconds, tokensPerSecond,
                                  scaleNote);
    // Steps are counted from 1 here, as on the progress line. (A step whose
    // scaled gradients overflowed has no gradient norm to check: it was
    // skipped. Its loss does not depend on the scale: one that is not
    // finite overflowed in the forward, which no scale mends.)
    if (overflow && lossScale < 0x1p-24)
      return reportError("step " + llvm::Twine(s + 1) +
                         ": the gradients overflow at every loss scale down to 2^-24");
    for (auto [what, value, skipped] : {std::tuple<const char *, double, bool>{"loss", loss, false},
                                        {"gradient norm", gradNorm, overflow}})
      if (!std::isfinite(value) && !skipped)
        return reportError("step " + llvm::Twine(s + 1) + ": the " + what + " is " +
                           (std::isnan(value) ? "NaN" : "infinite"));
  }

  if (!exportPath.empty()) {
    // Every parameter's whole value, in f64 (the executor's elements); the
    // writer rounds each to its initializer's type.
    std::map<std::string, ppcrt::GlobalTensor> trained;
    auto whole = [](const Tensor &value) {
      ppcrt::GlobalTensor global;
      global.dtype = ppcrt::DType::F64;
      global.shape.assign(value.shape().begin(), value.shape().end());
      global.data.resize(value.numElements() * sizeof(double));
      for (int64_t i = 0; i < value.numElements(); ++i) {
        double element = value.getDouble(i);
        std::memcpy(global.data.data() + i * sizeof(double), &element, sizeof(double));
      }
      return global;
    };
    for (const std::string &name : paramNames) {
      std::string key = std::string(ppcrt::kParamKey) + name;
      ShardingAttr sharding = shardingOf.lookup(key);
      // Every rank's block, from the rank at the same data and tensor
      // position that holds it (pipeline ranks hold their stages' only).
      llvm::SmallVector<Tensor> perRank;
      for (int64_t r = 0; r < numRanks; ++r) {
        const Tensor *found = nullptr;
        for (int64_t q = 0; q < numRanks && !found; ++q) {
          bool samePlace = !meshOp || llvm::ArrayRef(meshOp.getCoordinates(q)).drop_front() ==
                                          llvm::ArrayRef(meshOp.getCoordinates(r)).drop_front();
          if (samePlace && held[q].count(key))
            found = &held[q][key];
        }
        perRank.push_back(*found);
      }
      if (!sharding) {
        trained[name] = whole(perRank[0]);
        continue;
      }
      auto value = unshardTensor(perRank, sharding, meshOp);
      if (!value)
        return reportError(llvm::toString(value.takeError()));
      trained[name] = whole(*value);
    }
    if (llvm::Error e = ppcrt::writeTrainedModel(input, training.parameters.untie, trained,
                                                 exportPath, "--export"))
      return reportError(llvm::toString(std::move(e)));
    llvm::errs() << "wrote " << exportPath << "\n";
  }
  return 0;
}

} // namespace ppc
