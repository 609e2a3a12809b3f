//===- KernelProfileTest.cpp - the roofline model of generated kernels ----===//
//
// Programs whose kernels are priced by hand: a GEMM (compute-bound), a
// fused elementwise chain (memory-bound, one kernel for its ops), a view (no
// kernel), and attention (scalar FLOPs, its roofline at the tensor peak).
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelProfile.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/sharding/PlanSearch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace ppc;
using namespace ppc::codegen;

namespace {

class KernelProfileTest : public ::testing::Test {
protected:
  KernelProfileTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  StepEstimate estimate(llvm::StringRef source, const GpuModel &gpu) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    auto func = *module->getOps<func::FuncOp>().begin();
    FailureOr<ProgramLayout> layout = layOutProgram(func, /*asyncCommunication=*/true);
    EXPECT_TRUE(succeeded(layout));
    return estimateStep(func, *layout, gpu);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

// One set of rates: the planner's shipped clusters (--cluster dgx-h100,
// dgx-h200) price GEMMs and memory traffic as --profile-plan's GPUs do, and
// MFU has one denominator.
TEST(KernelProfileRates, ArePlannersPresetClusters) {
  for (auto [gpuName, clusterName] : {std::pair{"h100", "dgx-h100"}, {"h200", "dgx-h200"}}) {
    SCOPED_TRACE(gpuName);
    std::optional<GpuModel> gpu = GpuModel::named(gpuName);
    std::optional<Cluster> cluster = presetCluster(clusterName);
    ASSERT_TRUE(gpu && cluster);
    EXPECT_EQ(gpu->bf16Peak, cluster->peakHalfFlops);
    EXPECT_EQ(gpu->fp32Peak, cluster->peakFloatFlops);
    EXPECT_EQ(gpu->bf16Gemm, cluster->matmulHalfFlops);
    EXPECT_EQ(gpu->fp32Gemm, cluster->matmulFloatFlops);
    EXPECT_EQ(gpu->bandwidth, cluster->memoryBandwidth);
  }
}

TEST_F(KernelProfileTest, PricesGemmsFusedChainsAndViews) {
  GpuModel gpu = *GpuModel::named("h100");
  // A [512x1024] @ [1024x2048] f32 GEMM, a reshape (a view), and
  // relu(x * 2) + 1 over its result: one fused kernel.
  StepEstimate step = estimate(R"mlir(
    func.func @f(%a: tensor<512x1024xf32>, %b: tensor<1024x2048xf32>) -> tensor<512x2x1024xf32> {
      %c = ppc.matmul %a, %b : (tensor<512x1024xf32>, tensor<1024x2048xf32>) -> tensor<512x2048xf32>
      %two = ppc.constant dense<2.0> : tensor<f32>
      %one = ppc.constant dense<1.0> : tensor<f32>
      %m = ppc.mul %c, %two : (tensor<512x2048xf32>, tensor<f32>) -> tensor<512x2048xf32>
      %r = ppc.relu %m : tensor<512x2048xf32>
      %p = ppc.add %r, %one : (tensor<512x2048xf32>, tensor<f32>) -> tensor<512x2048xf32>
      %v = ppc.reshape %p : tensor<512x2048xf32> -> tensor<512x2x1024xf32>
      return %v : tensor<512x2x1024xf32>
    })mlir",
                               gpu);
  ASSERT_EQ(step.kernels.size(), 2u);
  EXPECT_EQ(step.launches, 2);
  double flops = 2.0 * 512 * 1024 * 2048;
  double gemmBytes = 4.0 * (512 * 1024 + 1024 * 2048 + 512 * 2048);
  const KernelEstimate &gemm = step.kernels[0];
  EXPECT_EQ(gemm.what, "matmul 512x1024, 1024x2048");
  EXPECT_DOUBLE_EQ(gemm.flops, flops);
  EXPECT_DOUBLE_EQ(gemm.bytes, gemmBytes);
  EXPECT_DOUBLE_EQ(gemm.seconds, flops / gpu.fp32Gemm + gpu.launchSeconds);
  EXPECT_DOUBLE_EQ(gemm.rooflineSeconds, flops / gpu.fp32Peak);
  const KernelEstimate &chain = step.kernels[1];
  EXPECT_EQ(chain.count, 1);
  EXPECT_EQ(chain.flops, 0);
  // Reads the GEMM's result, writes its own: the scalars are inlined.
  EXPECT_DOUBLE_EQ(chain.bytes, 2 * 4.0 * 512 * 2048);
  EXPECT_DOUBLE_EQ(chain.seconds, chain.bytes / gpu.bandwidth + gpu.launchSeconds);
  EXPECT_DOUBLE_EQ(step.seconds, gemm.seconds + chain.seconds);
  EXPECT_DOUBLE_EQ(step.flops, flops);
}

// A bf16 GEMM with a dimension off 8 elements runs on cuBLASLt's unaligned
// kernels, priced at their measured rate; padded to 50304, at the aligned.
TEST_F(KernelProfileTest, UnalignedBf16GemmsArePricedAtTheUnalignedRate) {
  GpuModel gpu = *GpuModel::named("h100");
  for (int64_t vocab : {50257, 50304}) {
    std::string source = llvm::formatv(R"mlir(
      func.func @f(%a: tensor<1024x768xbf16>, %b: tensor<768x{0}xbf16>) -> tensor<1024x{0}xbf16> {{
        %c = ppc.matmul %a, %b : (tensor<1024x768xbf16>, tensor<768x{0}xbf16>) -> tensor<1024x{0}xbf16>
        return %c : tensor<1024x{0}xbf16>
      })mlir",
                                       vocab);
    const KernelEstimate &gemm = estimate(source, gpu).kernels.at(0);
    double rate = vocab == 50257 ? gpu.bf16UnalignedGemm : gpu.bf16Gemm;
    EXPECT_DOUBLE_EQ(gemm.seconds, gemm.flops / rate + gpu.launchSeconds) << vocab;
  }
}

// bf16 attention with heads up to 128 runs on ppc's tensor-core kernels,
// priced at their rate on the products they execute (the forward's two, the
// op's FLOPs; the backward's two kernels each recompute the scores and their
// gradient: 7/5 of them); larger heads
// (and f32) on the scalar kernels. Both against the tensor peak.
TEST_F(KernelProfileTest, AttentionIsPricedOnTheKernelsThatRunIt) {
  GpuModel h100 = *GpuModel::named("h100"), h200 = *GpuModel::named("h200");
  EXPECT_GT(h200.bandwidth, h100.bandwidth);
  EXPECT_FALSE(GpuModel::named("a100"));
  llvm::StringRef source = R"mlir(
    func.func @f(%q: tensor<2x4x256x64xbf16>) -> tensor<2x4x256x64xbf16> {
      %o, %l = ppc.attention %q, %q, %q scale = 0.125 causal : (tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>) -> (tensor<2x4x256x64xbf16>, tensor<2x4x256xf32>)
      return %o : tensor<2x4x256x64xbf16>
    })mlir";
  StepEstimate step = estimate(source, h100);
  ASSERT_EQ(step.kernels.size(), 1u);
  const KernelEstimate &k = step.kernels[0];
  // Causal: 256 * 257 / 2 pairs per head, two GEMMs of head size 64.
  double flops = 2.0 * 8 * (256.0 * 257 / 2) * (64 + 64);
  EXPECT_DOUBLE_EQ(k.flops, flops);
  EXPECT_DOUBLE_EQ(k.seconds, flops / h100.bf16Attention + h100.launchSeconds);
  double bytes = 2.0 * 2 * 4 * 256 * 64 * 2 + 4.0 * 2 * 4 * 256; // q (once), o; lse
  EXPECT_DOUBLE_EQ(k.bytes, bytes);
  EXPECT_DOUBLE_EQ(k.rooflineSeconds, std::max(flops / h100.bf16Peak, bytes / h100.bandwidth));

