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
};

/// Walks a partitioned `step` on `mesh`.
CommunicationReport analyzeCommunication(mlir::func::FuncOp step, MeshOp mesh);

/// The report as JSON, with the data-parallel traffic next to its formula
/// 2 Psi (d-1)/d, where Psi is the parameter bytes of one rank (a rank
/// reduces the gradients of its own shards over dp).
llvm::json::Value reportToJson(const CommunicationReport &report, MeshOp mesh,
                               int64_t steps);

} // namespace ppc

#endif // PPC_PASSES_SHARDING_COMMUNICATIONREPORT_H
