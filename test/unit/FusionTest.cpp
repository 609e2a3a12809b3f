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

  static FusionOptions epilogues() {
    FusionOptions options;
    options.gemmEpilogues = options.gemmSums = true;
    return options;
  }

  /// Parses `source`; its function's ops in program order.
  llvm::SmallVector<Operation *> parse(llvm::StringRef source) {
    module = parseSourceString<ModuleOp>(source, &context);
    llvm::SmallVector<Operation *> ops;
    if (module)
      for (Operation &op : func().getBody().front())
        ops.push_back(&op);
    return ops;
  }

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

// The optimizer step's alike groups run as one kernel at the last one's
// place (GroupBatch): the update of every parameter, whatever its shape. A
// batch closes where an op reads one of its values; a group with another
// constant, or of a micro-batch (not the step's own), stays alone.
TEST_F(FusionTest, TheOptimizersAlikeGroupsRunAsOneKernel) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%p1: tensor<64xf32>, %g1: tensor<64xf32>, %p2: tensor<4x8xf32>,
                 %g2: tensor<4x8xf32>, %p3: tensor<16xf32>, %g3: tensor<16xf32>,
                 %p4: tensor<3xf32>, %g4: tensor<3xf32>, %p5: tensor<16xf32>,
                 %g5: tensor<16xf32>, %p6: tensor<16xf32>, %g6: tensor<16xf32>,
                 %w: tensor<8x4xf32>, %lr: tensor<f32>, %s3: tensor<1xf32>, %s4: tensor<1xf32>)
        -> (tensor<64xf32>, tensor<4x8xf32>, tensor<4x4xf32>, tensor<16xf32>, tensor<3xf32>,
            tensor<16xf32>, tensor<16xf32>) {
      %half = ppc.constant dense<0.5> : tensor<f32>
      %quarter = ppc.constant dense<0.25> : tensor<f32>
      %u1 = ppc.mul %g1, %lr {ppc.optimizer = "p1"} : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
      %n1 = ppc.sub %p1, %u1 {ppc.optimizer = "p1"} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
      %u2 = ppc.mul %g2, %lr {ppc.optimizer = "p2"} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
      %n2 = ppc.sub %p2, %u2 {ppc.optimizer = "p2"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %mm = ppc.matmul %n2, %w : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
      %u3 = ppc.mul %g3, %s3 {ppc.optimizer = "p3"} : (tensor<16xf32>, tensor<1xf32>) -> tensor<16xf32>
      %n3 = ppc.sub %p3, %u3 {ppc.optimizer = "p3"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
      %u4 = ppc.mul %g4, %s4 {ppc.optimizer = "p4"} : (tensor<3xf32>, tensor<1xf32>) -> tensor<3xf32>
      %n4 = ppc.sub %p4, %u4 {ppc.optimizer = "p4"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %u5 = ppc.mul %g5, %half {ppc.optimizer = "p5"} : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
      %n5 = ppc.sub %p5, %u5 {ppc.optimizer = "p5"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
      %u6 = ppc.mul %g6, %quarter {ppc.mb = 0 : i64} : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
      %n6 = ppc.sub %p6, %u6 {ppc.mb = 0 : i64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
      return %n1, %n2, %mm, %n3, %n4, %n5, %n6 : tensor<64xf32>, tensor<4x8xf32>, tensor<4x4xf32>,
          tensor<16xf32>, tensor<3xf32>, tensor<16xf32>, tensor<16xf32>
    })mlir");
  ASSERT_FALSE(ops.empty());
  FusionOptions options;
  options.batchOptimizer = true;
  FusionPlan fusion = planFusion(func(), options);
  EXPECT_EQ(groups(fusion), "mul,sub;mul,sub;mul,sub;mul,sub;mul,sub;mul,sub") << groups(fusion);
  // Updates 1 and 2 until the matmul reads the second; then 3 and 4, whose
  // scalars are theirs (one element, not shared). 5 multiplies by another
  // constant; 6 is a micro-batch's, not the step's own.
  ASSERT_EQ(fusion.batches.size(), 2u);
  EXPECT_EQ(fusion.batches[0].groups, (llvm::SmallVector<unsigned>{0, 1}));
  EXPECT_EQ(fusion.batches[1].groups, (llvm::SmallVector<unsigned>{2, 3}));
  EXPECT_FALSE(fusion.batch(4));
  EXPECT_FALSE(fusion.batch(5));
  // Inputs in first-use order: g, the scalar, p.
  EXPECT_EQ(fusion.batches[0].scalar, (llvm::SmallVector<bool>{false, true, false}));
  EXPECT_EQ(fusion.batches[0].shared, (llvm::SmallVector<bool>{false, true, false}));
  EXPECT_EQ(fusion.batches[1].scalar, (llvm::SmallVector<bool>{false, true, false}));
  EXPECT_EQ(fusion.batches[1].shared, (llvm::SmallVector<bool>{false, false, false}));
  // Each batch runs at its last group's place: the first before the matmul.
  EXPECT_EQ(fusion.runsAt(ops[2]), ops[5]);
  EXPECT_EQ(fusion.runsAt(ops[5]), ops[5]);
  EXPECT_EQ(fusion.runsAt(ops[7]), ops[10]);
  EXPECT_EQ(fusion.runsAt(ops[11]), ops[12]);
  // Without the option, no batches.
  EXPECT_TRUE(planFusion(func()).batches.empty());
}

// The gradient norm's sums of squares, each of all of a gradient's
// elements, run as one batch; a reduction of some axes only does not.
TEST_F(FusionTest, FullReductionsOfTheStepRunAsOneKernel) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%g1: tensor<64xf32>, %g2: tensor<4x8xf32>, %g3: tensor<3xf32>, %g4: tensor<4x8xf32>)
        -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<4xf32>) {
      %s1 = ppc.mul %g1, %g1 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
      %r1 = ppc.reduce_sum %s1 axes = [0] keepdims = false : (tensor<64xf32>) -> tensor<f32>
      %s2 = ppc.mul %g2, %g2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %r2 = ppc.reduce_sum %s2 axes = [0, 1] keepdims = false : (tensor<4x8xf32>) -> tensor<f32>
      %s3 = ppc.mul %g3, %g3 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %r3 = ppc.reduce_sum %s3 axes = [0] keepdims = false : (tensor<3xf32>) -> tensor<f32>
      %s4 = ppc.mul %g4, %g4 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %r4 = ppc.reduce_sum %s4 axes = [1] keepdims = false : (tensor<4x8xf32>) -> tensor<4xf32>
      return %r1, %r2, %r3, %r4 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<4xf32>
    })mlir");
  ASSERT_FALSE(ops.empty());
  FusionOptions options;
  options.batchOptimizer = true;
  FusionPlan fusion = planFusion(func(), options);
  EXPECT_EQ(groups(fusion), "mul,reduce_sum;mul,reduce_sum;mul,reduce_sum;mul,reduce_sum");
  ASSERT_EQ(fusion.batches.size(), 1u);
  EXPECT_EQ(fusion.batches[0].groups, (llvm::SmallVector<unsigned>{0, 1, 2}));
  EXPECT_FALSE(fusion.batch(3));
  EXPECT_EQ(fusion.runsAt(ops[0]), ops[5]);
}

} // namespace

