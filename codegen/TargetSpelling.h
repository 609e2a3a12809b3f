//===- TargetSpelling.h - what the targets spell apart ----------*- C++ -*-===//
//
// Every op has one emitter (codegen/Ops.cpp, codegen/Communication.cpp),
// shared by the targets: it works out the sizes, strides and views of the
// call and writes it against the target's kernel library, whose functions
// have the same names and arguments on every target (runtime/ppcrt/
// CpuKernels.h, runtime/ppcrt/cuda/Kernels.cuh). What a target spells its
// own way is here, and only here: its library's namespace, how a kernel
// reports a failure, what it cannot run, the GEMM and einsum calls, and the
// fused elementwise kernels (a loop nest on CPUs, a grid-stride kernel on
// CUDA). A new target implements this class; a new op touches no target.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_TARGETSPELLING_H
#define PPC_CODEGEN_TARGETSPELLING_H

#include "ir/PpcOps.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace ppc::codegen {

class EmitContext;
struct FusionGroup;

/// A batched GEMM, worked out by the matmul emitter: c[batch, m, n] =
/// op(a)[batch, m, k] op(b)[batch, k, n], batch index i (row-major over
/// `batch`) reading a and b at sum(coordinate * stride), in matrices.
struct GemmCall {
  bool transA, transB;
  llvm::SmallVector<int64_t> batch, aStrides, bStrides;
  int64_t m, n, k;
  std::string a, b, c;
  /// An epilogue (GemmEpilogue): a row vector of n elements added to every
  /// row, a tensor of c's shape added; "" when absent.
  std::string bias, addend;
  /// Where the GEMM writes the sums over k of op(a)'s rows (`sumsOfA`) or
  /// of op(b)'s columns (FusionPlan::sumsGemm; CUDA), and the name of the
  /// bool the statement sets to whether it did; "" when absent.
  std::string sums, sumsWritten;
  bool sumsOfA = false;
};

/// An einsum, worked out by its emitter: one loop per label (output labels
/// first), `strides[t][l]` the step of operand t in label l (the output is
/// operand `operands.size()`).
struct EinsumCall {
  std::string elementType;
  llvm::SmallVector<std::string> operands;
  std::string out;
  int64_t outputLabels;
  llvm::SmallVector<int64_t> sizes;
  llvm::SmallVector<llvm::SmallVector<int64_t>> strides;
  int64_t outSize;
};

class TargetSpelling {
public:
  virtual ~TargetSpelling() = default;

  /// The namespace of the target's kernel library ("ppcrt::cpu").
  virtual llvm::StringRef kernels() const = 0;
  /// The C++ type of a bf16 element, or "" where the target has none.
  virtual llvm::StringRef bf16Type() const = 0;
  /// Whether communication calls return before they complete, handing a
  /// ticket to wait on (CUDA: they run on their own streams).
  virtual bool asynchronousCommunication() const = 0;

  /// Fails with an error at `op` where the target cannot run it as it is
  /// (element types, operand counts); called before its emitter.
  virtual mlir::LogicalResult supports(mlir::Operation *op, EmitContext &ctx) const = 0;
  /// The argument by which a kernel reports that `what` went wrong at `op`
  /// (a message on CPUs, an error index on CUDA, whose kernels cannot stop).
  virtual std::string failure(EmitContext &ctx, mlir::Operation *op,
                              const std::string &what) const = 0;
  virtual void matmul(EmitContext &ctx, mlir::Operation *op, const GemmCall &call) const = 0;
  /// Fails where the target cannot run this einsum.
  virtual mlir::LogicalResult einsum(EmitContext &ctx, mlir::Operation *op,
                                     const EinsumCall &call) const = 0;
  /// A fused elementwise group (Fusion.h): its kernel at file level and its
  /// call at the place of its last op.
  virtual mlir::LogicalResult fusedGroup(const FusionGroup &group, EmitContext &ctx) const = 0;
  /// A batch of alike groups (Fusion.h's GroupBatch): one kernel at file
  /// level and its call (or launches) at the place of the last group.
  virtual mlir::LogicalResult fusedBatch(const GroupBatch &batch, EmitContext &ctx) const = 0;
};

const TargetSpelling &cpuSpelling();
const TargetSpelling &cudaSpelling();

} // namespace ppc::codegen

#endif // PPC_CODEGEN_TARGETSPELLING_H