  llvm::StringRef wide = R"mlir(
    func.func @f(%q: tensor<2x4x256x256xbf16>) -> tensor<2x4x256x256xbf16> {
      %o, %l = ppc.attention %q, %q, %q scale = 0.0625 causal : (tensor<2x4x256x256xbf16>, tensor<2x4x256x256xbf16>, tensor<2x4x256x256xbf16>) -> (tensor<2x4x256x256xbf16>, tensor<2x4x256xf32>)
      return %o : tensor<2x4x256x256xbf16>
    })mlir";
  const KernelEstimate &scalar = estimate(wide, h100).kernels.at(0);
  EXPECT_DOUBLE_EQ(scalar.seconds, scalar.flops / h100.scalarFlops + h100.launchSeconds);

  llvm::StringRef backward = R"mlir(
    func.func @f(%q: tensor<2x4x256x64xbf16>, %l: tensor<2x4x256xf32>) -> tensor<2x4x256x64xbf16> {
      %dq, %dk, %dv = ppc.attention_grad %q, %q, %q, %q, %l, %q scale = 0.125 causal : (tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>, tensor<2x4x256xf32>, tensor<2x4x256x64xbf16>) -> (tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>)
      return %dq : tensor<2x4x256x64xbf16>
    })mlir";
  const KernelEstimate &grad = estimate(backward, h100).kernels.at(0);
  double gradFlops = 2.0 * 8 * (256.0 * 257 / 2) * (64 * 5);
  EXPECT_DOUBLE_EQ(grad.flops, gradFlops);
  EXPECT_DOUBLE_EQ(grad.seconds, gradFlops / (h100.bf16Attention / 1.4) + h100.launchSeconds);
}

// nll_loss and gather read only the elements they index: a loss reads one
// log-probability (and one class weight) per target, a lookup one row per
// index, not the whole vocabulary.
TEST_F(KernelProfileTest, IndexingKernelsReadOnlyWhatTheyIndex) {
  GpuModel gpu = *GpuModel::named("h100");
  StepEstimate step = estimate(R"mlir(
    func.func @f(%lp: tensor<1024x50000xf32>, %t: tensor<1024xi64>, %w: tensor<50000xf32>,
                 %e: tensor<50000x64xf32>) -> (tensor<f32>, tensor<1024x64xf32>) {
      %l = ppc.nll_loss %lp, %t, %w mean ignore_index = -100 : (tensor<1024x50000xf32>, tensor<1024xi64>, tensor<50000xf32>) -> tensor<f32>
      %x = ppc.gather %e[%t] axis = 0 : (tensor<50000x64xf32>, tensor<1024xi64>) -> tensor<1024x64xf32>
      return %l, %x : tensor<f32>, tensor<1024x64xf32>
    })mlir",
                               gpu);
  ASSERT_EQ(step.kernels.size(), 2u);
  for (const KernelEstimate &k : step.kernels) {
    if (llvm::StringRef(k.what).starts_with("nll_loss"))
      EXPECT_DOUBLE_EQ(k.bytes, 1024.0 * 4 + 1024 * 8 + 1024 * 4 + 4) << k.what;
    else
      EXPECT_DOUBLE_EQ(k.bytes, 1024.0 * 64 * 4 + 1024 * 8 + 1024 * 64 * 4) << k.what;
  }
}

} // namespace