// The epilogues of GEMMs (CUDA): the bias and the residual added to a
// product are computed by its GEMM, which runs at the last add's place; the
// product and the biased value are never stored.
TEST_F(FusionTest, GemmsTakeTheirBiasAndResidualAdds) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>,
                 %r: tensor<2x4x16xbf16>, %w2: tensor<16x8xbf16>, %c: tensor<2x4x8xbf16>,
                 %w3: tensor<8x16xbf16>)
        -> (tensor<2x4x16xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) {
      %p = ppc.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
      %pb = ppc.add %p, %b : (tensor<2x4x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
      %y = ppc.add %r, %pb : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
      %q = ppc.matmul %y, %w2 : (tensor<2x4x16xbf16>, tensor<16x8xbf16>) -> tensor<2x4x8xbf16>
      %z = ppc.add %q, %c : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
      %e = ppc.exp %z : tensor<2x4x8xbf16>
      %u = ppc.matmul %e, %w3 : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
      %t = ppc.exp %u : tensor<2x4x16xbf16>
      %s = ppc.matmul %e, %w3 : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
      %sb = ppc.add %s, %b : (tensor<2x4x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
      %o = ppc.mul %sb, %s : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
      %rr = ppc.add %o, %t : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
      return %rr, %z, %e : tensor<2x4x16xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
    })mlir");
  ASSERT_TRUE(module);
  FusionPlan without = planFusion(func());
  EXPECT_TRUE(without.epilogues.empty());
  FusionPlan fusion = planFusion(func(), epilogues());
  // %p + %b + %r, and %q + %c; %u has no add, %s has two readers.
  ASSERT_EQ(fusion.epilogues.size(), 2u);
  const GemmEpilogue &first = fusion.epilogues[0], &second = fusion.epilogues[1];
  EXPECT_EQ(first.matmul, ops[0]);
  ASSERT_EQ(first.adds.size(), 2u);
  EXPECT_EQ(first.adds[0], ops[1]);
  EXPECT_EQ(first.adds[1], ops[2]);
  EXPECT_EQ(first.bias, func().getArgument(2));
  EXPECT_EQ(first.addend, func().getArgument(3));
  EXPECT_EQ(second.matmul, ops[3]);
  ASSERT_EQ(second.adds.size(), 1u);
  EXPECT_FALSE(second.bias);
  EXPECT_EQ(second.addend, func().getArgument(5));
  // The GEMM runs at its last add; only that add's result is stored.
  EXPECT_EQ(fusion.runsAt(ops[0]), ops[2]);
  EXPECT_EQ(fusion.runsAt(ops[1]), ops[2]);
  EXPECT_TRUE(fusion.unstored(ops[0]->getResult(0)));
  EXPECT_TRUE(fusion.unstored(ops[1]->getResult(0)));
  EXPECT_FALSE(fusion.unstored(ops[2]->getResult(0)));
  // The adds join no group: exp reads the epilogue's result in a group of
  // its own, where without epilogues it joins the add before it; the rest
  // fuse alike (%t's exp joins the last group, which reads it).
  EXPECT_EQ(groups(fusion), "exp;exp,add,mul,add");
  EXPECT_EQ(groups(without), "add,add;add,exp;exp,add,mul,add");
}

