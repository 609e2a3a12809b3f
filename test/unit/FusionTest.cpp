//===- FusionTest.cpp - elementwise fusion groups -------------------------===//
//
// Programs whose fusion groups are known by hand: chains that one op joins
// become one group (AdamW's update of a parameter), and a chain whose value
// is read outside it before that op stays apart (it must be stored first).
//
//===----------------------------------------------------------------------===//

#include "codegen/Fusion.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace ppc;
using namespace ppc::codegen;

namespace {

class FusionTest : public ::testing::Test {
protected:
  FusionTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  FusionPlan plan(llvm::StringRef source) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    return planFusion(func());
  }

  func::FuncOp func() { return *module->getOps<func::FuncOp>().begin(); }

  /// The names of the ops of each group, as "mul,add;sqrt".
  static std::string groups(const FusionPlan &plan) {
    std::string text;
    for (const FusionGroup &group : plan.groups) {
      if (!text.empty())
        text += ";";
      for (auto [i, op] : llvm::enumerate(group.ops))
        text += (i ? "," : "") + op->getName().stripDialect().str();
    }
    return text;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(FusionTest, OneOpJoinsEveryChainItReads) {
  // AdamW: m and v are separate chains until the update reads both; the
  // decayed parameter is a third. One loop reads p, g, m and v and writes
  // the new p, m and v; the intermediates stay in registers.
  FusionPlan fusion = plan(R"mlir(
    func.func @f(%p: tensor<64xf32>, %g: tensor<64xf32>, %m: tensor<64xf32>, %v: tensor<64xf32>,
                 %decay: tensor<f32>, %b1: tensor<f32>, %c1: tensor<f32>, %b2: tensor<f32>,
                 %c2: tensor<f32>, %eps: tensor<f32>, %step: tensor<f32>)
        -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
      %pd = ppc.mul %p, %decay : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
      %m1 = ppc.mul %m, %b1 : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
      %m2 = ppc.mul %g, %c1 : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
      %mn = ppc.add %m1, %m2 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
      %gg = ppc.mul %g, %g : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
      %v2 = ppc.mul %gg, %c2 : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
      %v1 = ppc.mul %v, %b2 : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
      %vn = ppc.add %v1, %v2 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
      %s = ppc.sqrt %vn : tensor<64xf32>
      %d = ppc.add %s, %eps : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
      %q = ppc.div %mn, %d : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
      %u = ppc.mul %q, %step : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
      %pn = ppc.add %pd, %u : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
      return %pn, %mn, %vn : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
    })mlir");
  ASSERT_EQ(fusion.groups.size(), 1u) << groups(fusion);
  EXPECT_EQ(groups(fusion), "mul,mul,mul,add,mul,mul,mul,add,sqrt,add,div,mul,add");
  const FusionGroup &group = fusion.groups.front();
  // p, g, m, v and the seven scalars; the new p, m and v.
  EXPECT_EQ(group.inputs.size(), 11u);
  ASSERT_EQ(group.outputs.size(), 3u);
  auto ret = llvm::cast<func::ReturnOp>(func().front().back());
  for (Value result : ret.getOperands())
    EXPECT_TRUE(llvm::is_contained(group.outputs, result));
  for (Operation *op : group.ops)
    EXPECT_EQ(fusion.runsAt(op), group.ops.back());
}

TEST_F(FusionTest, AChainReadBeforeTheJoinStaysApart) {
  // %a's chain is read by the matmul before the add that reads both
  // chains: it runs (and is stored) before the matmul, so it cannot wait
  // for the add. The add joins %b's chain alone.
  FusionPlan fusion = plan(R"mlir(
    func.func @f(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %a = ppc.exp %x : tensor<4x4xf32>
      %b = ppc.neg %y : tensor<4x4xf32>
      %mm = ppc.matmul %a, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      %s = ppc.add %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      %r = ppc.add %s, %mm : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      return %r : tensor<4x4xf32>
    })mlir");
  EXPECT_EQ(groups(fusion), "exp;neg,add,add");
  Value a = func().front().front().getResult(0);
  EXPECT_FALSE(fusion.unstored(a));
}

TEST_F(FusionTest, ChainsOfAnotherShapeStayApart) {
  // The add broadcasts a [4] chain into a [4x4] one: the loops differ.
  FusionPlan fusion = plan(R"mlir(
    func.func @f(%x: tensor<4x4xf32>, %y: tensor<4xf32>) -> tensor<4x4xf32> {
      %a = ppc.exp %x : tensor<4x4xf32>
      %b = ppc.neg %y : tensor<4xf32>
      %s = ppc.add %a, %b : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
      return %s : tensor<4x4xf32>
    })mlir");
  EXPECT_EQ(groups(fusion), "exp,add;neg");
}

} // namespace
