//===- KernelProfile.cpp - predicted time of each kernel of a step ---------===//

#include "codegen/KernelProfile.h"
#include "codegen/FusedKernel.h"
#include "runtime/ppcrt/NormSums.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;

namespace ppc::codegen {

std::optional<GpuModel> GpuModel::named(llvm::StringRef name) {
  // H100 SXM: 989 TFLOP/s dense bf16 and 67 f32/f64 (NVIDIA's datasheet);
  // GEMMs in practice ~800 bf16 (the figure issue 19 anchors to) and ~50
  // f32; HBM3 ~3.0 TB/s in streaming kernels of 3.35 peak. H200: the same
  // chip with HBM3e, ~4.3 of 4.8 TB/s. Launches: the first H100 run's
  // step took 7 ms more than its 2,437 kernels (118 against 111 ms), ~2.9
  // us each from the host; the executables now run each step as one CUDA
  // graph (--cuda-graphs), whose kernels are assumed to cost the stream ~1
  // us between back-to-back kernels. ppc's bf16 attention kernels
  // (Kernels.cuh: FlashAttention-2's, on mma.sync with the softmax in
  // registers) are priced on the products they execute (attentionProducts),
  // at 200 TFLOP/s: a warp of 16 rows loads each right-hand fragment from
  // shared memory for one m16n8k16 product (256 bytes for 2,048 MACs, where
  // an H100 SM does about one such product and 128 bytes a cycle: half the
  // dense peak at best), and the tiles are staged without asynchronous
  // copies; FlashAttention-2 reaches ~335 TFLOP/s forward.
  // Estimates until a GPU measures them (docs/performance.md), but for one
  // measured figure: bf16 GEMMs with a dimension off 16 bytes ran on
  // cuBLASLt's unaligned kernels at ~117 TFLOP/s (GPT-2's LM head on an
  // H100 80GB HBM3, 2026-11-25: three of 632 GFLOP in 16.2 ms).
  GpuModel h100{"H100 SXM", 989e12, 67e12, 67e12,  800e12, 50e12,
                50e12,      117e12, 50e12, 200e12, 3.0e12, 1e-6};
  if (name == "h100")
    return h100;
  if (name == "h200") {
    GpuModel h200 = h100;
    h200.name = "H200 SXM";
    h200.bandwidth = 4.3e12;
    return h200;
  }
  return std::nullopt;
}

namespace {

/// The bytes of `value`'s elements, each as wide as one of `stored`'s (the
/// value itself, or what a kernel reads in its place).
double bytesOf(Value value, Value stored) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  auto storedType = llvm::dyn_cast<RankedTensorType>(stored.getType());
  if (!type || !storedType)
    return 0;
  return double(type.getNumElements()) *
         double(std::max(storedType.getElementTypeBitWidth(), 8u) / 8);
}

/// The bytes of `count` elements of `value`'s type.
double bytesOf(int64_t count, Value value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  return double(count) * double(std::max(type.getElementTypeBitWidth(), 8u) / 8);
}

double bytesOf(Value value) { return bytesOf(value, value); }

/// The bytes `op`'s kernel reads of `operand` where it reads only the
/// elements it indexes: nll_loss one input element (and one weight) per
/// target, a gather its result's elements of the data; else nothing.
std::optional<double> indexedBytes(Operation *op, Value operand) {
  if (auto loss = llvm::dyn_cast<NllLossOp>(op))
    if (operand == loss.getInput() || operand == loss.getWeight())
      return bytesOf(llvm::cast<RankedTensorType>(loss.getTarget().getType()).getNumElements(),
                     operand);
  if (auto gather = llvm::dyn_cast<GatherOp>(op))
    if (operand == gather.getData())
      return bytesOf(llvm::cast<RankedTensorType>(gather.getType()).getNumElements(), operand);
  return std::nullopt;
}

/// The products ppc's bf16 attention kernels execute per FLOP of the op
/// (flopsOf: FlashAttention's count, two T x T x d products forward and
/// five backward). Kernels.cuh's forward executes FlashAttention's two (its
/// probabilities rounded to bf16; until 2026-12-03 as hi + lo, three). The
/// backward in two kernels (dq; dk and dv) recomputes the scores and their
/// gradient in each: seven. In one kernel (`inOneKernel`: causal, heads up
/// to 64, runtime/ppcrt/AttentionGrad.h) it executes FlashAttention's five,
/// and is priced at six: a fifth more for what the two kernels do not do,
/// each step's float read and write of a tile's dq sums through L2 and the
/// wait for its turn (a barrier, a fence and an L2 round trip, about 0.5 us
/// against the 3.5 us of a step's products at this rate with two blocks on
/// each SM).
double attentionProducts(Operation *op, bool inOneKernel) {
  return llvm::isa<AttentionOp>(op) ? 1.0 : inOneKernel ? 6.0 / 5 : 7.0 / 5;
}

/// The rates of a contraction's element type: (achieved, peak); an
/// attention's backward `inOneKernel` or not (attentionProducts).
std::pair<double, double> contractionRates(Operation *op, const GpuModel &gpu, bool inOneKernel) {
  Type element = getElementTypeOrSelf(op->getOperand(0).getType());
  double peak = element.isF64() ? gpu.fp64Peak : element.isF32() ? gpu.fp32Peak : gpu.bf16Peak;
  if (llvm::isa<AttentionOp, AttentionGradOp>(op)) {
    // The kernels' choice (attentionOnTensorCores): bf16 with head and value
    // sizes up to 128 (the last dimensions of q and v) on tensor cores.
    auto size = [&](unsigned operand) {
      return llvm::cast<RankedTensorType>(op->getOperand(operand).getType()).getShape().back();
    };
    bool tensorCores = element.isBF16() && size(0) <= 128 && size(2) <= 128;
    return {tensorCores ? gpu.bf16Attention / attentionProducts(op, inOneKernel) : gpu.scalarFlops,
            peak};
  }
  double achieved = element.isF64() ? gpu.fp64Gemm : element.isF32() ? gpu.fp32Gemm : gpu.bf16Gemm;
  if (auto product = llvm::dyn_cast<MatMulOp>(op);
      product && element.getIntOrFloatBitWidth() == 16) {
    auto lhs = llvm::cast<RankedTensorType>(product.getLhs().getType()).getShape();
    auto rhs = llvm::cast<RankedTensorType>(product.getRhs().getType()).getShape();
    if (lhs[lhs.size() - 2] % 8 || lhs.back() % 8 || rhs.back() % 8)
      achieved = gpu.bf16UnalignedGemm;
  }
  return {achieved, peak};
}

std::string shapeText(Value value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(type.getShape(), os, "x");
  if (type.getRank() == 0)
    os << "scalar";
  return text;
}

} // namespace

