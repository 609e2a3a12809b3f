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
#include "passes/sharding/CommunicationReport.h"
#include "frontend/OnnxExport.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcDialect.h"
#include "passes/Pipelines.h"
#include "runtime/Mesh.h"
#include "runtime/TokenData.h"
#include "tools/ppc/Driver.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <chrono>
#include <optional>

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {

namespace {

/// The batch and sequence dimensions of the model's integer inputs: a size,
/// or the name of a symbolic dimension to bind.
struct TokenDim {
  int64_t size = 0;
  std::string symbol;
};

LogicalResult tokenDims(const OnnxModel &model, TokenDim &batch, TokenDim &seq) {
  for (const auto &info : model.proto().graph().input()) {
    if (model.initializer(info.name()) || !info.type().has_tensor_type())
      continue;
    const auto &type = info.type().tensor_type();
    auto dtype = dtypeFromOnnxOrNull(type.elem_type());
    if (!dtype || isFloat(*dtype))
      continue;
    if (type.shape().dim_size() != 2) {
      reportError("input '" + info.name() + "': training feeds token windows [batch, "
                  "seq], but it has rank " + llvm::Twine(type.shape().dim_size()));
      return failure();
    }
    auto dim = [](const onnx::TensorShapeProto::Dimension &d) {
      TokenDim t;
      if (d.has_dim_value())
        t.size = d.dim_value();
      else
        t.symbol = d.dim_param();
      return t;
    };
    batch = dim(type.shape().dim(0));
    seq = dim(type.shape().dim(1));
    return success();
  }
  reportError("the model has no integer input to feed token windows to");
  return failure();
}

/// Settles the global batch, micro-batch and sequence sizes against the
/// model's dimensions, binding symbolic ones.
LogicalResult settleShapes(const TokenDim &batch, const TokenDim &seq, int64_t &globalBatch,
                           int64_t microBatches, int64_t &seqLen, ImportOptions &options) {
  if (globalBatch == 0) {
    if (batch.size == 0)
      return failure(reportError("--batch is required: the model's batch dimension is "
                                 "symbolic ('" + batch.symbol + "')"));
    globalBatch = batch.size * microBatches;
  }
  if (globalBatch % microBatches != 0)
    return failure(reportError(llvm::formatv("--batch {0} does not split into "
                                             "--micro-batches {1}",
                                             globalBatch, microBatches)));
  int64_t micro = globalBatch / microBatches;
  if (batch.size != 0 && batch.size != micro)
    return failure(reportError(llvm::formatv(
        "--batch {0} with --micro-batches {1} needs micro-batches of {2} sequences, "
        "but the model's batch dimension is fixed at {3}; export it with a "
        "dynamic batch axis to choose it",
        globalBatch, microBatches, micro, batch.size)));
  if (!batch.symbol.empty())
    options.dimSizes[batch.symbol] = micro;
  if (seqLen == 0) {
    if (seq.size == 0)
      return failure(reportError("--seq is required: the model's sequence dimension "
                                 "is symbolic ('" + seq.symbol + "')"));
    seqLen = seq.size;
  }
  if (seq.size != 0 && seq.size != seqLen)
    return failure(reportError(llvm::formatv(
        "--seq {0}: the model's sequence dimension is fixed at {1}", seqLen, seq.size)));
  if (!seq.symbol.empty())
    options.dimSizes[seq.symbol] = seqLen;
  return success();
}

} // namespace

int runSimulateCommand(int argc, char **argv) {
  cl::OptionCategory category("ppc simulate options");
  cl::opt<std::string> input(cl::Positional, cl::desc("MODEL.onnx"), cl::Required,
                             cl::cat(category));
  cl::opt<std::string> meshFlag("mesh", cl::desc("data x tensor x pipeline mesh"),
                                cl::value_desc("AxBxC"), cl::init("1"), cl::cat(category));
  cl::opt<std::string> data("data", cl::desc("token file (DESIGN.md §4)"),
                            cl::value_desc("FILE"), cl::Required, cl::cat(category));
  cl::opt<int64_t> steps("steps", cl::desc("training steps"), cl::Required,
                         cl::cat(category));
  cl::opt<std::string> logPath("log", cl::desc("one JSON line per step"),
                               cl::value_desc("F.jsonl"), cl::cat(category));
  cl::opt<std::string> exportPath(
      "export", cl::desc("write the trained model as ONNX"), cl::value_desc("OUT.onnx"),
      cl::cat(category));
  cl::opt<std::string> reportPath(
      "report", cl::desc("write the collectives of one step and the chosen parameter "
                         "shardings as JSON"),
      cl::value_desc("F.json"), cl::cat(category));
  cl::opt<int64_t> batchFlag("batch", cl::desc("global batch in sequences [model's]"),
                             cl::init(0), cl::cat(category));
  cl::opt<int64_t> seqFlag("seq", cl::desc("sequence length [model's]"), cl::init(0),
                           cl::cat(category));
  cl::opt<int64_t> microBatches("micro-batches", cl::desc("micro-batches per step"),
                                cl::init(1), cl::cat(category));
  cl::opt<std::string> optimizer("optimizer", cl::desc("sgd or adamw"),
                                 cl::init("adamw"), cl::cat(category));
  cl::opt<double> lr("lr", cl::desc("learning rate"), cl::init(1e-3), cl::cat(category));
  cl::opt<double> momentum("momentum", cl::desc("SGD momentum"), cl::init(0),
                           cl::cat(category));
  cl::opt<std::string> betas("betas", cl::desc("AdamW betas"), cl::value_desc("b1,b2"),
                             cl::init("0.9,0.999"), cl::cat(category));
  cl::opt<double> eps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8), cl::cat(category));
  cl::opt<double> weightDecay("weight-decay",
                              cl::desc("weight decay [0.01 for adamw, 0 for sgd]"),
                              cl::init(-1), cl::cat(category));
  cl::opt<double> gradClip("grad-clip", cl::desc("clip the global gradient norm [off]"),
                           cl::init(0), cl::cat(category));
  cl::opt<std::string> lrSchedule("lr-schedule", cl::desc("constant or cosine"),
                                  cl::init("constant"), cl::cat(category));
  cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("steps of linear warm-up"),
                               cl::init(0), cl::cat(category));
  cl::opt<double> minLr("min-lr", cl::desc("final learning rate of the cosine schedule"),
                        cl::init(0), cl::cat(category));
  cl::opt<int64_t> seed("seed", cl::desc("random seed (nothing is random yet)"),
                        cl::init(0), cl::cat(category));
  cl::opt<std::string> dataDtype("data-dtype", cl::desc("token type: u8, u16 or i32"),
                                 cl::init("u16"), cl::cat(category));
  cl::opt<std::string> zero("zero", cl::desc("ZeRO stage 0-3 [chosen]"), cl::init(""),
                            cl::cat(category));
  cl::opt<std::string> schedule("schedule", cl::desc("gpipe, 1f1b or interleaved"),
                                cl::init("1f1b"), cl::cat(category));
  cl::opt<std::string> precision("precision", cl::desc("fp32 or bf16"), cl::init("fp32"),
                                 cl::cat(category));
  cl::list<std::string> dims("dim", cl::desc("size of a symbolic input dimension"),
                             cl::value_desc("NAME=N"), cl::cat(category));
  PipelineFlags pipelineFlags;
  pipelineFlags.dumpIR.addCategory(category);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  cl::ParseCommandLineOptions(
      argc, argv,
      "ppc simulate: train a model on the reference executor\n\n"
      "Builds the training step of MODEL.onnx and runs it for --steps steps on\n"
      "--data, one JSON line per step to --log; --export writes the trained model.\n");

  auto mesh = parseMesh(meshFlag);
  if (!mesh)
    return reportError(llvm::toString(mesh.takeError()));
  if (mesh->pp != 1)
    return reportError("--mesh '" + meshFlag + "': pipeline parallelism (pp > 1) arrives "
                       "with the pipeline issue");
  if (steps < 1)
    return reportError("--steps must be at least 1");
  if (microBatches < 1)
    return reportError("--micro-batches must be at least 1");
  if (precision != "fp32")
    return reportError("--precision '" + precision + "': simulate computes in fp32");
  if (!zero.empty() && zero != "0" && zero != "1" && zero != "2" && zero != "3")
    return reportError("--zero '" + zero + "': expected 0, 1, 2 or 3");
  if (schedule != "gpipe" && schedule != "1f1b" && schedule != "interleaved")
    return reportError("--schedule '" + schedule + "': expected gpipe, 1f1b or interleaved");
  auto [beta1Text, beta2Text] = llvm::StringRef(betas).split(',');
  double beta1, beta2;
  if (beta1Text.trim().getAsDouble(beta1) || beta2Text.trim().getAsDouble(beta2))
    return reportError("--betas '" + betas + "': expected two numbers b1,b2");

  auto tokens = TokenData::open(data, dataDtype);
  if (!tokens)
    return reportError(llvm::toString(tokens.takeError()));
  auto model = OnnxModel::load(input);
  if (!model)
    return reportError(llvm::toString(model.takeError()));

  ImportOptions options;
  if (failed(parseDimFlags(dims, options)))
    return 1;
  TokenDim batchDim, seqDim;
  int64_t globalBatch = batchFlag, seqLen = seqFlag;
  if (failed(tokenDims(**model, batchDim, seqDim)) ||
      failed(settleShapes(batchDim, seqDim, globalBatch, microBatches, seqLen, options)))
    return 1;
  if (llvm::Error e = tokens->checkSequence(seqLen))
    return reportError(llvm::toString(std::move(e)));
  if ((globalBatch / microBatches) % mesh->dp != 0)
    return reportError(llvm::formatv("--batch {0} with --micro-batches {1} gives "
                                     "micro-batches of {2} sequences, which {3} "
                                     "data-parallel ranks cannot share",
                                     globalBatch, microBatches, globalBatch / microBatches,
                                     mesh->dp));

  MLIRContext context;
  DriverDiagnostics diagnostics(context);
  std::unique_ptr<OnnxModel> imported;
  OwningOpRef<ModuleOp> module =
      importModel(input, context, options, pipelineFlags.dumpIR, imported);
  if (!module)
    return 1;
  TrainingPipelineOptions training;
  training.optimizer = optimizer.getValue();
  training.lr = lr.getValue();
  training.momentum = momentum.getValue();
  training.beta1 = beta1;
  training.beta2 = beta2;
  training.eps = eps.getValue();
  training.weightDecay = weightDecay >= 0 ? weightDecay : optimizer == "adamw" ? 0.01 : 0.0;
  training.gradClip = gradClip.getValue();
  training.lrSchedule = lrSchedule.getValue();
  training.warmupSteps = warmupSteps.getValue();
  training.totalSteps = steps.getValue();
  training.minLr = minLr.getValue();
  training.microBatches = microBatches.getValue();
  training.dataParallel = mesh->dp;
  if (failed(runPipeline(
          *module,
          [&](OpPassManager &pm) {
            buildTrainingPipeline(pm, training);
            if (mesh->size() > 1) {
              PartitionOptions partition;
              partition.dataParallel = mesh->dp;
              partition.tensorParallel = mesh->tp;
              pm.addPass(createPartition(partition));
            }
          },
          pipelineFlags.dumpIR)))
    return 1;
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  auto meshOps = module->getOps<MeshOp>();
  MeshOp meshOp = meshOps.empty() ? MeshOp() : *meshOps.begin();
  int64_t numRanks = meshOp ? meshOp.getNumRanks() : 1;
  if (!reportPath.empty()) {
    if (!meshOp)
      return reportError("--report: a single rank communicates nothing; give --mesh");
    llvm::json::Value json =
        reportToJson(analyzeCommunication(step, meshOp), meshOp, steps);
    if (failed(writeOutput(reportPath, [&](llvm::raw_ostream &os) {
          os << llvm::formatv("{0:2}", json) << "\n";
        })))
      return 1;
  }

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
      auto value = imported->loadInitializer(name.getValue());
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
    if (llvm::Error e = exportOnnxModel(*imported, trained, exportPath))
      return reportError(llvm::toString(std::move(e)));
    llvm::errs() << "wrote " << exportPath << "\n";
  }
  return 0;
}

} // namespace ppc
