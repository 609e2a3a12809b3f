//===- TrainingFlags.cpp - the TRAINING options of simulate and compile ---===//

#include "tools/ppc/TrainingFlags.h"
#include "frontend/InputBindings.h"
#include "frontend/OnnxTensor.h"
#include "passes/Passes.h"
#include "passes/memory/Recompute.h"
#include "runtime/ppcrt/HyperParameters.h"
#include "tools/ppc/Driver.h"

#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

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

/// The token input: `input_ids` when the model has it, else its first
/// integer input that is not bound to a constant.
LogicalResult tokenDims(const OnnxModel &model, const llvm::StringMap<std::string> &bound,
                        TokenDim &batch, TokenDim &seq) {
  const auto &inputs = model.proto().graph().input();
  auto isTokens = [&](const onnx::ValueInfoProto &info) {
    return info.name() == "input_ids" && !bound.count(info.name());
  };
  bool named = llvm::any_of(inputs, isTokens);
  for (const auto &info : inputs) {
    if (model.initializer(info.name()) || !info.type().has_tensor_type() ||
        bound.count(info.name()) || (named && !isTokens(info)))
      continue;
    const auto &type = info.type().tensor_type();
    auto dtype = dtypeFromOnnxOrNull(type.elem_type());
    if (!dtype || isFloat(*dtype))
      continue;
    if (type.shape().dim_size() != 2) {
      reportError("input '" + printable(info.name()) +
                  "': training feeds token windows [batch, "
                  "seq], but it has rank " +
                  llvm::Twine(type.shape().dim_size()));
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
                                 "symbolic ('" +
                                 printable(batch.symbol) + "')"));
    std::optional<int64_t> product = llvm::checkedMul(batch.size, microBatches);
    if (!product)
      return failure(reportError(llvm::formatv("the model's batch dimension {0} times "
                                               "--micro-batches {1} overflows an int64",
                                               batch.size, microBatches)));
    globalBatch = *product;
  }
  if (globalBatch % microBatches != 0)
    return failure(reportError(llvm::formatv("--batch {0} does not split into "
                                             "--micro-batches {1}",
                                             globalBatch, microBatches)));
  int64_t micro = globalBatch / microBatches;
  if (batch.size != 0 && batch.size != micro)
    return failure(reportError(
        llvm::formatv("--batch {0} with --micro-batches {1} needs micro-batches of {2} sequences, "
                      "but the model's batch dimension is fixed at {3}; export it with a "
                      "dynamic batch axis to choose it",
                      globalBatch, microBatches, micro, batch.size)));
  if (!batch.symbol.empty())
    options.dimSizes[batch.symbol] = micro;
  if (seqLen == 0) {
    if (seq.size == 0)
      return failure(reportError("--seq is required: the model's sequence dimension "
                                 "is symbolic ('" +
                                 printable(seq.symbol) + "')"));
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

TrainingFlags::TrainingFlags(cl::OptionCategory &category)
    : mesh("mesh",
           cl::desc("data x tensor x pipeline mesh (AxBxC or dp=A,tp=B,pp=C); ppc compile "
                    "also takes auto (with --devices: the plan ppc plan prints first)"),
           cl::value_desc("AxBxC"), cl::init("1"), cl::cat(category)),
      batch("batch",
            cl::desc("global batch in sequences [the model's batch dimension "
                     "times --micro-batches]"),
            cl::init(0), cl::cat(category)),
      seq("seq", cl::desc("sequence length [the model's]"), cl::init(0), cl::cat(category)),
      microBatches("micro-batches", cl::desc("micro-batches per step"), cl::init(1),
                   cl::cat(category)),
      optimizer("optimizer", cl::desc("sgd or adamw"), cl::init("adamw"), cl::cat(category)),
      lr("lr", cl::desc("learning rate"), cl::init(1e-3), cl::cat(category)),
      momentum("momentum", cl::desc("SGD momentum"), cl::init(0), cl::cat(category)),
      betas("betas", cl::desc("AdamW betas"), cl::value_desc("b1,b2"), cl::init("0.9,0.999"),
            cl::cat(category)),
      eps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8), cl::cat(category)),
      weightDecay("weight-decay", cl::desc("weight decay [0.01 for adamw, 0 for sgd]"),
                  cl::init(-1), cl::cat(category)),
      gradClip("grad-clip", cl::desc("clip the global gradient norm [off]"), cl::init(0),
               cl::cat(category)),
      lrSchedule("lr-schedule", cl::desc("constant or cosine"), cl::init("constant"),
                 cl::cat(category)),
      warmupSteps("warmup-steps", cl::desc("steps of linear warm-up"), cl::init(0),
                  cl::cat(category)),
      minLr("min-lr", cl::desc("final learning rate of the cosine schedule"), cl::init(0),
            cl::cat(category)),
      seed("seed", cl::desc("random seed (nothing is random yet)"), cl::init(0), cl::cat(category)),
      dataDtype("data-dtype", cl::desc("token type of the data file: u8, u16 or i32"),
                cl::init("u16"), cl::cat(category)),
      zero("zero", cl::desc("ZeRO stage 0-3 [chosen]"), cl::init(""), cl::cat(category)),
      schedule("schedule", cl::desc("pipeline schedule: gpipe, 1f1b or interleaved"),
               cl::init("1f1b"), cl::cat(category)),
      virtualStages("virtual-stages",
                    cl::desc("model chunks per pipeline rank for --schedule interleaved "
                             "[2]"),
                    cl::init(0), cl::cat(category)),
      recompute("recompute",
                cl::desc("activation recomputation: none, selective (each block's attention "
                         "core), full (keep only each block's input) or auto (the least that "
                         "fits --memory-per-rank)"),
                cl::init("auto"), cl::cat(category)),
      offload("offload",
              cl::desc("keep state in host memory: none, optimizer (the optimizer state, and "
                       "its step run by the host), optimizer+params (the parameters too, "
                       "copied to the device where the step reads them) or auto (the "
                       "planner's choice, where no plan fits --memory-per-rank without)"),
              cl::init("auto"), cl::cat(category)),
      precision("precision",
                cl::desc("fp32, bf16 (activations in bf16, f32 master weights), or fp16 (the "
                         "same in f16, with dynamic loss scaling; ppc simulate only)"),
                cl::init("fp32"), cl::cat(category)),
      attention("attention",
                cl::desc("fused (scaled dot-product attention runs as one FlashAttention "
                         "op that never stores the T x T scores) or unfused (the matmuls "
                         "and softmax as exported) [fused]"),
                cl::init("fused"), cl::cat(category)),
      lossScale("loss-scale",
                cl::desc("--precision fp16: the initial loss scale [65536]; halved when a "
                         "gradient overflows, doubled after --loss-scale-growth-interval "
                         "good steps"),
                cl::init(65536.0), cl::cat(category)),
      lossScaleGrowthInterval(
          "loss-scale-growth-interval",
          cl::desc("--precision fp16: steps without overflow before the loss scale doubles "
                   "[2000]"),
          cl::init(2000), cl::cat(category)),
      dims("dim", cl::desc("size of a symbolic input dimension"), cl::value_desc("NAME=N"),
           cl::cat(category)),
      shards("shard",
             cl::desc("pin a parameter's layout: split dimension DIM of parameter NAME "
                      "over the tensor-parallel axis, in BLOCKS blocks [1] (repeatable; "
                      "the planner chooses the others)"),
             cl::value_desc("NAME:DIM[:BLOCKS]"), cl::cat(category)),
      memoryPerRank("memory-per-rank",
                    cl::desc("device memory of one rank in bytes (suffixes K, M, G: "
                             "powers of 1024); the planner's plans must fit [80e9]"),
                    cl::value_desc("BYTES"), cl::init(""), cl::cat(category)),
      hostMemoryPerRank("host-memory-per-rank",
                        cl::desc("host memory of one rank in bytes (suffixes K, M, G); what "
                                 "--offload keeps there must fit [256G: a DGX H100's 2 TiB "
                                 "over 8 GPUs]"),
                        cl::value_desc("BYTES"), cl::init(""), cl::cat(category)),
      sequenceParallel("sequence-parallel",
                       cl::desc("split the activations between tensor-parallel blocks along "
                                "the sequence over tp (reduce-scatter and all-gather instead "
                                "of all-reduce)"),
                       cl::init(false), cl::cat(category)),
      parameters(category),
      bind("bind",
           cl::desc("bind graph input NAME to a constant: ones, zeros, arange (0..T-1 "
                    "along its last dimension) or a .npy file (repeatable) "
                    "[attention_mask=ones, token_type_ids=zeros, position_ids=arange]"),
           cl::value_desc("NAME=VALUE"), cl::cat(category)) {}