// A bias's gradient summed by its weight's GEMM (cuBLASLt's BGRADB and
// BGRADA): a Linear's (the sum's input reshaped and transposed is the first
// operand) and a Conv1D's (the second); not where the other operand is
// computed after the sum (a group placed later), nor without epilogues.
TEST_F(FusionTest, BiasGradientsAreSummedByTheirWeightsGemm) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%dy: tensor<2x4x16xbf16>, %x: tensor<8x8xbf16>, %g: tensor<8x16xbf16>,
                 %g3: tensor<8x16xbf16>)
        -> (tensor<16xbf16>, tensor<16x8xbf16>, tensor<1x16xbf16>, tensor<8x16xbf16>,
            tensor<1x16xbf16>, tensor<8x16xbf16>) {
      %db = ppc.reduce_sum %dy axes = [0, 1] keepdims = false : (tensor<2x4x16xbf16>) -> tensor<16xbf16>
      %f = ppc.reshape %dy : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
      %t = ppc.transpose %f perm = [1, 0] : (tensor<8x16xbf16>) -> tensor<16x8xbf16>
      %dw = ppc.matmul %t, %x : (tensor<16x8xbf16>, tensor<8x8xbf16>) -> tensor<16x8xbf16>
      %db2 = ppc.reduce_sum %g axes = [0] keepdims = true : (tensor<8x16xbf16>) -> tensor<1x16xbf16>
      %xt = ppc.transpose %x perm = [1, 0] : (tensor<8x8xbf16>) -> tensor<8x8xbf16>
      %dw2 = ppc.matmul %xt, %g : (tensor<8x8xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
      %db3 = ppc.reduce_sum %g3 axes = [0] keepdims = true : (tensor<8x16xbf16>) -> tensor<1x16xbf16>
      %late = ppc.exp %x : tensor<8x8xbf16>
      %lt = ppc.transpose %late perm = [1, 0] : (tensor<8x8xbf16>) -> tensor<8x8xbf16>
      %dw3 = ppc.matmul %lt, %g3 : (tensor<8x8xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
      return %db, %dw, %db2, %dw2, %db3, %dw3 : tensor<16xbf16>, tensor<16x8xbf16>, tensor<1x16xbf16>, tensor<8x16xbf16>, tensor<1x16xbf16>, tensor<8x16xbf16>
    })mlir");
  ASSERT_TRUE(module);
  EXPECT_TRUE(planFusion(func()).sumsGemm.empty());
  FusionPlan fusion = planFusion(func(), epilogues());
  ASSERT_EQ(fusion.sumsGemm.size(), 2u);
  EXPECT_EQ(fusion.sumsGemm.lookup(ops[0]), ops[3]);
  EXPECT_EQ(fusion.sumsOf.lookup(ops[3]), ops[0]);
  EXPECT_FALSE(fusion.sumsOfB.contains(ops[3]));
  EXPECT_EQ(fusion.sumsGemm.lookup(ops[4]), ops[6]);
  EXPECT_TRUE(fusion.sumsOfB.contains(ops[6]));
  // The GEMMs run at their sums' places, earlier than their own.
  EXPECT_EQ(fusion.runsAt(ops[3]), ops[0]);
  EXPECT_EQ(fusion.runsAt(ops[6]), ops[4]);
  // %dw3's first operand is computed after %db3 (by exp's group).
  EXPECT_FALSE(fusion.sumsGemm.contains(ops[7]));
  EXPECT_FALSE(fusion.sumsOf.contains(ops[10]));
}

