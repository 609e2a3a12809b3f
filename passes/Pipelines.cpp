//===- Pipelines.cpp - the pass pipelines of ppc --------------------------===//

#include "passes/Pipelines.h"

#include "ir/PpcDialect.h"
#include "passes/Passes.h"
#include "runtime/ppcrt/Program.h"

#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace ppc {

void buildImportPipeline(OpPassManager &pm, const ImportPipelineOptions &options) {
  FoldConstantsOptions fold;
  fold.maxElements = options.maxFoldElements;
  pm.addNestedPass<func::FuncOp>(createFoldConstants(fold));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildTrainingPipeline(OpPassManager &pm, const TrainingPipelineOptions &options) {
  if (options.attention == "fused")
    pm.addNestedPass<func::FuncOp>(createFuseAttention());
  pm.addNestedPass<func::FuncOp>(createFuseRmsNorm());
  pm.addNestedPass<func::FuncOp>(createFuseRotary());
  if (options.precision != "fp32") {
    MixedPrecisionOptions mixed;
    mixed.precision = options.precision;
    pm.addPass(createMixedPrecision(mixed));
  }
  pm.addPass(createAppendLoss());
  if (options.precision == "fp16") {
    ScaleLossOptions scale;
    scale.microBatches = options.microBatches;
    pm.addPass(createScaleLoss(scale));
  }
  pm.addPass(createAutodiff());
  BuildTrainStepOptions step;
  step.optimizer = options.optimizer;
  step.lr = options.lr;
  step.momentum = options.momentum;
  step.beta1 = options.beta1;
  step.beta2 = options.beta2;
  step.eps = options.eps;
  step.weightDecay = options.weightDecay;
  step.gradClip = options.gradClip;
  step.lrSchedule = options.lrSchedule;
  step.warmupSteps = options.warmupSteps;
  step.totalSteps = options.totalSteps;
  step.minLr = options.minLr;
  step.microBatches = options.microBatches;
  step.dataParallel = options.dataParallel;
  step.lossScaling = options.precision == "fp16";
  pm.addPass(createBuildTrainStep(step));
  pm.addNestedPass<func::FuncOp>(createSimplifyOneHots());
  pm.addNestedPass<func::FuncOp>(createFoldConstants());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildParallelizePipeline(OpPassManager &pm, const ParallelizePipelineOptions &options) {
  RecomputeOptions recompute;
  recompute.policy = options.recompute;
  recompute.pointwise = options.recomputePointwise;
  recompute.memoryPerRank =
      options.recomputeMemoryPerRank > 0 ? options.recomputeMemoryPerRank : options.memoryPerRank;
  OffloadOptions offload;
  offload.what = options.offload;
  offload.memoryPerRank = recompute.memoryPerRank;
  auto lastRewrites = [&] {
    // On each rank's program: a concat of pieces split over the mesh is a
    // layout the sharding rules do not have (a fused QKV weight's gradient
    // split as q, k and v blocks), and the inserted slices are.
    pm.addNestedPass<func::FuncOp>(createConcatSliceSums());
    pm.addNestedPass<func::FuncOp>(createHoistConcatNegations());
    pm.addNestedPass<func::FuncOp>(createFoldIntoGemms());
    if (options.alignGemms)
      pm.addNestedPass<func::FuncOp>(createAlignGemms());
    // After the padding: each reader of the logits reads its own window.
    pm.addNestedPass<func::FuncOp>(createSplitLogSoftmax());
    if (options.alignGemms)
      pm.addNestedPass<func::FuncOp>(createWidenPaddedElementwise());
    // Last: CSE would merge the casts again.
    pm.addNestedPass<func::FuncOp>(createCloneWideningCasts());
    // Moves ops only: the logits' gradient next to their log_sum_exp, for
    // the CUDA kernels to compute both. Unfused (the executor) the move
    // keeps the logits live across the gradient's intermediates.
    if (options.hoistLogitsGradient)
      pm.addNestedPass<func::FuncOp>(createHoistLogitsGradient());
  };
  if (options.dataParallel * options.tensorParallel * options.pipelineParallel == 1) {
    if (options.offload != "none")
      pm.addPass(createOffload(offload));
    pm.addPass(createRecompute(recompute));
    lastRewrites();
    return;
  }
  PlanShardingsOptions plan;
  plan.dataParallel = options.dataParallel;
  plan.tensorParallel = options.tensorParallel;
  plan.pipelineParallel = options.pipelineParallel;
  plan.tpShards = options.tpShards;
  plan.memoryPerRank = options.memoryPerRank;
  plan.sequenceParallel = options.sequenceParallel;
  plan.zero = options.zero;
  plan.recompute = options.recompute;
  plan.offload = options.offload;
  plan.hostMemoryPerRank = options.hostMemoryPerRank;
  plan.keepClosest = options.keepClosest;
  pm.addPass(createPlanShardings(plan));
  PartitionOptions partition;
  partition.dataParallel = options.dataParallel;
  partition.tensorParallel = options.tensorParallel;
  partition.pipelineParallel = options.pipelineParallel;
  partition.sequenceParallel = options.sequenceParallel;
  pm.addPass(createPartition(partition));
  if (options.pipelineParallel > 1) {
    PipelineOptions pipeline;
    pipeline.scheduleName = options.schedule;
    pipeline.virtualStages = options.virtualStages;
    pipeline.memoryPerRank = options.memoryPerRank;
    pm.addPass(createPipeline(pipeline));
  }
  pm.addNestedPass<func::FuncOp>(createBucketAllReduces());
  if (options.offload != "none")
    pm.addPass(createOffload(offload));
  pm.addPass(createRecompute(recompute));
  lastRewrites();
}

void registerPpcPassesAndPipelines() {
  registerPpcPasses();
  registerCanonicalizerPass();
  registerCSEPass();
  PassPipelineRegistration<ImportPipelineOptions>(
      "ppc-import-pipeline", "cleanup after ONNX import (as ppc import runs it)",
      buildImportPipeline);
  PassPipelineRegistration<TrainingPipelineOptions>(
      "ppc-training-pipeline", "@forward to @train_step (as ppc simulate and ppc compile run it)",
      buildTrainingPipeline);
  PassPipelineRegistration<ParallelizePipelineOptions>(
      "ppc-parallelize-pipeline",
      "@train_step split over the mesh (as ppc simulate and ppc compile run it)",
      buildParallelizePipeline);
}

llvm::SmallVector<func::FuncOp> trainingPrograms(ModuleOp module) {
  if (auto step = module.lookupSymbol<func::FuncOp>("train_step"))
    return {step};
  llvm::SmallVector<func::FuncOp> programs;
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn->hasAttr(PpcDialect::kPipelineRankAttrName))
      programs.push_back(fn);
  llvm::sort(programs, [](func::FuncOp a, func::FuncOp b) {
    return a->getAttrOfType<IntegerAttr>(PpcDialect::kPipelineRankAttrName).getInt() <
           b->getAttrOfType<IntegerAttr>(PpcDialect::kPipelineRankAttrName).getInt();
  });
  return programs;
}

std::optional<double> hyperParameter(const TrainingPipelineOptions &options, llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<double>>(name)
      .Case("lr", options.lr)
      .Case("min_lr", options.minLr)
      .Case("beta1", options.beta1)
      .Case("beta2", options.beta2)
      .Case("eps", options.eps)
      .Case("momentum", options.momentum)
      .Case("weight_decay", options.weightDecay)
      .Case("grad_clip", options.gradClip)
      .Case("loss_scale", options.lossScale)
      .Case("skipped_steps", 0.0)
      .Default(std::nullopt);
}

std::string programKey(func::FuncOp program, unsigned i, bool result) {
  auto attr = [&](StringRef name) {
    return result ? program.getResultAttrOfType<StringAttr>(i, name)
                  : program.getArgAttrOfType<StringAttr>(i, name);
  };
  const std::pair<StringRef, std::string_view> kinds[] = {
      {PpcDialect::kParamAttrName, ppcrt::kParamKey},
      {PpcDialect::kStateAttrName, ppcrt::kStateKey},
      {PpcDialect::kInputAttrName, ppcrt::kInputKey},
      {PpcDialect::kOutputAttrName, ppcrt::kOutputKey},
      {PpcDialect::kHyperAttrName, ppcrt::kHyperKey}};
  for (auto [name, kind] : kinds)
    if (auto value = attr(name))
      return std::string(kind) + value.getValue().str();
  return std::string(ppcrt::kStepKey);
}

} // namespace ppc
