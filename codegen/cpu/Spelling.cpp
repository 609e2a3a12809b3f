//===- Spelling.cpp - how the CPU target spells what differs ---------------===//
//
// C++ against runtime/ppcrt/CpuKernels.h, run by MPI ranks on one memory:
// communication completes before the call returns, a kernel that finds a bad
// index records the message (ppcrt::kernelFailed) and the step ends after
// it, GEMMs go to OpenBLAS (integers to an exact loop), einsums take any
// number of operands.
//
//===----------------------------------------------------------------------===//

#include "codegen/EmitContext.h"
#include "codegen/FusedKernel.h"
#include "codegen/TargetSpelling.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc::codegen {
namespace {

class CpuSpelling final : public TargetSpelling {
public:
  llvm::StringRef kernels() const override { return "ppcrt::cpu"; }
  llvm::StringRef bf16Type() const override { return ""; }
  bool asynchronousCommunication() const override { return false; }

  LogicalResult supports(Operation *, EmitContext &) const override { return success(); }

  std::string failure(EmitContext &, Operation *op, const std::string &what) const override {
    return quote("node '" + nodeName(op) + "' (" + op->getName().stripDialect().str() +
                 "): " + what);
  }

  void matmul(EmitContext &ctx, Operation *op, const GemmCall &call) const override {
    // OpenBLAS has no epilogue: the CPU target plans none (layOutPrograms).
    assert(call.bias.empty() && call.addend.empty() && call.sums.empty() &&
           "GEMM epilogue on the CPU");
    ctx.body() << llvm::formatv(
        "  ppcrt::cpu::matmul({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11});\n",
        call.transA ? "true" : "false", call.transB ? "true" : "false", call.batch.size(),
        ctx.constArray(op, call.batch), ctx.constArray(op, call.aStrides),
        ctx.constArray(op, call.bStrides), call.m, call.n, call.k, call.a, call.b, call.c);
  }

  LogicalResult einsum(EmitContext &ctx, Operation *op, const EinsumCall &call) const override {
    llvm::SmallVector<int64_t> strides;
    for (const auto &operand : call.strides)
      strides.append(operand.begin(), operand.end());
    ctx.body() << llvm::formatv(
        "  {{ const {0} *operands[] = {{{1}};\n    ppcrt::cpu::einsum(operands, {2}, {3}, {4}, "
        "{5}, {6}, {7}); }\n",
        call.elementType, llvm::join(call.operands, ", "), call.operands.size(), call.out,
        call.sizes.size(), ctx.constArray(op, call.sizes), ctx.constArray(op, strides),
        call.outSize);
    return success();
  }

  LogicalResult fusedGroup(const FusionGroup &group, EmitContext &ctx) const override {
    return emitCpuFusedGroup(group, ctx);
  }

  LogicalResult fusedBatch(const GroupBatch &batch, EmitContext &ctx) const override {
    return emitCpuFusedBatch(batch, ctx);
  }
};

} // namespace

const TargetSpelling &cpuSpelling() {
  static const CpuSpelling spelling;
  return spelling;
}

} // namespace ppc::codegen
