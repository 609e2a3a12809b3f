//===- Spelling.cpp - how the CUDA target spells what differs --------------===//
//
// CUDA C++ against runtime/ppcrt/cuda/Kernels.cuh: kernels launched on the
// rank's compute stream, communication on its own streams returning
// tickets, bf16 elements computed in float. Kernels cannot stop the
// process: a bad index sets an error flag with the index of its message
// (EmitContext::kernelError), read after each step. GEMMs are cuBLASLt
// calls on f32 or bf16; einsums (what no GEMM covers) take at most three
// operands and sixteen labels.
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

/// cuBLASLt's element type of a GEMM operand, or failure.
FailureOr<std::string> gemmType(Value value) {
  Type element = getElementTypeOrSelf(value.getType());
  if (element.isF32())
    return std::string("ppcrt::cuda::GemmType::F32");
  if (element.isBF16())
    return std::string("ppcrt::cuda::GemmType::BF16");
  return failure();
}

bool isFloat(Value value) {
  Type element = getElementTypeOrSelf(value.getType());
  return element.isF32() || element.isF64() || element.isBF16();
}

class CudaSpelling final : public TargetSpelling {
public:
  llvm::StringRef kernels() const override { return "ppcrt::cuda"; }
  llvm::StringRef bf16Type() const override { return "ppcrt::cuda::bf16"; }
  bool asynchronousCommunication() const override { return true; }

  LogicalResult supports(Operation *op, EmitContext &ctx) const override {
    if (auto matmul = llvm::dyn_cast<MatMulOp>(op)) {
      auto inputs = gemmType(matmul.getLhs()), rhs = gemmType(matmul.getRhs()),
           output = gemmType(matmul.getResult());
      bool bf16ToF32 = succeeded(inputs) && succeeded(output) &&
                       *inputs == "ppcrt::cuda::GemmType::BF16" &&
                       *output == "ppcrt::cuda::GemmType::F32";
      if (failed(inputs) || failed(rhs) || failed(output) || *inputs != *rhs ||
          (*output != *inputs && !bf16ToF32))
        return ctx.unsupported(op, "CUDA GEMMs take f32 or bf16 operands of one type and give "
                                   "that type (or f32 from bf16)");
    }
    if (llvm::isa<ScatterAddOp>(op) && !isFloat(op->getResult(0)))
      return ctx.unsupported(op, "scatter_add on CUDA adds floats only");
    // The attention kernels keep a row of q and of the output in registers.
    if (llvm::isa<AttentionOp, AttentionGradOp>(op)) {
      auto size = [&](unsigned i) {
        return llvm::cast<RankedTensorType>(op->getOperand(i).getType()).getShape().back();
      };
      if (size(0) > 256 || size(2) > 256)
        return ctx.unsupported(op, "the CUDA attention kernels take head and value sizes up "
                                   "to 256, not " +
                                       std::to_string(std::max(size(0), size(2))));
    }
    return success();
  }

  std::string failure(EmitContext &ctx, Operation *op, const std::string &what) const override {
    return std::to_string(ctx.kernelError("node '" + nodeName(op) + "' (" +
                                          op->getName().stripDialect().str() + "): " + what));
  }

  void matmul(EmitContext &ctx, Operation *op, const GemmCall &call) const override {
    auto matmul = llvm::cast<MatMulOp>(op);
    // (With sums: `const bool <sumsWritten> = ppcrt::cuda::matmul(...)`.)
    ctx.body() << (call.sums.empty() ? "  " : "  const bool " + call.sumsWritten + " = ");
    ctx.body() << llvm::formatv(
        "ppcrt::cuda::matmul({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, "
        "{12}, {13}, {14}, {15}, {17}, {18}, {16});\n",
        *gemmType(matmul.getLhs()), *gemmType(matmul.getResult()), call.transA ? "true" : "false",
        call.transB ? "true" : "false", call.batch.size(), ctx.constArray(op, call.batch),
        ctx.constArray(op, call.aStrides), ctx.constArray(op, call.bStrides), call.m, call.n,
        call.k, call.a, call.b, call.c, call.bias.empty() ? "nullptr" : call.bias,
        call.addend.empty() ? "nullptr" : call.addend, quote(nodeName(op)),
        call.sums.empty() || !call.sumsOfA ? "nullptr" : call.sums,
        call.sums.empty() || call.sumsOfA ? "nullptr" : call.sums);
  }

  LogicalResult einsum(EmitContext &ctx, Operation *op, const EinsumCall &call) const override {
    if (call.sizes.size() > 16 || call.operands.size() > 3)
      return ctx.unsupported(op, "CUDA einsums take at most 3 operands and 16 labels");
    llvm::SmallVector<std::string> operands(call.operands.begin(), call.operands.end());
    while (operands.size() < 3)
      operands.push_back("nullptr");
    llvm::SmallVector<std::string> strideRows;
    for (size_t t = 0; t < 4; ++t)
      strideRows.push_back(t < call.strides.size()
                               ? braces(call.strides[t])
                               : braces(llvm::SmallVector<int64_t>(call.sizes.size(), 0)));
    ctx.body() << llvm::formatv(
        "  ppcrt::cuda::einsum(ppcrt::cuda::EinsumOperands<{0}>{{{{{1}}}, {2}, "
        "ppcrt::cuda::EinsumSpec{{{3}, {4}, {5}, {6}, {{{7}}}, {8});\n",
        call.elementType, llvm::join(operands, ", "), call.out, call.operands.size(),
        call.sizes.size(), call.outputLabels, braces(call.sizes), llvm::join(strideRows, ", "),
        call.outSize);
    return success();
  }

  LogicalResult fusedGroup(const FusionGroup &group, EmitContext &ctx) const override {
    return emitCudaFusedGroup(group, ctx);
  }

  LogicalResult fusedBatch(const GroupBatch &batch, EmitContext &ctx) const override {
    return emitCudaFusedBatch(batch, ctx);
  }
};

} // namespace

const TargetSpelling &cudaSpelling() {
  static const CudaSpelling spelling;
  return spelling;
}

} // namespace ppc::codegen