std::string describeOp(Operation *op) {
  std::string text = op->getName().stripDialect().str();
  llvm::raw_string_ostream os(text);
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    os << (i ? ", " : " ") << shapeText(operand);
  if (op->getNumOperands() == 0)
    for (auto [i, result] : llvm::enumerate(op->getResults()))
      os << (i ? ", " : " -> ") << shapeText(result);
  return text;
}

std::optional<KernelEstimate> estimateKernel(Operation *op, const ProgramLayout &layout,
                                             const GpuModel *gpu) {
  if (llvm::isa<func::ReturnOp, ConstantOp, MeshOp, SendOp, RecvOp, TransferOp>(op) ||
      op->hasTrait<CollectiveTrait>() || layout.fusion.inlinedConstants.contains(op) ||
      layout.fusion.foldedInto.contains(op) || layout.fusion.normGradOfAdd.contains(op) ||
      layout.fusion.normGradOfSum.contains(op) || layout.fusion.rowLogSumExpPlace.contains(op) ||
      layout.fusion.sumsOf.contains(op))
    return std::nullopt;
  KernelEstimate k;
  // `launches` of the GPU's kernels (a batch's, on CUDA; one call on CPUs).
  auto price = [&](double rate, double peak, int64_t launches = 1) {
    k.count = launches;
    if (!gpu)
      return;
    double compute = rate > 0 ? k.flops / rate : 0, memory = k.bytes / gpu->bandwidth;
    k.seconds = std::max(compute, memory) + double(launches) * gpu->launchSeconds;
    k.rooflineSeconds = std::max(peak > 0 ? k.flops / peak : 0, memory);
    k.computeSeconds = compute;
    k.memorySeconds = memory;
  };
  // An op's own FLOPs, at a contraction's rate where it is one.
  auto priceOp = [&](Operation *computing) {
    k.flops = flopsOf(computing);
    double rate = 0, peak = 0;
    if (k.flops > 0 && gpu)
      std::tie(rate, peak) =
          contractionRates(computing, *gpu, layout.memory.workspaces.count(computing) > 0);
    price(rate, peak);
  };
  auto group = layout.fusion.groupOf.find(op);
  if (group != layout.fusion.groupOf.end()) {
    const FusionGroup &fused = layout.fusion.groups[group->second];
    if (op != fused.ops.back())
      return std::nullopt;
    llvm::SmallVector<unsigned> members{group->second};
    const GroupBatch *batch = layout.fusion.batch(group->second);
    if (batch) {
      // The batch's kernel, at its place (FusionPlan::place): every group's
      // bytes, the shared inputs once.
      if (op != layout.fusion.place(*batch))
        return std::nullopt;
      members = batch->groups;
    }
    llvm::DenseSet<Value> read;
    for (unsigned g : members) {
      for (Value v : layout.fusion.groups[g].inputs)
        if (read.insert(v).second)
          k.bytes += bytesOf(v);
      for (Value v : layout.fusion.groups[g].outputs)
        k.bytes += bytesOf(v);
    }
    llvm::SetVector<llvm::StringRef> names;
    for (Operation *member : fused.ops)
      names.insert(member->getName().stripDialect());
    k.what = "fused ";
    llvm::raw_string_ostream os(k.what);
    llvm::interleave(names.getArrayRef().take_front(6), os, ",");
    if (names.size() > 6)
      os << ",...";
    if (batch) {
      int64_t elements = 0;
      for (unsigned g : members)
        elements += groupElements(layout.fusion.groups[g]);
      os << " [" << members.size() << " groups, " << elements << " elements]";
      // Launches of `capacity` groups each, and their combines (a reduction).
      int64_t capacity = cudaBatchCapacity(*batch, layout.fusion);
      price(0, 0,
            (fused.reduction ? 2 : 1) * ((int64_t(members.size()) + capacity - 1) / capacity));
      return k;
    }
    // The loop's shape (a reduction's input's; else the last op's result).
    os << " [";
    llvm::interleave(loopShape(fused), os, "x");
    os << "]";
    if (Operation *sum = layout.fusion.rowLogSumExpOf.lookup(op)) {
      // Each row's log_sum_exp first, from the row's source, which the
      // group's elements read again from the cache where the group reads
      // it too (a row of GPT-2's logits: 100 KB); the log_sum_exp is
      // written where the group would read it.
      Value source = rowSourceOf(layout.fusion, sum->getOperand(0)).value;
      if (!read.contains(source))
        k.bytes += bytesOf(sum->getOperand(0), source);
      k.what.insert(0, "log_sum_exp+");
    }
    price(0, 0);
    return k;
  }
  if (Operation *matmul = layout.fusion.sumsGemm.lookup(op)) {
    // The product at the sum's place, which its epilogue writes too (from
    // the tiles of the first operand it reads anyway).
    for (Value v : llvm::SetVector<Value>(matmul->operand_begin(), matmul->operand_end()))
      k.bytes += bytesOf(v);
    k.bytes += bytesOf(matmul->getResult(0)) + bytesOf(op->getResult(0));
    k.what = describeOp(matmul);
    k.what.insert(matmul->getName().stripDialect().size(), "+sums");
    priceOp(matmul);
    return k;
  }
  if (const GemmEpilogue *epilogue = layout.fusion.epilogue(op)) {
    // One GEMM at the last add: the product's operands, the bias and the
    // addend read, the last add's result written.
    if (op != epilogue->adds.back())
      return std::nullopt;
    Operation *matmul = epilogue->matmul;
    llvm::SmallVector<Value, 4> reads = epilogue->inputs();
    for (Value v : llvm::SetVector<Value>(reads.begin(), reads.end()))
      k.bytes += bytesOf(v);
    k.bytes += bytesOf(epilogue->result());
    k.what = describeOp(matmul);
    k.what.insert(matmul->getName().stripDialect().size(), epilogue->bias && epilogue->addend
                                                               ? "+bias+add"
                                                           : epilogue->bias ? "+bias"
                                                                            : "+add");
    priceOp(matmul);
    return k;
  }
  if (layout.isView(op))
    return std::nullopt; // No kernel.
  llvm::DenseSet<Value> seen;
  k.what = describeOp(op);
  // A concat's first operand written where it goes (layOutProgram: its
  // holder is the concat's); a concat reads an operand given twice twice.
  double inPlace = 0;
  bool concat = llvm::isa<ConcatOp>(op);
  auto holderOf = [&](Value v) {
    Value h = layout.holders.lookup(v);
    return h ? h : v;
  };
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    if (!seen.insert(operand).second && !concat)
      continue;
    if (concat && i == 0 && holderOf(operand) == holderOf(op->getResult(0))) {
      inPlace += bytesOf(operand);
      continue;
    }
    if (std::optional<double> indexed = indexedBytes(op, operand)) {
      k.bytes += *indexed;
      continue;
    }
    if (!layout.fusion.unstored(operand)) {
      k.bytes += bytesOf(operand);
      continue;
    }
    // Through folded ops: the operand's elements, of the stored value's type.
    Value read = rowSourceOf(layout.fusion, operand).value;
    if (read != operand)
      k.bytes += bytesOf(operand, read);
  }
  for (Value result : op->getResults())
    if (!layout.fusion.unstored(result))
      k.bytes += bytesOf(result);
  k.bytes -= inPlace;
  if (Value addend = layout.fusion.normGradAddend(op)) {
    // The add in its kernel: the addend read, the sum written.
    k.bytes += bytesOf(addend) + bytesOf(layout.fusion.normGradAdd.lookup(op)->getResult(0));
    k.what.insert(op->getName().stripDialect().size(), "+add");
  }
  if (auto sums = layout.fusion.normGradSums.find(op); sums != layout.fusion.normGradSums.end()) {
    // The sums in its kernel (NormSums.h): on CUDA each block's partial sums
    // written and read again by a second launch, which writes the sums (a
    // CPU's chunks' partials stay in its caches).
    auto shape = llvm::cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    int64_t size = ShapedType::getNumElements(shape.drop_front(axis)),
            outer = ShapedType::getNumElements(shape.take_front(axis));
    double accumulator = getElementTypeOrSelf(op->getOperand(0).getType()).isF64() ? 8 : 4;
    double blocks = double(ppcrt::normsums::blocks(outer, size, int64_t(accumulator)));
    for (const NormGradSum &sum : sums->second)
      k.bytes += (gpu ? 2 * blocks * double(size) * accumulator : 0) +
                 bytesOf(sum.reduction->getResult(0));
    k.what.insert(k.what.find(' '), "+sums");
    price(0, 0, gpu ? 2 : 1);
    return k;
  }
  priceOp(op);
  return k;
}

