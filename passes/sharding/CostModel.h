//===- CostModel.h - what a sharding plan costs per step ----------*- C++ -*-===//
//
// The planner scores a candidate plan by running the partitioner's layout
// decisions (Layout.h) over @train_step without building IR, and adding up
//  - compute: matmuls at the device's FLOP rate on local shapes, every other
//    op at its memory bandwidth (bytes read and written);
//  - communication: every collective the plan needs, at the nccl-tests
//    per-rank byte counts of DESIGN.md §6 over the bandwidth of its mesh
//    axes, plus a fixed latency;
//  - memory: the peak of live local bytes in program order (arguments for
//    the whole step, every other value from its definition to its last use).
// A plan is feasible when its peak fits the per-rank memory; among feasible
// plans the planner wants the shortest step.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_SHARDING_COSTMODEL_H
#define PPC_PASSES_SHARDING_COSTMODEL_H

#include "passes/sharding/Layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <string>

namespace ppc {

/// The machine a plan is priced for. The defaults are one H100 SXM in a
/// node of eight (NVLink between tensor-parallel ranks, InfiniBand between
/// nodes): the figures of DESIGN.md §6.
struct DeviceModel {
  /// Dense matmul rate, FLOP/s (f32 math on tensor cores, TF32).
  double flops = 400e12;
  /// The rate of matmuls of bf16 or f16 operands (mixed precision); `flops`
  /// where not set (0), as `ppc compile`'s planner has it until its rates
  /// are measured.
  double halfFlops = 0;
  /// Device memory bandwidth, bytes/s.
  double memoryBandwidth = 3e12;
  /// Device memory per rank, bytes.
  double memoryBytes = 80e9;
  /// Per-rank link bandwidth of a collective over the tensor-parallel axis
  /// (within a node) and over any other axis (across nodes), bytes/s.
  double tpBandwidth = 450e9;
  double interNodeBandwidth = 50e9;
  /// Fixed cost of one collective, seconds.
  double latency = 10e-6;
  /// Offload: the link between a GPU and its host (PCIe Gen5 x16: 64 GB/s
  /// per direction in theory, about 50 in copies of pinned memory), and a
  /// rank's share of its host's memory bandwidth for the optimizer step on
  /// the host (a DGX H100's 2 x 8 channels of DDR5-4800, 614 GB/s in
  /// theory, over 8 GPUs, taken at about 2/3). Estimates, not measured here.
  double hostLinkBandwidth = 50e9;
  double hostMemoryBandwidth = 50e9;

  /// The bandwidth of a collective over `axes`: the slowest axis's.
  double bandwidth(llvm::ArrayRef<std::string> axes) const;
  /// The matmul rate for operands of `element` type.
  double matmulFlops(mlir::Type element) const;
  /// Seconds for one conversion step (all_slice is a local copy).
  double seconds(const ConversionStep &step, int64_t elementBytes, const AxisSizes &sizes) const;
};

/// Bytes each rank sends for a collective on `elements` elements (the
/// reduced tensor, or the gathered one) over `n` ranks: all-reduce
/// 2(n-1)/n, all-gather (n-1)/n of the whole, all-slice nothing.
double bytesPerRank(ConversionStep::Kind kind, int64_t elements, int64_t elementBytes, int64_t n);

/// Bytes of a tensor value of static shape (i1 counts one byte):
/// boundedTensorBytes of its type.
int64_t tensorBytes(mlir::Value v);

/// Seconds one op of a per-rank program (local shapes, explicit
/// collectives and send/recv) takes on `device`: matmuls at the FLOP rate,
/// collectives and point-to-point messages at their bytes per rank over the
/// axis bandwidth (pipeline messages cross nodes), everything else at the
/// memory bandwidth. Stage assignment and predicted timelines use it.
double localOpSeconds(mlir::Operation *op, const DeviceModel &device, const AxisSizes &sizes);

/// A plan's price.
struct PlanCost {
  double computeSeconds = 0;
  double commSeconds = 0;
  double peakBytes = 0;
  /// Offload: the copies between device and host and the host's optimizer
  /// step (none overlapped: an upper bound), and the host's bytes.
  double offloadSeconds = 0;
  double hostBytes = 0;
  /// Bytes each rank sends, by the mesh axes of the collective ("dp", "tp").
  std::map<std::string, double> bytesByAxes;
  /// Seconds and number of the collectives, by the same keys.
  std::map<std::string, double> secondsByAxes;
  std::map<std::string, int64_t> collectivesByAxes;
  /// The arguments' bytes on a rank (parameters, optimizer state, inputs),
  /// part of `peakBytes`; and the matmul FLOPs the rank computes.
  double argumentBytes = 0;
  double flops = 0;
  /// The peak during the micro-batches' ops (`ppc.mb`: forward and
  /// backward), and during the step's own (accumulation, the optimizer).
  double microBatchPeakBytes = 0, stepPeakBytes = 0;
  /// Where the peak is: the index of the op, in program order.
  size_t peakOp = 0;