llvm::SmallVector<cl::Option *> TrainingFlags::plannedFlags() {
  // (cl::list's operator& is its vector's.)
  return {&zero,
          &schedule,
          &virtualStages,
          &recompute,
          &offload,
          &microBatches,
          &sequenceParallel,
          static_cast<cl::Option *>(std::addressof(shards))};
}

FailureOr<int64_t> TrainingFlags::fixedBatch(const OnnxModel &model) {
  auto bound = inputsToBind(model, bind, [](const llvm::Twine &message) { reportError(message); });
  if (failed(bound))
    return failure();
  TokenDim batchDim, seqDim;
  if (failed(tokenDims(model, *bound, batchDim, seqDim)))
    return failure();
  return batchDim.size;
}

LogicalResult TrainingFlags::setUp(OnnxModel &model, ImportOptions &options, int64_t scheduleSteps,
                                   Setup &setup) {
  auto parsed = parseMesh(mesh);
  if (!parsed)
    return failure(reportError(llvm::toString(parsed.takeError())));
  setup.mesh = *parsed;
  if (microBatches < 1)
    return failure(reportError("--micro-batches must be at least 1"));
  // Sizes a flag may ask for: given, at least 1 and at most 2^24, so that
  // no product of them with the model's own sizes overflows 64 bits.
  constexpr int64_t kMaxSize = int64_t(1) << 24;
  for (cl::opt<int64_t> *size : {&batch, &seq})
    if (size->getNumOccurrences() && (*size < 1 || *size > kMaxSize))
      return failure(reportError(
          llvm::formatv("--{0} {1}: expected 1 to {2}", size->ArgStr, size->getValue(), kMaxSize)));
  if (microBatches > kMaxSize)
    return failure(reportError(llvm::formatv("--micro-batches {0}: expected 1 to {1}",
                                             microBatches.getValue(), kMaxSize)));
  if (virtualStages.getNumOccurrences() && (virtualStages < 1 || virtualStages > kMaxSize))
    return failure(reportError(llvm::formatv("--virtual-stages {0}: expected 1 to {1}",
                                             virtualStages.getValue(), kMaxSize)));
  if (warmupSteps < 0)
    return failure(reportError(
        llvm::formatv("--warmup-steps {0}: expected 0 or more", warmupSteps.getValue())));
  if (dataDtype != "u8" && dataDtype != "u16" && dataDtype != "i32")
    return failure(reportError("--data-dtype '" + dataDtype + "': expected u8, u16 or i32"));
  // Hyper-parameters: finite, and within what the optimizer means by them.
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", v);
    return std::string(text);
  };
  // Each in [0, 1) or [0, inf), as runtime/ppcrt/HyperParameters.h says.
  std::vector<cl::opt<double> *> numbers = {&lr, &momentum, &eps, &gradClip, &minLr};
  if (weightDecay.getNumOccurrences())
    numbers.push_back(&weightDecay);
  for (cl::opt<double> *flag : numbers) {
    double v = flag->getValue(), high = INFINITY;
    for (const ppcrt::HyperParameter &h : ppcrt::kHyperParameters)
      if (flag->ArgStr == h.flag && h.fraction)
        high = 1;
    if (!std::isfinite(v) || v < 0 || v >= high)
      return failure(reportError("--" + flag->ArgStr + " " + number(v) +
                                 ": expected a finite number in [0, " + number(high) + ")"));
  }
  if (precision != "fp32" && precision != "bf16" && precision != "fp16")
    return failure(reportError("--precision '" + precision + "': expected fp32, bf16 or fp16"));
  if (attention != "fused" && attention != "unfused")
    return failure(reportError("--attention '" + attention + "': expected fused or unfused"));
  if (precision != "fp16")
    for (cl::Option *flag :
         std::initializer_list<cl::Option *>{&lossScale, &lossScaleGrowthInterval})
      if (flag->getNumOccurrences())
        return failure(reportError("--" + flag->ArgStr + " applies to --precision fp16"));
  // A power of two, as GradScaler's growth and backoff keep it when it
  // starts as one; any positive finite value is taken.
  if (!std::isfinite(lossScale) || lossScale <= 0 || !std::isfinite(1 / lossScale))
    return failure(
        reportError("--loss-scale " + number(lossScale) + ": expected a positive finite number"));
  if (lossScaleGrowthInterval < 1)
    return failure(reportError(llvm::formatv("--loss-scale-growth-interval {0}: expected 1 or "
                                             "more",
                                             lossScaleGrowthInterval.getValue())));
  if (!zero.empty() && zero != "0" && zero != "1" && zero != "2" && zero != "3")
    return failure(reportError("--zero '" + zero + "': expected 0, 1, 2 or 3"));
  if (schedule != "gpipe" && schedule != "1f1b" && schedule != "interleaved")
    return failure(
        reportError("--schedule '" + schedule + "': expected gpipe, 1f1b or interleaved"));
  auto [beta1Text, beta2Text] = llvm::StringRef(betas).split(',');
  double beta1, beta2;
  if (beta1Text.trim().getAsDouble(beta1) || beta2Text.trim().getAsDouble(beta2) ||
      !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return failure(reportError("--betas '" + betas + "': expected two numbers b1,b2 in [0, 1)"));
  if (failed(parseDimFlags(dims, options)))
    return failure();

  auto emitError = [](const llvm::Twine &message) { reportError(message); };
  if (failed(parameters.apply(model, options)))
    return failure();
  auto bound = inputsToBind(model, bind, emitError);
  if (failed(bound))
    return failure();
  TokenDim batchDim, seqDim;
  setup.globalBatch = batch;
  setup.seqLen = seq;
  if (failed(tokenDims(model, *bound, batchDim, seqDim)) ||
      failed(
          settleShapes(batchDim, seqDim, setup.globalBatch, microBatches, setup.seqLen, options)) ||
      failed(bindInputs(model, *bound, options, emitError)))
    return failure();
  if ((setup.globalBatch / microBatches) % setup.mesh.dp != 0)
    return failure(reportError(
        llvm::formatv("--batch {0} with --micro-batches {1} gives micro-batches of {2} sequences, "
                      "which {3} data-parallel ranks cannot share",
                      setup.globalBatch, microBatches.getValue(), setup.globalBatch / microBatches,
                      setup.mesh.dp)));

  TrainingPipelineOptions &p = setup.pipeline;
  p.optimizer = optimizer.getValue();
  p.lr = lr.getValue();
  p.momentum = momentum.getValue();
  p.beta1 = beta1;
  p.beta2 = beta2;
  p.eps = eps.getValue();
  p.weightDecay = weightDecay >= 0 ? weightDecay.getValue() : optimizer == "adamw" ? 0.01 : 0.0;
  p.gradClip = gradClip.getValue();
  p.lrSchedule = lrSchedule.getValue();
  p.warmupSteps = warmupSteps.getValue();
  p.totalSteps = scheduleSteps;
  p.minLr = minLr.getValue();
  p.microBatches = microBatches.getValue();
  p.precision = precision.getValue();
  p.attention = attention.getValue();
  p.lossScale = lossScale.getValue();
  p.lossScaleGrowthInterval = lossScaleGrowthInterval.getValue();
  p.dataParallel = setup.mesh.dp;
  ParallelizePipelineOptions &q = setup.parallelize;
  q.dataParallel = setup.mesh.dp;
  q.tensorParallel = setup.mesh.tp;
  q.pipelineParallel = setup.mesh.pp;
  std::vector<std::string> pinned(shards.begin(), shards.end());
  q.tpShards = llvm::ArrayRef<std::string>(pinned);
  q.sequenceParallel = sequenceParallel.getValue();
  q.zero = zero.empty() ? -1 : std::stoi(zero);
  q.schedule = schedule.getValue();
  q.virtualStages = virtualStages.getValue();
  if (!parseRecomputePolicy(recompute))
    return failure(
        reportError("--recompute '" + recompute + "': expected none, selective, full or auto"));
  q.recompute = recompute.getValue();
  if (offload != "none" && offload != "optimizer" && offload != "optimizer+params" &&
      offload != "auto")
    return failure(reportError("--offload '" + offload +
                               "': expected none, optimizer, optimizer+params or auto"));
  q.offload = offload.getValue();
  if (virtualStages < 0 || (virtualStages > 1 && schedule != "interleaved"))
    return failure(reportError(
        llvm::formatv("--virtual-stages {0}: more than one virtual stage per rank needs "
                      "--schedule interleaved",
                      virtualStages.getValue())));

  // A byte count with an optional K, M or G suffix (powers of 1024).
  auto parseBytes = [](const std::string &flag, const std::string &given,
                       double &out) -> mlir::LogicalResult {
    llvm::StringRef text = llvm::StringRef(given).trim();
    double scale = 1;
    if (!text.empty() && llvm::StringRef("KMG").contains(text.back())) {
      scale = text.back() == 'K' ? 1024.0 : text.back() == 'M' ? 1048576.0 : 1073741824.0;
      text = text.drop_back();
    }
    double bytes;
    if (text.getAsDouble(bytes) || !(bytes > 0) || !std::isfinite(bytes))
      return failure(reportError("--" + flag + " '" + given +
                                 "': expected a positive number of bytes (e.g. 80e9, 512M)"));
    out = bytes * scale;
    return mlir::success();
  };
  if (!memoryPerRank.empty()) {
    double bytes;
    if (failed(parseBytes("memory-per-rank", memoryPerRank, bytes)))
      return mlir::failure();
    q.memoryPerRank = bytes;
  }
  if (!hostMemoryPerRank.empty()) {
    double bytes;
    if (failed(parseBytes("host-memory-per-rank", hostMemoryPerRank, bytes)))
      return mlir::failure();
    q.hostMemoryPerRank = bytes;
  }
  if (!shards.empty() && setup.mesh.tp == 1)
    return failure(reportError("--shard needs a tensor-parallel axis (--mesh AxB with B > 1)"));
  if (sequenceParallel && setup.mesh.tp == 1)
    return failure(
        reportError("--sequence-parallel needs a tensor-parallel axis (--mesh AxB with B > 1)"));
  return success();
}

void TrainingFlags::buildPipeline(OpPassManager &pm, const Setup &setup) {
  buildTrainingPipeline(pm, setup.pipeline);
  buildParallelizePipeline(pm, setup.parallelize);
}

} // namespace ppc