StepEstimate estimateStep(func::FuncOp program, const ProgramLayout &layout, const GpuModel &gpu) {
  llvm::MapVector<llvm::StringRef, KernelEstimate> byKind;
  llvm::StringSet<> names; // owns byKind's keys
  StepEstimate step;
  for (Operation &op : program.getBody().front()) {
    std::optional<KernelEstimate> one = estimateKernel(&op, layout, &gpu);
    if (!one)
      continue;
    KernelEstimate &k = byKind[names.insert(one->what).first->getKey()];
    k.what = one->what;
    k.count += one->count;
    k.flops += one->flops;
    k.bytes += one->bytes;
    k.seconds += one->seconds;
    k.rooflineSeconds += one->rooflineSeconds;
    k.computeSeconds += one->computeSeconds;
    k.memorySeconds += one->memorySeconds;
    step.seconds += one->seconds;
    step.flops += one->flops;
    step.launches += one->count;
  }
  for (auto &entry : byKind)
    step.kernels.push_back(entry.second);
  llvm::stable_sort(step.kernels, [](const KernelEstimate &a, const KernelEstimate &b) {
    return a.seconds > b.seconds;
  });
  return step;
}

void printStepEstimate(const StepEstimate &step, const GpuModel &gpu, bool bf16, int64_t tokens,
                       int top, llvm::raw_ostream &os) {
  double peak = bf16 ? gpu.bf16Peak : gpu.fp32Peak;
  double mfu = step.seconds > 0 ? step.flops / step.seconds / peak : 0;
  os << llvm::formatv("predicted step on one {0}: {1:F2} ms, {2:F0} tokens/s, MFU {3:F1}% "
                      "({4:F1} TFLOP of GEMMs and attention, {5} kernel launches)\n",
                      gpu.name, step.seconds * 1e3, tokens / step.seconds, 100 * mfu,
                      step.flops / 1e12, step.launches);
  os << llvm::formatv("  {0,9} {1,6} {2,5} {3,-7} {4,8}  {5}\n", "ms", "% step", "count", "bound",
                      "roofline", "kernel");
  for (const KernelEstimate &k : llvm::ArrayRef(step.kernels).take_front(top)) {
    double launch = k.seconds - std::max(k.computeSeconds, k.memorySeconds);
    os << llvm::formatv("  {0,9:F3} {1,5:F1}% {2,5} {3,-7} {4,7:F0}%  {5}\n", k.seconds * 1e3,
                        100 * k.seconds / step.seconds, k.count,
                        launch > std::max(k.computeSeconds, k.memorySeconds) ? "launch"
                        : k.computeSeconds > k.memorySeconds                 ? "compute"
                                                                             : "memory",
                        100 * k.rooflineSeconds / k.seconds, k.what);
  }
}

} // namespace ppc::codegen
