//===- CostModelTest.cpp - layouts, conversions and the plan cost model ---===//
//
// The byte formulas of DESIGN.md §6, the collectives a layout conversion
// needs (in an order that is valid on every rank), the layouts an op takes
// from its operands, and the pricing of whole plans: on an MLP, Megatron's
// column-then-row split must cost the least communication among the plans
// that split both weights, and every plan must name its peak memory.
//
//===----------------------------------------------------------------------===//

#include "passes/sharding/CostModel.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/sharding/Layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace ppc;

namespace {

Layout layout(std::initializer_list<AxisList> dims, AxisList partial = {},
              llvm::SmallVector<int64_t> blocks = {}) {
  Layout l;
  l.dims.assign(dims.begin(), dims.end());
  l.blocks = blocks.empty() ? llvm::SmallVector<int64_t>(l.dims.size(), 1) : blocks;
  l.partial = std::move(partial);
  return l;
}

std::string describe(llvm::ArrayRef<ConversionStep> steps) {
  std::string s;
  for (const ConversionStep &step : steps) {
    static const char *names[] = {"all_reduce", "all_gather", "all_slice", "reduce_scatter",
                                  "to_partial"};
    s += std::string(s.empty() ? "" : "; ") + names[step.kind];
    for (const std::string &a : step.axes)
      s += " " + a;
    if (step.dim >= 0)
      s += " dim " + std::to_string(step.dim);
    if (step.blocks != 1)
      s += " blocks " + std::to_string(step.blocks);
    s += " n=" + std::to_string(step.elements);
  }
  return s;
}

const AxisSizes kSizes = {{"pp", 1}, {"dp", 2}, {"tp", 4}};

TEST(CostModel, BytesPerRankFollowNcclTests) {
  // 2(n-1)/n S for all-reduce, (n-1)/n S for all-gather and reduce-scatter.
  EXPECT_DOUBLE_EQ(bytesPerRank(ConversionStep::AllReduce, 1000, 4, 4), 2.0 * 3 / 4 * 4000);
  EXPECT_DOUBLE_EQ(bytesPerRank(ConversionStep::AllGather, 1000, 4, 4), 3.0 / 4 * 4000);
  EXPECT_DOUBLE_EQ(bytesPerRank(ConversionStep::ReduceScatter, 1000, 2, 8), 7.0 / 8 * 2000);
  EXPECT_DOUBLE_EQ(bytesPerRank(ConversionStep::AllSlice, 1000, 4, 4), 0);
  EXPECT_DOUBLE_EQ(bytesPerRank(ConversionStep::AllReduce, 1000, 4, 1), 0);
}

TEST(CostModel, SecondsAddLatencyAndUseTheSlowestAxis) {
  DeviceModel device;
  ConversionStep tp{ConversionStep::AllReduce, {"tp"}, -1, 1, 1 << 20};
  ConversionStep dp{ConversionStep::AllReduce, {"dp"}, -1, 1, 1 << 20};
  ConversionStep both{ConversionStep::AllReduce, {"dp", "tp"}, -1, 1, 1 << 20};
  double tpBytes = 2.0 * 3 / 4 * 4 * (1 << 20), dpBytes = 2.0 * 1 / 2 * 4 * (1 << 20);
  EXPECT_DOUBLE_EQ(device.seconds(tp, 4, kSizes), device.latency + tpBytes / device.tpBandwidth);
  EXPECT_DOUBLE_EQ(device.seconds(dp, 4, kSizes),
                   device.latency + dpBytes / device.interNodeBandwidth);
  EXPECT_DOUBLE_EQ(device.bandwidth(both.axes), device.interNodeBandwidth);
  // A slice is a local copy: no latency, memory bandwidth.
  ConversionStep slice{ConversionStep::AllSlice, {"tp"}, 0, 1, 1000};
  EXPECT_DOUBLE_EQ(device.seconds(slice, 4, kSizes), 4000 / device.memoryBandwidth);
}

TEST(Conversion, PartialToSplitOverTheSameAxesIsAReduceScatter) {
  EXPECT_EQ(
      describe(conversionSteps({8, 16}, layout({{}, {}}, {"tp"}), layout({{}, {"tp"}}), kSizes)),
      "reduce_scatter tp dim 1 n=128");
}

TEST(Conversion, SlicesOverBusyAxesWaitForTheGather) {
  // A gradient split on its columns and partial over dp, wanted split on
  // its rows over the same axis: reduce, gather the columns, then slice.
  EXPECT_EQ(describe(conversionSteps({256, 32}, layout({{}, {"tp"}}, {"dp"}), layout({{"tp"}, {}}),
                                     kSizes)),
            "all_reduce dp n=2048; all_gather tp dim 1 n=8192; all_slice tp dim 0 n=2048");
  // A slice over a free axis comes first, so that less is reduced.
  EXPECT_EQ(
      describe(conversionSteps({256, 32}, layout({{}, {}}, {"dp"}), layout({{"tp"}, {}}), kSizes)),
      "all_slice tp dim 0 n=2048; all_reduce dp n=2048");
}

TEST(Conversion, BlockedDimensionsAndPartialTargets) {
  EXPECT_EQ(describe(conversionSteps({2, 12}, layout({{}, {"tp"}}, {}, {1, 3}), layout({{}, {}}),
                                     kSizes)),
            "all_gather tp dim 1 blocks 3 n=24");
  EXPECT_EQ(describe(conversionSteps({}, layout({}), layout({}, {"tp"}), kSizes)),
            "to_partial tp n=1");
  EXPECT_TRUE(conversionSteps({4}, layout({{"tp"}}), layout({{"tp"}}), kSizes).empty());
}

TEST(Layouts, LocalShapeNeedsPartsTimesBlocks) {
  EXPECT_EQ(*localShape({8, 12}, layout({{"dp"}, {"tp"}}, {}, {1, 3}), kSizes),
            (llvm::SmallVector<int64_t>{4, 3}));
  EXPECT_FALSE(localShape({8, 12}, layout({{}, {"tp"}}, {}, {1, 2}), kSizes));
  EXPECT_EQ(layout({{"dp"}, {}, {"tp"}}, {"tp"}, {1, 1, 3}).str(),
            "[[dp], [], 3 * [tp]] partial [tp]");
}

class PlanPricerTest : public ::testing::Test {
protected:
  PlanPricerTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  /// A two-layer MLP step: x [64, 32] -> matmul w1 [32, 128] -> relu ->
  /// matmul w2 [128, 32], returning the output and the (stand-in) updated
  /// weights computed from it.
  static constexpr const char *kStep = R"mlir(
    func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"},
                          %w1: tensor<32x128xf32> {ppc.param = "w1"},
                          %w2: tensor<128x32xf32> {ppc.param = "w2"})
        -> (tensor<64x32xf32> {ppc.output = "y"}) {
      %h = ppc.matmul %x, %w1 : (tensor<64x32xf32>, tensor<32x128xf32>) -> tensor<64x128xf32>
      %a = ppc.relu %h : tensor<64x128xf32>
      %y = ppc.matmul %a, %w2 : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x32xf32>
      return %y : tensor<64x32xf32>
    }
  )mlir";

  PlanCost price(Layout w1, Layout w2) {
    module = parseSourceString<ModuleOp>(kStep, &context);
    EXPECT_TRUE(module);
    auto step = module->lookupSymbol<func::FuncOp>("train_step");
    PlanPricer pricer(step, {{"pp", 1}, {"dp", 1}, {"tp", 4}}, DeviceModel());
    auto cost = pricer.price({layout({{}, {}}), w1, w2});
    EXPECT_TRUE(succeeded(cost));
    return *cost;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(PlanPricerTest, MegatronSplitMovesLeastAmongSplitPlans) {
  Layout rep = layout({{}, {}}), rows = layout({{"tp"}, {}}), cols = layout({{}, {"tp"}});
  PlanCost replicated = price(rep, rep);
  PlanCost megatron = price(cols, rows);
  EXPECT_TRUE(replicated.bytesByAxes.empty());
  // Column then row: one all-reduce of the [64, 32] output.
  EXPECT_DOUBLE_EQ(megatron.bytesByAxes["tp"], 2.0 * 3 / 4 * 64 * 32 * 4);
  for (auto [a, b] : {std::pair{rows, cols}, {rows, rows}, {cols, cols}}) {
    PlanCost other = price(a, b);
    EXPECT_GT(other.bytesByAxes["tp"], megatron.bytesByAxes["tp"]);
  }
  // Splitting the weights over 4 ranks saves 3/4 of their bytes, and the
  // hidden activation is split too.
  EXPECT_LT(megatron.peakBytes, replicated.peakBytes);
  EXPECT_GE(replicated.peakBytes - megatron.peakBytes, 0.75 * (32 * 128 * 2) * 4);
  // Compute: the matmuls run on a quarter of the weights.
  EXPECT_LT(megatron.computeSeconds, replicated.computeSeconds);
}

TEST_F(PlanPricerTest, ALayoutThatDoesNotDivideIsInfinitelyExpensive) {
  PlanCost cost = price(layout({{}, {"tp"}}, {}, {1, 3}), layout({{}, {}}));
  EXPECT_FALSE(std::isfinite(cost.seconds()));
}

/// Prices the @train_step of `source` on 4 data-parallel ranks with the
/// arguments in `arguments`.
FailureOr<PlanCost> priceOnFourDataRanks(const char *source, llvm::ArrayRef<Layout> arguments) {
  MLIRContext context;
  context.loadDialect<PpcDialect, func::FuncDialect>();
  auto module = parseSourceString<ModuleOp>(source, &context);
  if (!module)
    return failure();
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  PlanPricer pricer(step, {{"pp", 1}, {"dp", 4}, {"tp", 1}}, DeviceModel());
  return pricer.price(arguments);
}

// A splat constant of the batch's shape, used late by data-parallel ops: the
// partitioner makes it in the layout its use wants, where it is used
// (Partitioner::convert), so it is priced at the rank's rows from that use,
// with no collective: not whole on every rank from the start of the step.
TEST(PlanPricer, ASplatConstantIsHeldSplitFromItsFirstUse) {
  auto cost = priceOnFourDataRanks(R"mlir(
    func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"},
                          %w: tensor<32x128xf32> {ppc.param = "w"})
        -> (tensor<64x128xf32> {ppc.output = "y"}) {
      %two = ppc.constant dense<2.0> : tensor<64x128xf32>
      %h = ppc.matmul %x, %w : (tensor<64x32xf32>, tensor<32x128xf32>) -> tensor<64x128xf32>
      %y = ppc.mul %h, %two : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      return %y : tensor<64x128xf32>
    }
  )mlir",
                                   {layout({{"dp"}, {}}), layout({{}, {}})});
  ASSERT_TRUE(succeeded(cost));
  double arguments = (16 * 32 + 32 * 128) * 4, rowsOfH = 16 * 128 * 4;
  // At the product: the arguments, h, the constant's 16 rows and y's.
  EXPECT_DOUBLE_EQ(cost->peakBytes, arguments + 3 * rowsOfH);
  // One collective: y gathered whole to be returned; none for the constant.
  EXPECT_EQ(cost->collectivesByAxes["dp"], 1);
}

