//===- Pipelines.h - the pass pipelines of ppc ------------------*- C++ -*-===//
//
// Each pipeline is one options struct plus one build function, shared by the
// `ppc` driver and `ppc-opt` (as a registered pipeline).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_PIPELINES_H
#define PPC_PASSES_PIPELINES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace ppc {

struct ImportPipelineOptions : public mlir::PassPipelineOptions<ImportPipelineOptions> {
  Option<int64_t> maxFoldElements{
      *this, "max-fold-elements",
      llvm::cl::desc("largest constant (in elements) that folding produces"),
      llvm::cl::init(int64_t(1) << 22)};
};

/// Cleans freshly imported IR: folds constant subgraphs, canonicalizes and
/// removes common subexpressions.
void buildImportPipeline(mlir::OpPassManager &pm, const ImportPipelineOptions &options);

struct TrainingPipelineOptions : public mlir::PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("sgd or adamw"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("peak learning rate"), llvm::cl::init(1e-3)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"), llvm::cl::init(0.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"), llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::desc("weight decay"),
                             llvm::cl::init(0.01)};
  Option<double> gradClip{*this, "grad-clip", llvm::cl::desc("global gradient norm limit (0: off)"),
                          llvm::cl::init(0.0)};
  Option<std::string> lrSchedule{*this, "lr-schedule", llvm::cl::desc("constant or cosine"),
                                 llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::desc("steps of linear warm-up"),
                              llvm::cl::init(0)};
  Option<int64_t> totalSteps{*this, "total-steps",
                             llvm::cl::desc("steps the cosine schedule spans"), llvm::cl::init(1)};
  Option<double> minLr{*this, "min-lr", llvm::cl::desc("final cosine learning rate"),
                       llvm::cl::init(0.0)};
  Option<int64_t> microBatches{*this, "micro-batches", llvm::cl::desc("micro-batches per step"),
                               llvm::cl::init(1)};
  Option<std::string> attention{
      *this, "attention",
      llvm::cl::desc("fused (scaled dot-product attention becomes ppc.attention, "
                     "FlashAttention's kernels) or unfused (as imported)"),
      llvm::cl::init("fused")};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("fp32, bf16 (activations in bf16, master weights f32), or fp16 (the same "
                     "in f16, with loss scaling)"),
      llvm::cl::init("fp32")};
  Option<int64_t> dataParallel{*this, "data-parallel",
                               llvm::cl::desc("size of the data-parallel axis"), llvm::cl::init(1)};
  Option<double> lossScale{*this, "loss-scale",
                           llvm::cl::desc("fp16: the loss scale the driver starts from"),
                           llvm::cl::init(65536.0)};
  Option<int64_t> lossScaleGrowthInterval{
      *this, "loss-scale-growth-interval",
      llvm::cl::desc("fp16: good steps before the driver doubles the loss scale"),
      llvm::cl::init(2000)};
};

/// Turns the imported @forward into @train_step: the loss (appended when the
/// model outputs logits), reverse-mode gradients, micro-batch accumulation
/// and the optimizer update; then cleans up.
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingPipelineOptions &options);

