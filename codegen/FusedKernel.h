//===- FusedKernel.h - what the targets' fused kernels share -----*- C++ -*-===//
//
// A fusion group (Fusion.h) is one kernel per target: a loop nest on CPUs
// (cpu/Elementwise.cpp), a grid-stride kernel on CUDA (cuda/Elementwise.cpp).
// A batch of alike groups is one kernel over a table with a row per group.
// The loop structure is the target's; the chain of scalar calls in its body,
// the index arithmetic and the reduction's collapsed shape are the same on
// both and written here once.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_FUSEDKERNEL_H
#define PPC_CODEGEN_FUSEDKERNEL_H

#include "codegen/EmitContext.h"
#include "codegen/Fusion.h"

namespace ppc::codegen {

/// "\n/// Fused: add 'node', mul 'other'.\n" before a group's kernel.
void describeGroup(const FusionGroup &group, llvm::raw_ostream &os);

/// "\n/// 12 groups alike, one kernel; the first: add 'node', ...\n" before a
/// batch's kernel.
void describeBatch(const GroupBatch &batch, const FusionPlan &plan, llvm::raw_ostream &os);

/// The elements of each group of a batch (its loop shape's).
int64_t groupElements(const FusionGroup &group);

/// A batch's table row, `<name>_group` at file level: a pointer to each
/// group's buffer of every input not shared and of every output, its
/// element count `n`, then `extra` fields ("int64_t firstBlock").
void emitBatchRow(const GroupBatch &batch, llvm::StringRef name, llvm::ArrayRef<std::string> extra,
                  EmitContext &ctx);
/// The row's initializer for `group`: "{ptr, ..., n, extra...}".
std::string batchRow(const GroupBatch &batch, const FusionGroup &group,
                     llvm::ArrayRef<std::string> extra, EmitContext &ctx);

/// The kernel parameters of the inputs every group of `batch` shares,
/// each ", const T *<restrict> inK" (`restrict`: the target's keyword).
std::string batchSharedParams(const GroupBatch &batch, EmitContext &ctx, llvm::StringRef restrict);
/// Row `g`'s buffers as locals: "const T *<restrict> inK = g.inK;" for each
/// input not shared and "T *<restrict> outK = g.outK;" for each output but
/// `skip`.
void emitRowLocals(const GroupBatch &batch, EmitContext &ctx, llvm::raw_ostream &os,
                   llvm::StringRef indent, llvm::StringRef restrict, mlir::Value skip = {});
/// The pointers of the inputs every group shares, for the kernel's call.
llvm::SmallVector<std::string> batchSharedArgs(const GroupBatch &batch, EmitContext &ctx);

/// The groups of `batch` one CUDA launch takes: its parameters (the table
/// of their rows and the shared inputs) stay within 4 KB, the limit every
/// CUDA version and GPU has.
int64_t cudaBatchCapacity(const GroupBatch &batch, const FusionPlan &plan);

/// The C++ type a kernel computes `value`'s elements in: bf16 in float
/// (rounded once per op), every other type in itself.
std::string registerType(mlir::Value value, EmitContext &ctx);

/// The group's elementwise ops (up to its reduction) as statements on
/// registers, one ppcrt/Scalar.h call each: `reg` maps the group's inputs to
/// the names of their registers and receives the results'.
mlir::LogicalResult emitChain(const FusionGroup &group, EmitContext &ctx, llvm::raw_ostream &os,
                              llvm::DenseMap<mlir::Value, std::string> &reg,
                              llvm::StringRef indent);

/// The flat index "i0 * 12 + i1" of loop coordinates `<var>0, <var>1, ...`
/// with `strides` ("0" when every stride is 0).
std::string indexExpression(llvm::ArrayRef<int64_t> strides, llvm::StringRef var);

/// A reduction's input shape with size-1 dimensions dropped and runs of kept
/// or reduced ones merged, as the kernels' reduce takes it: dimension d is
/// reduced when bit d of `mask` is set.
struct CollapsedReduction {
  llvm::SmallVector<int64_t> sizes;
  uint32_t mask = 0;
};
CollapsedReduction collapseReduction(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> axes);

/// The targets' kernels of a group: at file level, and its call (or
/// launch) in the body (their TargetSpelling::fusedGroup).
mlir::LogicalResult emitCpuFusedGroup(const FusionGroup &group, EmitContext &ctx);
mlir::LogicalResult emitCudaFusedGroup(const FusionGroup &group, EmitContext &ctx);
/// The same for a batch of alike groups (their TargetSpelling::fusedBatch).
mlir::LogicalResult emitCpuFusedBatch(const GroupBatch &batch, EmitContext &ctx);
mlir::LogicalResult emitCudaFusedBatch(const GroupBatch &batch, EmitContext &ctx);

} // namespace ppc::codegen

#endif // PPC_CODEGEN_FUSEDKERNEL_H