// Values computed whole and sliced to the layout their use hints (here, the
// updated parameter's rows): each is held as its slice once made, its whole
// a temporary of the op that computes it. The pricer used to add the whole
// and take away the slice when the value died, so every such value leaked
// the difference until the step's end: the estimate grew with the number of
// ops (GPT on 1x8x1: 2.4 times the compiled peak at 8 micro-batches, 1.2 at
// one).
TEST(PlanPricer, AValueSlicedToItsHintIsHeldAsTheSlice) {
  auto cost = priceOnFourDataRanks(R"mlir(
    func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"},
                          %w: tensor<64x32xf32> {ppc.param = "w"})
        -> (tensor<64x32xf32> {ppc.param = "w"}) {
      %e1 = ppc.exp %x : tensor<64x32xf32>
      %e2 = ppc.exp %x : tensor<64x32xf32>
      %e3 = ppc.exp %x : tensor<64x32xf32>
      %e4 = ppc.exp %x : tensor<64x32xf32>
      %s1 = ppc.sub %w, %e1 : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
      %s2 = ppc.sub %s1, %e2 : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
      %s3 = ppc.sub %s2, %e3 : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
      %s4 = ppc.sub %s3, %e4 : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
      return %s4 : tensor<64x32xf32>
    }
  )mlir",
                                   {layout({{}, {}}), layout({{"dp"}, {}})});
  ASSERT_TRUE(succeeded(cost));
  double whole = 64 * 32 * 4, slice = whole / 4, arguments = whole + slice;
  // At %e4: the four slices and %e4 whole; never the four wholes.
  EXPECT_DOUBLE_EQ(cost->peakBytes, arguments + 4 * slice + whole);
  EXPECT_TRUE(cost->collectivesByAxes.empty());
}

