//===- Emitter.h - the source of a training executable -----------*- C++ -*-===//
//
// The emission stage (DESIGN.md §1): the partitioned training programs of a
// module become one translation unit — C++ for CPUs, CUDA C++ for GPUs —
// with fused elementwise kernels, constants, one function per rank program
// calling them and the ppcrt library kernels in program order on a static
// arena, and the tables that tell ppcrt what each program takes and
// returns. The targets share the layout (fusion, views, memory plan) and
// the walk; they differ in their op emitter tables (cpu/, cuda/) and, on
// CUDA, in communication running beside the kernels (see Rank.h's tickets).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_EMITTER_H
#define PPC_CODEGEN_EMITTER_H

#include "codegen/Fusion.h"
#include "codegen/StridedViews.h"
#include "ir/PpcOps.h"
#include "passes/memory/MemoryPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace ppc::codegen {

class EmitContext;

enum class Target { Cpu, Cuda };

/// What the executable records besides its programs (ppcrt::Program).
struct ExecutableInfo {
  Target target = Target::Cpu;
  /// "fp32" or "bf16" (what GEMMs compute in; MFU's peak).
  std::string precision = "fp32";
  std::string model;
  std::string fingerprint;
  std::string initialWeights;
  int64_t globalBatch = 0;
  int64_t seqLen = 0;
  std::string dataDtype = "u16";
  /// Keys of the integer inputs fed token windows: inputs, then labels.
  std::vector<std::string> tokenInputs;
  /// The hyper-parameters the step takes ("lr"), with their compiled values.
  std::vector<std::pair<std::string, double>> hypers;
  std::string description;
  /// Compiled with --untie (the exporter undoes the same merges).
  bool untie = false;
  /// The GPU whose rates price each kernel's prediction for --profile
  /// ("h100", "h200"; CUDA only; "": none).
  std::string predictOn;
};

/// The storage decisions of one rank program: fusion groups, values read
/// through another's buffer, and the memory plan that follows from both.
struct ProgramLayout {
  /// What the fusion plan was made with, and the plan.
  FusionOptions options;
  FusionPlan fusion;
  /// The value whose buffer holds each view (never itself a view).
  llvm::DenseMap<mlir::Value, mlir::Value> holders;
  /// Attention operands read and written in place (StridedViews.h).
  StridedViews strided;
  MemoryPlan memory;

  /// Whether `op` emits no code: a reshape or transpose read through its
  /// operand's buffer, or an op of a strided view.
  bool isView(mlir::Operation *op) const;
};

/// Whether `transpose` undoes the transpose that produced its operand, so
/// its result is that transpose's operand again (a view of it).
bool undoesItsOperand(TransposeOp transpose);

/// Fuses `program`, makes views of reshapes, of transposes that undo
/// transposes, of GEMM-operand transposes (read with BLAS's transpose
/// flags) and of attention operands (StridedViews.h), and plans its arena (64-byte aligned
/// buffers). With `asyncCommunication` (CUDA) a collective's operands live until the first use of
/// its result, where the program waits for it, so that nothing overwrites them while it runs beside
/// the kernels in between. With `gemmEpilogues` (CUDA) GEMMs compute the bias and residual adds
/// that read their products (GemmEpilogue). The optimizer step's alike groups run as one kernel
/// (GroupBatch), and so do alike groups that read only the program's arguments (the bf16 copies
/// of the parameters, at the first one's place), where that does not grow the arena (else the
/// small ones alone: biases and norm weights). Fails (with an error at `program`) when its
/// memory plan does.
/// With `kernelWorkspaces` (CUDA) the arena holds the workspaces of the
/// kernels that take one (cudaWorkspaceBytes). With `gemmEpilogues`, GEMMs
/// also sum an operand where that is a bias's gradient (FusionPlan::sumsGemm),
/// unless running them at the sum's place grows the arena. An axis-0
/// concat's first operand is written in place by the op computing it.
mlir::FailureOr<ProgramLayout> layOutProgram(mlir::func::FuncOp program,
                                             bool asyncCommunication = false,
                                             bool gemmEpilogues = false,
                                             bool kernelWorkspaces = false);

/// The bytes of arena a CUDA kernel of `op` uses while it runs, beside its
/// operands and results: attention's backward in one kernel, its dq sums
/// (runtime/ppcrt/AttentionGrad.h); 0 for every other op.
int64_t cudaWorkspaceBytes(mlir::Operation *op);

/// The layout of each training program of `module` (@train_step or
/// @train_step_pp<r>, in trainingPrograms' order) for `target`: what the
/// executable allocates, and what `ppc compile` prints.
mlir::FailureOr<std::vector<ProgramLayout>> layOutPrograms(mlir::ModuleOp module, Target target);

/// Writes the source of the executable for the training programs of
/// `module`, laid out as `layouts` (layOutPrograms(module, info.target)),
/// for `info.target`. Fails, with an error at the op, on what the target
/// cannot run.
mlir::LogicalResult emitSource(mlir::ModuleOp module, const ExecutableInfo &info,
                               llvm::ArrayRef<ProgramLayout> layouts, llvm::raw_ostream &os);

} // namespace ppc::codegen

#endif // PPC_CODEGEN_EMITTER_H