// Two products summed (the input gradient of a value read twice): the first
// GEMM adds the second product, stored, as its addend; the second has no
// epilogue. A third product added to that sum, which two ops read, has its
// own epilogue reading the stored sum.
TEST_F(FusionTest, AnAddOfTwoProductsIsTheFirstsEpilogue) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %v: tensor<8x8xf32>)
        -> tensor<4x8xf32> {
      %a = ppc.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %b = ppc.matmul %x, %v : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %s = ppc.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %c = ppc.matmul %s, %v : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %t = ppc.add %s, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      return %t : tensor<4x8xf32>
    })mlir");
  ASSERT_TRUE(module);
  FusionPlan fusion = planFusion(func(), epilogues());
  ASSERT_EQ(fusion.epilogues.size(), 2u);
  EXPECT_EQ(fusion.epilogues[0].matmul, ops[0]);
  EXPECT_EQ(fusion.epilogues[0].addend, ops[1]->getResult(0));
  ASSERT_EQ(fusion.epilogues[0].adds.size(), 1u);
  EXPECT_EQ(fusion.epilogues[0].adds[0], ops[2]);
  EXPECT_FALSE(fusion.epilogue(ops[1]));
  EXPECT_FALSE(fusion.unstored(ops[1]->getResult(0)));
  // %s is read by %c and %t: stored, so %c's epilogue adds it.
  EXPECT_EQ(fusion.epilogues[1].matmul, ops[3]);
  EXPECT_EQ(fusion.epilogues[1].addend, ops[2]->getResult(0));
  EXPECT_FALSE(fusion.unstored(ops[2]->getResult(0)));
}

