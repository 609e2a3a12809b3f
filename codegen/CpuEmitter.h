//===- CpuEmitter.h - C++ source of a training executable --------*- C++ -*-===//
//
// The emission stage for CPUs (DESIGN.md §1): the partitioned training
// programs of a module become one C++ translation unit — fused elementwise
// kernels, constants, one function per rank program calling them and the
// ppcrt library kernels in program order on a static arena, and the tables
// that tell ppcrt::main what each program takes and returns.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_CPUEMITTER_H
#define PPC_CODEGEN_CPUEMITTER_H

#include "codegen/Fusion.h"
#include "ir/PpcOps.h"
#include "passes/memory/MemoryPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace ppc::codegen {

class EmitContext;

/// What the executable records besides its programs (ppcrt::Program).
struct ExecutableInfo {
  std::string model;
  std::string fingerprint;
  std::string initialWeights;
  int64_t globalBatch = 0;
  int64_t seqLen = 0;
  std::string dataDtype = "u16";
  /// Keys of the integer inputs fed token windows: inputs, then labels.
  std::vector<std::string> tokenInputs;
  std::string description;
};

/// The storage decisions of one rank program: fusion groups, values read
/// through another's buffer, and the memory plan that follows from both.
struct ProgramLayout {
  FusionPlan fusion;
  llvm::DenseMap<mlir::Value, mlir::Value> holders;
  MemoryPlan memory;
};

/// Whether `transpose` undoes the transpose that produced its operand, so
/// its result is that transpose's operand again (a view of it).
bool undoesItsOperand(TransposeOp transpose);

/// Fuses `program`, makes views of reshapes, of transposes that undo
/// transposes and of GEMM-operand transposes (read with BLAS's transpose
/// flags), and plans its arena (64-byte aligned buffers).
ProgramLayout layOutProgram(mlir::func::FuncOp program);

/// Writes the C++ source of the executable for the training programs of
/// `module` (@train_step or @train_step_pp<r>). Fails, with an error at the
/// op, on what the CPU target cannot run.
mlir::LogicalResult emitCpuSource(mlir::ModuleOp module, const ExecutableInfo &info,
                                  llvm::raw_ostream &os);

/// Emits one fusion group: its kernel at file level, its call in the body.
mlir::LogicalResult emitFusedGroup(const FusionGroup &group, EmitContext &context);

} // namespace ppc::codegen

#endif // PPC_CODEGEN_CPUEMITTER_H
