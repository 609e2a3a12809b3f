//===- TrainingFlags.h - the TRAINING options of simulate and compile -*- C++ -*-===//
//
// DESIGN.md §4's TRAINING options, shared by `ppc simulate` and `ppc compile`
// (same names, same defaults), and what they decide: the mesh, the batch
// layout, and the pass pipeline that builds and partitions @train_step.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TOOLS_PPC_TRAININGFLAGS_H
#define PPC_TOOLS_PPC_TRAININGFLAGS_H

#include "frontend/OnnxImporter.h"
#include "passes/Pipelines.h"
#include "runtime/Mesh.h"
#include "tools/ppc/Driver.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"

namespace ppc {

struct TrainingFlags {
  explicit TrainingFlags(llvm::cl::OptionCategory &category);

  /// What the flags decide once the model is known.
  struct Setup {
    Mesh mesh;
    int64_t globalBatch = 0, seqLen = 0;
    /// @forward to @train_step (loss, gradients, optimizer).
    TrainingPipelineOptions pipeline;
    /// @train_step over the mesh (plan, partition, pipeline stages).
    ParallelizePipelineOptions parallelize;
  };

  /// Checks the flags against each other and against `model`'s token
  /// inputs, binding symbolic batch/sequence dimensions in `options`; decides
  /// which initializers train (--train, --freeze, --untie, the export
  /// helper's record) and binds the graph inputs other than the tokens
  /// (--bind). Every problem is reported as one line naming the flag.
  mlir::LogicalResult setUp(OnnxModel &model, ImportOptions &options, int64_t scheduleSteps,
                            Setup &setup);

  /// The flags of the layout that `ppc plan` chooses (and `--mesh auto`):
  /// --zero, --schedule, --virtual-stages, --recompute, --offload,
  /// --micro-batches, --sequence-parallel and --shard.
  llvm::SmallVector<llvm::cl::Option *> plannedFlags();

  /// The size of the model's batch dimension (of the token input --bind
  /// leaves), 0 when it is symbolic; failure (reported) when the model has
  /// no token input.
  mlir::FailureOr<int64_t> fixedBatch(const OnnxModel &model);

  /// The training pipeline, then the parallelize pipeline (nothing on one
  /// rank): what `ppc-opt` runs as ppc-training-pipeline and
  /// ppc-parallelize-pipeline.
  static void buildPipeline(mlir::OpPassManager &pm, const Setup &setup);

  llvm::cl::opt<std::string> mesh;
  llvm::cl::opt<int64_t> batch, seq, microBatches;
  llvm::cl::opt<std::string> optimizer;
  llvm::cl::opt<double> lr, momentum;
  llvm::cl::opt<std::string> betas;
  llvm::cl::opt<double> eps, weightDecay, gradClip;
  llvm::cl::opt<std::string> lrSchedule;
  llvm::cl::opt<int64_t> warmupSteps;
  llvm::cl::opt<double> minLr;
  llvm::cl::opt<int64_t> seed;
  llvm::cl::opt<std::string> dataDtype, zero, schedule;
  llvm::cl::opt<int64_t> virtualStages;
  llvm::cl::opt<std::string> recompute, offload;
  llvm::cl::opt<std::string> precision;
  llvm::cl::opt<std::string> attention;
  llvm::cl::opt<double> lossScale;
  llvm::cl::opt<int64_t> lossScaleGrowthInterval;
  llvm::cl::list<std::string> dims;
  llvm::cl::list<std::string> shards;
  llvm::cl::opt<std::string> memoryPerRank, hostMemoryPerRank;
  llvm::cl::opt<bool> sequenceParallel;
  ParameterFlags parameters;
  llvm::cl::list<std::string> bind;
};

} // namespace ppc

#endif // PPC_TOOLS_PPC_TRAININGFLAGS_H
