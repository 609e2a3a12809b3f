//===- KernelProfile.h - predicted time of each kernel of a step -*- C++ -*-===//
//
// A roofline model of the kernels a rank program launches, as the emitter
// lays it out (fusion groups, views, library calls, GEMMs): each kernel's
// FLOPs and the bytes it reads and writes, priced on a GPU's measured rates,
// plus a launch each. `ppc compile --profile-plan` prints the step's
// predicted time and MFU and the kernels that take the most, each with the
// fraction of its roofline (the best time its FLOPs and bytes allow at the
// GPU's peak rates) that the kernel as generated reaches.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_KERNELPROFILE_H
#define PPC_CODEGEN_KERNELPROFILE_H

#include "codegen/Emitter.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace ppc::codegen {

/// The rates a GPU's kernels are priced at, bytes/s and FLOP/s.
struct GpuModel {
  std::string name;
  /// Dense tensor-core peaks (the datasheet's): the roofline, and MFU's
  /// denominator (bf16 programs: bf16; f32 programs: the f32 units, as the
  /// executables count it).
  double bf16Peak, fp32Peak, fp64Peak;
  /// What GEMMs reach in practice (cuBLASLt at these sizes).
  double bf16Gemm, fp32Gemm, fp64Gemm;
  /// bf16 GEMMs with a dimension that is not a multiple of 8 elements (16
  /// bytes): cuBLASLt's unaligned kernels (ppc-align-gemms pads the large
  /// ones).
  double bf16UnalignedGemm;
  /// Scalar f32 FMAs of the CUDA cores (ppc's f32 and f64 attention
  /// kernels, and bf16 heads over 128).
  double scalarFlops;
  /// ppc's bf16 attention kernels on tensor cores (Kernels.cuh), counting
  /// the products they execute: the hi + lo split's and the backward's
  /// recomputed ones besides the op's FLOPs (KernelProfile.cpp,
  /// attentionProducts).
  double bf16Attention;
  /// Device memory bandwidth, as streaming kernels reach it.
  double bandwidth;
  /// What one kernel costs the step besides its work (in the step's CUDA
  /// graph).
  double launchSeconds;

  /// "h100" or "h200"; none for another name.
  static std::optional<GpuModel> named(llvm::StringRef name);
};

/// The kernels of one kind and shape (the same GEMM in every layer).
struct KernelEstimate {
  std::string what;
  /// Launches.
  int64_t count = 0;
  double flops = 0, bytes = 0;
  /// Predicted (the larger of compute and memory, plus the launch), its
  /// parts, and at the roofline (peak rates, no launch); all launches.
  double seconds = 0, computeSeconds = 0, memorySeconds = 0, rooflineSeconds = 0;
};

struct StepEstimate {
  double seconds = 0, flops = 0;
  int64_t launches = 0;
  /// By predicted time, largest first.
  std::vector<KernelEstimate> kernels;
};

/// An op as the estimates name it: its name and its operands' shapes
/// ("matmul 8x1024x768, 768x2304"), or its results' for an op without
/// operands ("constant -> 8").
std::string describeOp(mlir::Operation *op);

/// The kernel `op` launches as `layout` lays it out (a fused group's last
/// op stands for the group), priced on `gpu` (none: FLOPs and bytes only,
/// the seconds 0); none for ops that launch no kernel (views, constants,
/// communication, a fused group's other ops). `count` is its launches: 1,
/// or a batch's on CUDA (GroupBatch: its last group stands for it).
std::optional<KernelEstimate> estimateKernel(mlir::Operation *op, const ProgramLayout &layout,
                                             const GpuModel *gpu);

/// The predicted step of `program`, laid out as `layout`, on `gpu`. The
/// collectives are left out (they run beside the kernels).
StepEstimate estimateStep(mlir::func::FuncOp program, const ProgramLayout &layout,
                          const GpuModel &gpu);

/// The estimate as `ppc compile --profile-plan` prints it: step time,
/// tokens/s and MFU for `tokens` tokens per step, then the `top` kernels.
void printStepEstimate(const StepEstimate &step, const GpuModel &gpu, bool bf16, int64_t tokens,
                       int top, llvm::raw_ostream &os);

} // namespace ppc::codegen

#endif // PPC_CODEGEN_KERNELPROFILE_H
