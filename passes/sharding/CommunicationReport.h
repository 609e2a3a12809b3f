//===- CommunicationReport.h - what a partitioned step communicates -*- C++ -*-===//
//
// Every collective of a partitioned @train_step with its mesh axes, element
// count, per-rank bytes (the nccl-tests convention of DESIGN.md §6) and the
// ONNX node that needed it, plus totals per axis and the layout chosen for
// each parameter. The program is SPMD, so every rank of a group moves the
// same bytes each step.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_SHARDING_COMMUNICATIONREPORT_H
#define PPC_PASSES_SHARDING_COMMUNICATIONREPORT_H

#include "ir/PpcOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/sharding/CostModel.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace ppc {

struct CollectiveRecord {
  std::string kind;
  std::vector<std::string> axes;
  /// Elements of the tensor the collective's traffic is counted on (the
  /// full tensor for gathers and scatters: S in DESIGN.md §6).
  int64_t elements = 0;
  int64_t groupSize = 1;
  double bytesPerRank = 0;
  /// The ONNX node (or op) that needs the collective's result, and the
  /// value it communicates (the node that computed it, or a parameter).
  std::string node, value;
};

struct CommunicationReport {
  std::vector<CollectiveRecord> collectives;
  /// Per-rank bytes per step, by the axes (joined with ',') moved over.
  std::map<std::string, double> bytesByAxis;
  /// Parameter name -> layout ("[[], [tp]]").
  std::vector<std::pair<std::string, std::string>> parameters;
  /// Total parameter bytes (Psi of DESIGN.md §6), and the bytes of the
  /// parameter shards one rank holds (Psi / tp when all are split over tp).
  int64_t parameterBytes = 0;
  int64_t parameterBytesPerRank = 0;
  /// The planner's estimate for the plan (`ppc.plan`): compute and
  /// communication seconds per step, peak bytes per rank, ...
  std::map<std::string, double> plan;
  /// The recomputation the plan was priced with ("none", "selective",
  /// "full"; "" without a plan).
  std::string planRecompute;
  /// ZeRO stage (`ppc.zero`) and micro-batches of the step.
  int64_t zero = 0, microBatches = 1;
  /// Model states one rank holds (bytes): its parameter arguments, the
  /// gradients as kept across micro-batches (whole until the step's
  /// reduction for stages 0 and 1, shards for 2 and 3), its optimizer state.
  int64_t parameterStateBytes = 0, gradientBytes = 0, optimizerStateBytes = 0;
  /// The same by DESIGN.md §6's ZeRO formulas from Psi (parameter bytes per
  /// rank before ZeRO), d and the optimizer's state bytes per parameter byte.
  double modelStateFormula = 0;
  /// Pipeline rank and virtual stages of a pipelined program (-1: none).
  int64_t pipelineRank = -1;
  std::vector<int64_t> stages;
};

/// Walks a partitioned `step` on `mesh`.
CommunicationReport analyzeCommunication(mlir::func::FuncOp step, MeshOp mesh);

/// The report of one program as JSON, with the data-parallel traffic next
/// to its formula, where Psi is the parameter bytes of one rank before ZeRO
/// (a rank reduces the gradients of its own tp shards over dp): plain data
/// parallelism and ZeRO 1 move 2 Psi (d-1)/d per step; ZeRO 2 reduce-scatters
/// every micro-batch's gradients, (M+1) Psi (d-1)/d; ZeRO 3 reduce-scatters
/// them too and gathers the parameters for each micro-batch's forward and
/// backward, 3 M Psi (d-1)/d (3 Psi (d-1)/d for M = 1; less where a
/// backward does not need a parameter). `extra` entries are added
/// to the object (the memory plan).
llvm::json::Object programToJson(const CommunicationReport &report, MeshOp mesh);

/// The whole report: the mesh, steps, and the programs (one, or one per
/// pipeline rank under "pipeline_ranks", each with its `extra` object merged).
llvm::json::Value reportToJson(llvm::ArrayRef<CommunicationReport> programs,
                               llvm::ArrayRef<llvm::json::Object> extra, MeshOp mesh, int64_t steps,
                               llvm::StringRef schedule);

/// One collective or pipeline message of a rank's program, as `ppc
/// explain` shows it: the record, why ppc-partition put it there (`ppc.why`:
/// what asked for it and the layout change it makes; a message: the stage
/// boundary), its predicted time, and the compute that can hide it.
struct TransferExplanation {
  CollectiveRecord record;
  /// The op's place among the program's ops.
  size_t index = 0;
  std::string why;
  /// The micro-batch and pass of the ops that use it: "forward",
  /// "backward" (the same micro-batch), or "step" (the step's own ops:
  /// accumulation, the optimizer); -1: none.
  int64_t microBatch = -1;
  std::string phase;
  /// Predicted seconds (CostModel's localOpSeconds) and the compute
  /// between the op and the first op that reads its result: what the CUDA
  /// target, which issues it on its own stream and waits only there, can
  /// hide it behind. A send is waited for by nothing (hidden whole).
  double seconds = 0, computeSecondsBefore = 0;
  int64_t opsBefore = 0;
  double exposedSeconds() const { return std::max(0.0, seconds - computeSecondsBefore); }
};

/// Every collective and message of `program` (a partitioned step, or one
/// pipeline rank's), in program order, priced on `device`.
std::vector<TransferExplanation> explainTransfers(mlir::func::FuncOp program, MeshOp mesh,
                                                  const DeviceModel &device);

} // namespace ppc

#endif // PPC_PASSES_SHARDING_COMMUNICATIONREPORT_H