// The sums over the rows that a LayerNorm gradient's rule and the bias
// before it leave (bf16: through widening casts) run in the gradient's
// kernel: the bias's gradient, the scale's, and the sum of the written rows
// (here the add of the residual stream's gradient). Every op of their
// chains runs at the gradient's place; only the reductions are stored.
TEST_F(FusionTest, NormGradientsSumTheirRows) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%x: tensor<2x4x8xbf16>, %s: tensor<8xbf16>, %dy: tensor<2x4x8xbf16>,
                 %r: tensor<2x4x8xbf16>)
        -> (tensor<2x4x8xbf16>, tensor<1x1x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xbf16>) {
      %dx, %mean, %rstd = ppc.layer_norm_grad %x, %s, %dy axis = 2 epsilon = 1.0E-5 : (tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x1xf32>, tensor<2x4x1xf32>)
      %g = ppc.cast %dy : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
      %xf = ppc.cast %x : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
      %c = ppc.sub %xf, %mean : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
      %xhat = ppc.mul %c, %rstd : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
      %p = ppc.mul %g, %xhat : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
      %ds = ppc.reduce_sum %p axes = [0, 1] keepdims = true : (tensor<2x4x8xf32>) -> tensor<1x1x8xf32>
      %g2 = ppc.cast %dy : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
      %db = ppc.reduce_sum %g2 axes = [0, 1] keepdims = true : (tensor<2x4x8xf32>) -> tensor<1x1x8xf32>
      %sum = ppc.add %dx, %r : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
      %dbias = ppc.reduce_sum %sum axes = [0, 1] keepdims = true : (tensor<2x4x8xbf16>) -> tensor<1x1x8xbf16>
      return %sum, %ds, %db, %dbias : tensor<2x4x8xbf16>, tensor<1x1x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xbf16>
    })mlir");
  ASSERT_TRUE(module);
  FusionPlan fusion = planFusion(func());
  Operation *grad = ops[0];
  ASSERT_EQ(fusion.normGradAdd.lookup(grad), ops[9]);
  auto sums = fusion.normGradSums.lookup(grad);
  ASSERT_EQ(sums.size(), 3u);
  EXPECT_EQ(sums[0].kind, NormGradSum::Kind::ResultGrad);
  EXPECT_EQ(sums[0].reduction, ops[8]);
  EXPECT_EQ(sums[1].kind, NormGradSum::Kind::InputGrad);
  EXPECT_EQ(sums[1].reduction, ops[10]);
  EXPECT_EQ(sums[2].kind, NormGradSum::Kind::ScaleGrad);
  EXPECT_EQ(sums[2].reduction, ops[6]);
  for (unsigned i : {1, 2, 3, 4, 5, 6, 7, 8, 10}) {
    EXPECT_EQ(fusion.runsAt(ops[i]), grad) << "op " << i;
    bool reduction = i == 6 || i == 8 || i == 10;
    EXPECT_EQ(fusion.unstored(ops[i]->getResult(0)), !reduction) << "op " << i;
  }
  EXPECT_EQ(groups(fusion), "");
  FusionOptions apart;
  apart.normGradSums = false;
  FusionPlan without = planFusion(func(), apart);
  EXPECT_TRUE(without.normGradSums.empty());
  EXPECT_EQ(groups(without), "cast,cast,sub,mul,mul,reduce_sum;cast,reduce_sum");
}

// What the kernel cannot take stays a reduction of its own: a cast read
// twice (it must be stored), a sum over the batch alone (the position
// embedding's gradient), a sum read before the gradient runs, and an RMS
// norm's scale gradient in f32 whose x is read through a cast to f64.
TEST_F(FusionTest, NormGradientsLeaveSumsTheyCannotTake) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%x: tensor<2x4x8xf32>, %s: tensor<8xf32>, %dy: tensor<2x4x8xf32>,
                 %early: tensor<1x4x8xf32>)
        -> (tensor<2x4x8xf32>, tensor<2x4x8xf64>, tensor<1x4x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>) {
      %pre = ppc.reduce_sum %dy axes = [0, 1] keepdims = true : (tensor<2x4x8xf32>) -> tensor<1x1x8xf32>
      %use = ppc.exp %pre : tensor<1x1x8xf32>
      %dx, %rstd = ppc.rms_norm_grad %x, %s, %dy axis = 2 epsilon = 1.0E-5 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x1xf32>)
      %wide = ppc.cast %dx : tensor<2x4x8xf32> -> tensor<2x4x8xf64>
      %twice = ppc.reduce_sum %wide axes = [0, 1] keepdims = true : (tensor<2x4x8xf64>) -> tensor<1x1x8xf64>
      %batch = ppc.reduce_sum %dx axes = [0] keepdims = true : (tensor<2x4x8xf32>) -> tensor<1x4x8xf32>
      %xhat = ppc.mul %x, %rstd : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
      %p = ppc.mul %xhat, %dy : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
      %ds = ppc.reduce_sum %p axes = [0, 1] keepdims = true : (tensor<2x4x8xf32>) -> tensor<1x1x8xf32>
      return %dx, %wide, %batch, %ds, %use : tensor<2x4x8xf32>, tensor<2x4x8xf64>, tensor<1x4x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>
    })mlir");
  ASSERT_TRUE(module);
  FusionPlan fusion = planFusion(func());
  Operation *grad = ops[2];
  // Only the scale's gradient, its product in either order.
  auto sums = fusion.normGradSums.lookup(grad);
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0].kind, NormGradSum::Kind::ScaleGrad);
  EXPECT_EQ(sums[0].reduction, ops[8]);
  for (unsigned i : {0, 3, 4, 5})
    EXPECT_FALSE(fusion.normGradOfSum.contains(ops[i])) << "op " << i;
}