// A value converted for a use (here e, split by rows, gathered whole for a
// strided slice of its rows) is converted once: the copy serves every later
// use in that layout, and lives until the last of them, as the partitioner's
// collective result does (a recomputed block's all-gathers live through its
// backward). The pricer used to count the copy at the op that converts
// only, so what was live between the two uses was priced without it: 16384
// here (GPT on 2x4x1 with full recomputation: 0.84 of the compiled peak).
TEST(PlanPricer, AConvertedCopyLivesUntilItsLastUse) {
  auto cost = priceOnFourDataRanks(R"mlir(
    func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"})
        -> (tensor<64x32xf32> {ppc.output = "y"}) {
      %e = ppc.exp %x : tensor<64x32xf32>
      %a = ppc.slice %e starts = [0, 0] limits = [64, 32] steps = [2, 1] : (tensor<64x32xf32>) -> tensor<32x32xf32>
      %b = ppc.exp %a : tensor<32x32xf32>
      %c = ppc.exp %b : tensor<32x32xf32>
      %d = ppc.slice %e starts = [1, 0] limits = [64, 32] steps = [2, 1] : (tensor<64x32xf32>) -> tensor<32x32xf32>
      %z = ppc.add %c, %d : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
      %y = ppc.concat %z, %z axis = 0 : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<64x32xf32>
      return %y : tensor<64x32xf32>
    }
  )mlir",
                                   {layout({{"dp"}, {}})});
  ASSERT_TRUE(succeeded(cost));
  double eWhole = 64 * 32 * 4, eSlice = eWhole / 4, a = 32 * 32 * 4;
  // At %b: x's and e's rows, e's gathered copy (kept for %d), a and b.
  EXPECT_DOUBLE_EQ(cost->peakBytes, eSlice + eSlice + eWhole + 2 * a);
  // One all-gather serves both slices.
  EXPECT_EQ(cost->collectivesByAxes["dp"], 1);
}

} // namespace
