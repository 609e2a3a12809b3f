//===- SimulateCommand.cpp - `ppc simulate` -------------------------------===//
//
// Trains a model on the reference executor: imports it, builds @train_step
// with the training pipeline, and runs it step after step on the data of
// DESIGN.md §4, logging one JSON line per step.
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "executor/Spmd.h"
#include "ir/PpcAttrs.h"
#include "passes/Passes.h"
#include "frontend/OnnxExport.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcDialect.h"
#include "passes/Pipelines.h"
#include "runtime/Mesh.h"
#include "runtime/TokenData.h"
#include "tools/ppc/Driver.h"
#include "tools/ppc/TrainingFlags.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <chrono>
#include <optional>

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {


int runSimulateCommand(int argc, char **argv) {
  cl::OptionCategory category("ppc simulate options");
  cl::opt<std::string> input(cl::Positional, cl::desc("MODEL.onnx"), cl::Required,
                             cl::cat(category));
  cl::opt<std::string> data("data", cl::desc("token file (DESIGN.md §4)"),
                            cl::value_desc("FILE"), cl::Required, cl::cat(category));
  cl::opt<int64_t> steps("steps", cl::desc("training steps"), cl::Required,
                         cl::cat(category));
  cl::opt<std::string> logPath("log", cl::desc("one JSON line per step"),
                               cl::value_desc("F.jsonl"), cl::cat(category));
  cl::opt<std::string> exportPath(
      "export", cl::desc("write the trained model as ONNX"), cl::value_desc("OUT.onnx"),
      cl::cat(category));
  ReportFlag report;
  report.path.addCategory(category);
  TrainingFlags training(category);
  PipelineFlags pipelineFlags(category);
  parseCommandLine(
      argc, argv, category,
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
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  auto meshOps = module->getOps<MeshOp>();
  MeshOp meshOp = meshOps.empty() ? MeshOp() : *meshOps.begin();
  int64_t numRanks = meshOp ? meshOp.getNumRanks() : 1;
  if (!report.path.empty() && failed(writeCommunicationReport(report.path, *module, steps)))
    return 1;

  // Arguments, as global tensors: the step, parameters (from the model),
  // optimizer state (zeros), and token windows: inputs to the first integer
  // input, labels to the second (DESIGN.md §4). Each rank gets its block of
  // each, as the argument's ppc.sharding says.
  ExecOptions exec;
  llvm::SmallVector<Tensor> global;
  llvm::SmallVector<unsigned> paramArgs, tokenArgs;
  llvm::SmallVector<std::string> paramNames;
  for (auto [i, arg] : llvm::enumerate(step.getArguments())) {
    auto type = llvm::cast<RankedTensorType>(arg.getType());
    auto sharding = step.getArgAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName);
    llvm::SmallVector<int64_t> shape(type.getShape());
    // The global shape: the local one times the blocks of each dimension.
    if (sharding)
      for (auto [d, axes] : llvm::enumerate(sharding.getDimAxes())) {
        llvm::SmallVector<StringRef> names;
        for (StringAttr a : axes)
          names.push_back(a.getValue());
        shape[d] *= *meshOp.getGroupSize(names);
      }
    if (auto name = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName)) {
      auto value = imported.loadInitializer(name.getValue());
      if (!value)
        return reportError(llvm::toString(value.takeError()));
      global.push_back(value->castTo(exec.storage(type)));
      paramArgs.push_back(i);
      paramNames.push_back(name.getValue().str());
      continue;
    }
    if (auto name = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kInputAttrName)) {
      if (shape != llvm::ArrayRef<int64_t>{globalBatch, seqLen} ||
          isFloat(exec.storage(type)))
        return reportError("input '" + name.getValue() +
                           "': training feeds integer token windows [" +
                           llvm::Twine(globalBatch) + ", " + llvm::Twine(seqLen) + "]");
      tokenArgs.push_back(i);
    }
    global.push_back(Tensor(exec.storage(type), shape));
  }
  if (tokenArgs.empty() || tokenArgs.size() > 2)
    return reportError("training feeds token windows to one or two integer inputs "
                       "(inputs, then labels); the model has " +
                       llvm::Twine(tokenArgs.size()));
  auto shard = [&](unsigned i, const Tensor &value, int64_t rank) -> FailureOr<Tensor> {
    auto sharding = step.getArgAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName);
    if (!sharding)
      return value;
    auto local = shardTensor(value, sharding, meshOp, rank);
    if (!local) {
      reportError(llvm::toString(local.takeError()));
      return failure();
    }
    return std::move(*local);
  };
  std::vector<llvm::SmallVector<Tensor>> args(numRanks);
  for (int64_t r = 0; r < numRanks; ++r)
    for (auto [i, value] : llvm::enumerate(global)) {
      auto local = shard(i, value, r);
      if (failed(local))
        return 1;
      args[r].push_back(std::move(*local));
    }

  std::unique_ptr<llvm::raw_fd_ostream> log;
  if (!logPath.empty()) {
    std::error_code ec;
    log = std::make_unique<llvm::raw_fd_ostream>(logPath, ec);
    if (ec)
      return reportError("--log '" + logPath + "': " + ec.message());
  }
  unsigned numParams = paramArgs.size();
  unsigned numState = step.getNumResults() - 3 - numParams;
  for (int64_t s = 0; s < steps; ++s) {
    Tensor &inputs = global[tokenArgs[0]];
    Tensor labels(inputs.dtype(), inputs.shape());
    for (int64_t b = 0; b < globalBatch; ++b)
      tokens->window(s, globalBatch, seqLen, b, inputs.ints().data() + b * seqLen,
                     labels.ints().data() + b * seqLen);
    if (tokenArgs.size() == 2)
      global[tokenArgs[1]] = labels;
    for (int64_t r = 0; r < numRanks; ++r) {
      args[r][0].setInt(0, s);
      for (unsigned i : tokenArgs) {
        auto local = shard(i, global[i], r);
        if (failed(local))
          return 1;
        args[r][i] = std::move(*local);
      }
    }

    auto start = std::chrono::steady_clock::now();
    FailureOr<std::vector<llvm::SmallVector<Tensor>>> results;
    if (meshOp) {
      auto spmd = runSpmd(step, meshOp, args, exec);
      if (succeeded(spmd))
        results = std::vector<llvm::SmallVector<Tensor>>(spmd->begin(), spmd->end());
    } else {
      auto single = runFunction(step, args[0], exec);
      if (succeeded(single))
        results = std::vector<llvm::SmallVector<Tensor>>{std::move(*single)};
    }
    if (failed(results))
      return 1;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Each rank's new parameters and state go back in as its next arguments.
    for (int64_t r = 0; r < numRanks; ++r) {
      for (unsigned p = 0; p < numParams; ++p)
        args[r][paramArgs[p]] = std::move((*results)[r][p]);
      for (unsigned k = 0; k < numState; ++k)
        args[r][1 + numParams + k] = std::move((*results)[r][numParams + k]);
    }
    const auto &rank0 = (*results)[0];
    double loss = rank0[numParams + numState].getDouble(0);
    double gradNorm = rank0[numParams + numState + 1].getDouble(0);
    double rate = rank0[numParams + numState + 2].getDouble(0);
    double tokensPerSecond = globalBatch * seqLen / seconds;
    if (log) {
      llvm::json::OStream json(*log);
      json.object([&] {
        json.attribute("step", s);
        json.attribute("loss", loss);
        json.attribute("lr", rate);
        json.attribute("grad_norm", gradNorm);
        json.attribute("step_time", seconds);
        json.attribute("tokens_per_s", tokensPerSecond);
      });
      *log << "\n";
      log->flush();
    }
    llvm::errs() << llvm::formatv("step {0}/{1}  loss {2:f6}  lr {3:e2}  grad norm {4:f4}  "
                                  "{5:f2} s  {6:f0} tok/s\n",
                                  s + 1, steps, loss, rate, gradNorm, seconds,
                                  tokensPerSecond);
    if (!std::isfinite(loss))
      return reportError("step " + llvm::Twine(s) + ": the loss is not finite");
  }

  if (!exportPath.empty()) {
    llvm::StringMap<Tensor> trained;
    for (unsigned p = 0; p < numParams; ++p) {
      unsigned i = paramArgs[p];
      auto sharding = step.getArgAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName);
      if (!sharding) {
        trained[paramNames[p]] = args[0][i];
        continue;
      }
      llvm::SmallVector<Tensor> perRank;
      for (int64_t r = 0; r < numRanks; ++r)
        perRank.push_back(args[r][i]);
      auto whole = unshardTensor(perRank, sharding, meshOp);
      if (!whole)
        return reportError(llvm::toString(whole.takeError()));
      trained[paramNames[p]] = std::move(*whole);
    }
    if (llvm::Error e = exportOnnxModel(imported, trained, exportPath))
      return reportError(llvm::toString(std::move(e)));
    llvm::errs() << "wrote " << exportPath << "\n";
  }
  return 0;
}

} // namespace ppc