// A reduction of a group value that later ops read too (the gradient of the
// bias of the product that reads it) ends the group, which stores the value
// as it sums it; where an op reads the value before the reduction, the
// reduction stays apart.
TEST_F(FusionTest, AReductionOfAStoredValueEndsItsGroup) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %w: tensor<8x8xf32>)
        -> (tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x8xf32>, tensor<1x8xf32>) {
      %s = ppc.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %t = ppc.mul %s, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %db = ppc.reduce_sum %t axes = [0] keepdims = true : (tensor<4x8xf32>) -> tensor<1x8xf32>
      %dx = ppc.matmul %t, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %u = ppc.exp %b : tensor<4x8xf32>
      %early = ppc.matmul %u, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %late = ppc.reduce_sum %u axes = [0] keepdims = true : (tensor<4x8xf32>) -> tensor<1x8xf32>
      return %dx, %db, %early, %late : tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x8xf32>, tensor<1x8xf32>
    })mlir");
  ASSERT_TRUE(module);
  FusionPlan fusion = planFusion(func());
  EXPECT_EQ(groups(fusion), "add,mul,reduce_sum;exp");
  ASSERT_EQ(fusion.groups.size(), 2u);
  EXPECT_EQ(fusion.groups[0].reduction, ops[2]);
  EXPECT_FALSE(fusion.unstored(ops[1]->getResult(0)));
  EXPECT_TRUE(fusion.unstored(ops[0]->getResult(0)));
  EXPECT_FALSE(fusion.groupOf.contains(ops[6]));
}