  double seconds() const { return computeSeconds + commSeconds + offloadSeconds; }
};

/// A layout a use of an argument asked for, reached by slicing alone: the
/// argument could have been laid out so in the first place.
struct LayoutRequest {
  unsigned argument;
  Layout layout;
};

/// Prices plans of one @train_step: fixed layouts for its arguments, the
/// rest decided op by op as the partitioner would.
class PlanPricer {
public:
  /// `sequenceParallel`: price the partitioner's sequence-parallel mode.
  PlanPricer(mlir::func::FuncOp step, AxisSizes sizes, DeviceModel device,
             bool sequenceParallel = false);

  /// The cost of partitioning with `arguments` (one layout per argument).
  /// Fails, naming the op, when an op has no sharding rule; a layout that
  /// does not divide a value's shape makes the plan infinitely expensive.
  mlir::FailureOr<PlanCost> price(llvm::ArrayRef<Layout> arguments,
                                  llvm::SmallVectorImpl<LayoutRequest> *requests = nullptr);

private:
  mlir::func::FuncOp step;
  AxisSizes sizes;
  DeviceModel device;
  std::vector<mlir::Operation *> ops;
  std::vector<std::optional<ShardingRule>> rules;
  llvm::DenseMap<mlir::Operation *, size_t> opIndex;
  /// The argument each result updates (Layout.h's updatedArguments).
  llvm::SmallVector<std::optional<unsigned>> updated;
  /// Values by number: arguments first, then results in program order.
  llvm::DenseMap<mlir::Value, unsigned> numbers;
  std::vector<mlir::Value> values;
  /// What layoutsForOp needs to know about each op's operands (Layout.h).
  std::vector<OperandInfo> operandInfo;
  /// The op index of each value's last use (ops.size() for the return).
  std::vector<size_t> lastUse;
  /// Whether each value is a splat constant, which the partitioner makes in
  /// the layout each use wants, where it is first wanted (Partitioner::convert).
  std::vector<bool> splat;
  /// Whether each op belongs to a micro-batch (`ppc.mb`).
  std::vector<bool> inMicroBatch;
  /// Each op's operands by number (`numbers`), and the distinct ones whose
  /// last use it is, so that pricing looks no value up.
  std::vector<llvm::SmallVector<unsigned, 4>> operandNumbers, dyingNumbers;
  /// The number of each op's first result (the others follow it).
  std::vector<unsigned> firstResult;
  /// layoutHints' propagation, by number: in reverse program order, each
  /// single-result op with an all-parallel rule, and its operands that take
  /// its result's layout as a hint.
  struct HintEdge {
    unsigned result;
    llvm::SmallVector<unsigned, 2> operands;
  };
  std::vector<HintEdge> hintEdges;
};

} // namespace ppc

#endif // PPC_PASSES_SHARDING_COSTMODEL_H