struct ParallelizePipelineOptions : public mlir::PassPipelineOptions<ParallelizePipelineOptions> {
  Option<int64_t> dataParallel{*this, "dp", llvm::cl::desc("data-parallel ranks"),
                               llvm::cl::init(1)};
  Option<int64_t> tensorParallel{*this, "tp", llvm::cl::desc("tensor-parallel ranks"),
                                 llvm::cl::init(1)};
  Option<int64_t> pipelineParallel{*this, "pp", llvm::cl::desc("pipeline-parallel ranks"),
                                   llvm::cl::init(1)};
  ListOption<std::string> tpShards{
      *this, "tp-shard",
      llvm::cl::desc("pinned parameter layouts, NAME:DIM or NAME:DIM:BLOCKS (--shard)")};
  Option<double> memoryPerRank{*this, "memory-per-rank",
                               llvm::cl::desc("device memory of one rank in bytes"),
                               llvm::cl::init(80e9)};
  Option<bool> sequenceParallel{*this, "sequence-parallel",
                                llvm::cl::desc("reduce-scatter tp partial sums along the "
                                               "sequence dimension"),
                                llvm::cl::init(false)};
  Option<int64_t> zero{*this, "zero", llvm::cl::desc("ZeRO stage 0-3 (-1: the lowest that fits)"),
                       llvm::cl::init(-1)};
  Option<std::string> schedule{*this, "schedule", llvm::cl::desc("gpipe, 1f1b or interleaved"),
                               llvm::cl::init("1f1b")};
  Option<int64_t> virtualStages{*this, "virtual-stages",
                                llvm::cl::desc("virtual stages per pipeline rank (0: the "
                                               "schedule's default)"),
                                llvm::cl::init(0)};
  Option<std::string> recompute{*this, "recompute",
                                llvm::cl::desc("activation recomputation: none, selective, full "
                                               "or auto (what fits memory-per-rank)"),
                                llvm::cl::init("auto")};
  Option<std::string> offload{*this, "offload",
                              llvm::cl::desc("none, optimizer, optimizer+params, or auto "
                                             "(the planner's choice: only where nothing fits "
                                             "without): what lives in host memory "
                                             "(ppc-offload)"),
                              llvm::cl::init("auto")};
  Option<double> hostMemoryPerRank{*this, "host-memory-per-rank",
                                   llvm::cl::desc("host memory of one rank in bytes (offload)"),
                                   llvm::cl::init(274877906944.0)};
  Option<bool> keepClosest{*this, "keep-closest",
                           llvm::cl::desc("where no plan fits memory-per-rank by estimate, "
                                          "keep the closest for the caller to check the "
                                          "exact memory plan (ppc compile)"),
                           llvm::cl::init(false)};
  Option<double> recomputeMemoryPerRank{
      *this, "recompute-memory-per-rank",
      llvm::cl::desc("the budget recompute=auto fits each rank's program to (0: "
                     "memory-per-rank); ppc compile lowers it when the executable's "
                     "arena, after fusion, exceeds what the unfused plan said"),
      llvm::cl::init(0.0)};
  Option<bool> recomputePointwise{
      *this, "recompute-pointwise",
      llvm::cl::desc("recompute the elementwise values the backward's elementwise ops "
                     "read inside their fused kernels (ppc-recompute pointwise; ppc "
                     "compile sets it for the CUDA target)"),
      llvm::cl::init(false)};
  Option<bool> alignGemms{*this, "align-gemms",
                          llvm::cl::desc("pad GEMM dimensions to 16-byte multiples where "
                                         "the copies pay (ppc-align-gemms; ppc compile sets "
                                         "it for the CUDA target)"),
                          llvm::cl::init(false)};
  Option<bool> hoistLogitsGradient{
      *this, "hoist-logits-gradient",
      llvm::cl::desc("move the logits' gradient next to their log_sum_exp, for code "
                     "generation to compute both in one kernel "
                     "(ppc-hoist-logits-gradient; ppc compile sets it for the CUDA "
                     "target)"),
      llvm::cl::init(false)};
};

/// Splits @train_step over the mesh dp x tp x pp: plans every tensor's
/// layout, partitions into the per-rank SPMD program, cuts it into pipeline
/// stages when pp > 1, and buckets the gradient all-reduces (nothing of this
/// on a mesh of one rank); then moves what `offload` names to host memory
/// and recomputes activations in each rank's program as `recompute` says;
/// last, folds batch sums and transposes into the GEMMs (each weight
/// gradient one GEMM), with `align-gemms` pads the GEMMs cuBLASLt would run
/// unaligned, gives a loss's log-softmax to its readers as x -
/// log_sum_exp(x), with `align-gemms` computes an elementwise value the
/// padding pads on the padded shape, and with `hoist-logits-gradient` moves
/// the logits' gradient next to their log_sum_exp.
void buildParallelizePipeline(mlir::OpPassManager &pm, const ParallelizePipelineOptions &options);

/// The value `options` give the hyper-parameter argument `name` of the
/// training step ("lr", "min_lr", "beta1", "beta2", "eps", "momentum",
/// "weight_decay", "grad_clip"; BuildTrainStep's `ppc.hyper`).
std::optional<double> hyperParameter(const TrainingPipelineOptions &options, llvm::StringRef name);

/// The training programs of `module` after the training pipeline (and
/// partitioning): @train_step, or @train_step_pp<r> for each pipeline rank
/// r, in rank order.
llvm::SmallVector<mlir::func::FuncOp> trainingPrograms(mlir::ModuleOp module);

/// What argument (or result) `i` of a training program holds, as `ppc
/// simulate` and compiled executables key it: "param:NAME",
/// "state:KIND:NAME", "input:NAME", "output:NAME", "hyper:NAME" or "step".
std::string programKey(mlir::func::FuncOp program, unsigned i, bool result);

/// Registers the passes and pipelines of ppc for ppc-opt.
void registerPpcPassesAndPipelines();

} // namespace ppc

#endif // PPC_PASSES_PIPELINES_H