// A log_sum_exp of rows that the logits' gradient then reads per row (as
// ppc-hoist-logits-gradient orders them) runs in the gradient's kernel, at
// its place, the loss reading it after; where the loss reads it first,
// another micro-batch runs between, the group already computes another, or
// it has other rows, each keeps its own kernel.
TEST_F(FusionTest, TheLogitsGradientComputesTheirLogSumExp) {
  const char *source = R"mlir(
    func.func @f(%x: tensor<2x3x8xbf16>, %t: tensor<6xi64>) -> (tensor<f32>, tensor<2x3x8xbf16>) {
      %w = ppc.slice %x starts = [0, 0, 0] limits = [2, 3, 5] steps = [1, 1, 1] : (tensor<2x3x8xbf16>) -> tensor<2x3x5xbf16>
      %c = ppc.cast %w : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
      %l = ppc.log_sum_exp %c axis = 2 : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
      %xf = ppc.cast %x : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
      %d = ppc.sub %xf, %l : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
      %e = ppc.exp %d : tensor<2x3x8xf32>
      %g = ppc.cast %e : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
      %w2 = ppc.slice %x starts = [0, 0, 0] limits = [2, 3, 5] steps = [1, 1, 1] : (tensor<2x3x8xbf16>) -> tensor<2x3x5xbf16>
      %c2 = ppc.cast %w2 : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
      %s = ppc.sub %c2, %l : (tensor<2x3x5xf32>, tensor<2x3x1xf32>) -> tensor<2x3x5xf32>
      %r = ppc.reshape %s : tensor<2x3x5xf32> -> tensor<6x5xf32>
      %loss = ppc.nll_loss %r, %t mean : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
      return %loss, %g : tensor<f32>, tensor<2x3x8xbf16>
    })mlir";
  llvm::SmallVector<Operation *> ops = parse(source);
  ASSERT_TRUE(module);
  FusionPlan fusion = planFusion(func());
  Operation *sum = ops[2], *gradient = ops[6];
  EXPECT_EQ(fusion.rowLogSumExpOf.lookup(gradient), sum);
  EXPECT_EQ(fusion.runsAt(sum), gradient);
  EXPECT_EQ(fusion.runsAt(ops[0]), gradient); // the window folded into it
  EXPECT_EQ(fusion.runsAt(ops[11]), ops[11]); // the loss, after
  FusionOptions apart;
  apart.rowLogSumExps = false;
  EXPECT_TRUE(planFusion(func(), apart).rowLogSumExpOf.empty());

  // The loss first: it reads the log_sum_exp before the gradient's place.
  std::string lossFirst = source;
  size_t from = lossFirst.find("      %xf"), to = lossFirst.find("      %w2");
  std::string gradientOps = lossFirst.substr(from, to - from);
  lossFirst.erase(from, to - from);
  lossFirst.insert(lossFirst.find("      return"), gradientOps);
  parse(lossFirst);
  ASSERT_TRUE(module);
  EXPECT_TRUE(planFusion(func()).rowLogSumExpOf.empty());

  // Two log_sum_exps read by one group: the kernel computes the first; the
  // second runs in its own, at its place.
  llvm::SmallVector<Operation *> two = parse(R"mlir(
    func.func @f(%x: tensor<3x8xf32>, %y: tensor<3x8xf32>) -> tensor<3x8xf32> {
      %l = ppc.log_sum_exp %x axis = 1 : (tensor<3x8xf32>) -> tensor<3x1xf32>
      %m = ppc.log_sum_exp %y axis = 1 : (tensor<3x8xf32>) -> tensor<3x1xf32>
      %d = ppc.sub %x, %l : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
      %e = ppc.sub %y, %m : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
      %s = ppc.add %d, %e : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
      return %s : tensor<3x8xf32>
    })mlir");
  ASSERT_TRUE(module);
  FusionPlan both = planFusion(func());
  EXPECT_EQ(both.rowLogSumExpOf.lookup(two[4]), two[0]);
  EXPECT_EQ(both.runsAt(two[1]), two[1]);

  // Another micro-batch's op between the log_sum_exp and the group: apart
  // (the rows would live across it).
  parse(R"mlir(
    func.func @f(%x: tensor<3x8xf32>, %y: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x8xf32>) {
      %l = ppc.log_sum_exp %x axis = 1 {ppc.mb = 0 : i64} : (tensor<3x8xf32>) -> tensor<3x1xf32>
      %o = ppc.exp %y {ppc.mb = 1 : i64} : tensor<3x8xf32>
      %d = ppc.sub %x, %l {ppc.mb = 0 : i64} : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
      return %d, %o : tensor<3x8xf32>, tensor<3x8xf32>
    })mlir");
  ASSERT_TRUE(module);
  EXPECT_TRUE(planFusion(func()).rowLogSumExpOf.empty());

  // A group over other rows (the log_sum_exp broadcast over a new leading
  // dimension) reads it apart.
  parse(R"mlir(
    func.func @f(%x: tensor<3x8xf32>, %y: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
      %l = ppc.log_sum_exp %x axis = 1 : (tensor<3x8xf32>) -> tensor<3x1xf32>
      %d = ppc.sub %y, %l : (tensor<2x3x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
      %e = ppc.exp %d : tensor<2x3x8xf32>
      return %e : tensor<2x3x8xf32>
    })mlir");
  ASSERT_TRUE(module);
  EXPECT_TRUE(planFusion(func()).rowLogSumExpOf.empty());
}

// Alike small groups that read only the arguments (the bf16 copies of biases
// and norm weights, each made before its first reader) run as one kernel at
// the first one's place, ahead of every reader; a group reading a computed
// value, one of another kind, and one too large for a launch to matter stay
// apart (the large one joins with batchLargeArgumentGroups).
TEST_F(FusionTest, SmallGroupsOfArgumentsRunAsOneEarlyKernel) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%x: tensor<4x8xbf16>, %b1: tensor<8xf32>, %b2: tensor<8xf32>, %b3: tensor<16xf32>,
                 %w: tensor<512x512xf32>, %v: tensor<8x8xbf16>)
        -> (tensor<4x8xbf16>, tensor<16xbf16>, tensor<512x512xbf16>, tensor<8xf32>) {
      %c1 = ppc.cast %b1 : tensor<8xf32> -> tensor<8xbf16>
      %y1 = ppc.add %x, %c1 : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
      %m = ppc.matmul %y1, %v : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
      %c2 = ppc.cast %b2 : tensor<8xf32> -> tensor<8xbf16>
      %y2 = ppc.add %m, %c2 : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
      %c3 = ppc.cast %b3 : tensor<16xf32> -> tensor<16xbf16>
      %big = ppc.cast %w : tensor<512x512xf32> -> tensor<512x512xbf16>
      %e = ppc.exp %b1 : tensor<8xf32>
      return %y2, %c3, %big, %e : tensor<4x8xbf16>, tensor<16xbf16>, tensor<512x512xbf16>, tensor<8xf32>
    })mlir");
  ASSERT_TRUE(module);
  FusionOptions options;
  options.batchArgumentGroups = true;
  FusionPlan fusion = planFusion(func(), options);
  ASSERT_EQ(fusion.batches.size(), 1u);
  const GroupBatch &batch = fusion.batches[0];
  EXPECT_TRUE(batch.early);
  ASSERT_EQ(batch.groups.size(), 3u);
  EXPECT_EQ(fusion.groups[batch.groups[0]].ops.front(), ops[0]);
  EXPECT_EQ(fusion.groups[batch.groups[1]].ops.front(), ops[3]);
  EXPECT_EQ(fusion.groups[batch.groups[2]].ops.front(), ops[5]);
  for (unsigned i : {0, 3, 5})
    EXPECT_EQ(fusion.runsAt(ops[i]), ops[0]) << "op " << i;
  EXPECT_EQ(fusion.runsAt(ops[6]), ops[6]);
  EXPECT_EQ(fusion.runsAt(ops[7]), ops[7]);
  EXPECT_TRUE(planFusion(func()).batches.empty());
  // With batchLargeArgumentGroups the weight's copy (512 x 512) joins them;
  // the exp (another kind) stays apart.
  options.batchLargeArgumentGroups = true;
  FusionPlan large = planFusion(func(), options);
  ASSERT_EQ(large.batches.size(), 1u);
  ASSERT_EQ(large.batches[0].groups.size(), 4u);
  EXPECT_EQ(large.groups[large.batches[0].groups[3]].ops.front(), ops[6]);
  EXPECT_EQ(large.runsAt(ops[6]), ops[0]);
  EXPECT_EQ(large.runsAt(ops[7]), ops[7]);
}

// A group runs at its last op: one that a later op joined starts before it
// runs. An early batch runs at the first of its groups' places, so before
// every group's reader (here %y, which reads the second group's value).
TEST_F(FusionTest, AnEarlyBatchRunsBeforeEveryGroupsReader) {
  llvm::SmallVector<Operation *> ops = parse(R"mlir(
    func.func @f(%b1: tensor<8xf32>, %b2: tensor<8xf64>, %b3: tensor<8xf32>, %b4: tensor<8xf64>,
                 %x: tensor<4x8xf32>, %v: tensor<8x8xf32>)
        -> (tensor<4x8xf32>, tensor<8xf32>) {
      %ca = ppc.cast %b1 : tensor<8xf32> -> tensor<8xf64>
      %cb = ppc.cast %b3 : tensor<8xf32> -> tensor<8xf64>
      %mb = ppc.mul %cb, %b4 : (tensor<8xf64>, tensor<8xf64>) -> tensor<8xf64>
      %nb = ppc.cast %mb : tensor<8xf64> -> tensor<8xf32>
      %y = ppc.add %x, %nb : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %p = ppc.matmul %y, %v : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %ma = ppc.mul %ca, %b2 : (tensor<8xf64>, tensor<8xf64>) -> tensor<8xf64>
      %na = ppc.cast %ma : tensor<8xf64> -> tensor<8xf32>
      return %p, %na : tensor<4x8xf32>, tensor<8xf32>
    })mlir");
  ASSERT_TRUE(module);
  FusionOptions options;
  options.batchArgumentGroups = true;
  FusionPlan fusion = planFusion(func(), options);
  ASSERT_EQ(fusion.batches.size(), 1u);
  const GroupBatch &batch = fusion.batches[0];
  ASSERT_EQ(batch.groups.size(), 2u);
  // The second group created (%cb's) runs first: the batch is at its place.
  EXPECT_EQ(fusion.groups[batch.groups[0]].ops.front(), ops[1]);
  EXPECT_EQ(fusion.place(batch), ops[3]);
  for (unsigned i : {0, 1, 2, 3, 6, 7})
    EXPECT_EQ(fusion.runsAt(ops[i]), ops[3]) << "op " << i;
}
