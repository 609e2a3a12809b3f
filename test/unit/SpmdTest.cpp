//===- SpmdTest.cpp - the mesh, collectives and the SPMD executor ---------===//
//
// Each test parses a module with a small mesh and an SPMD function, runs it
// on every rank and compares with values worked out by hand from the
// collective's definition, or with the unpartitioned program.
//
//===----------------------------------------------------------------------===//

#include "executor/Spmd.h"
#include "executor/Interpreter.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "runtime/Mesh.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "test/unit/TestTensors.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace ppc;
using ppc::test::expectValues;
using ppc::test::makeTensor;

namespace {

class SpmdTest : public ::testing::Test {
protected:
  SpmdTest() { context.loadDialect<PpcDialect, mlir::func::FuncDialect>(); }

  /// Parses `source` (a mesh and functions); the mesh is `@mesh`.
  void parse(llvm::StringRef source) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    ASSERT_TRUE(module) << "cannot parse:\n" << source.str() << "\n" << errors;
    mesh = module->lookupSymbol<MeshOp>("mesh");
    ASSERT_TRUE(mesh) << "no @mesh";
  }

  mlir::func::FuncOp function(llvm::StringRef name) {
    return module->lookupSymbol<mlir::func::FuncOp>(name);
  }

  /// Runs @`name` on every rank; `args(rank)` gives a rank's arguments.
  llvm::SmallVector<llvm::SmallVector<Tensor>>
  runOk(llvm::StringRef name, llvm::function_ref<llvm::SmallVector<Tensor>(int64_t)> args,
        ExecOptions options = {}) {
    llvm::SmallVector<llvm::SmallVector<Tensor>> perRank;
    for (int64_t rank = 0; rank < mesh.getNumRanks(); ++rank)
      perRank.push_back(args(rank));
    auto results = runSpmd(function(name), mesh, perRank, options);
    if (failed(results)) {
      ADD_FAILURE() << "runSpmd failed: " << errors;
      return {};
    }
    return *results;
  }

  mlir::MLIRContext context;
  std::string errors;
  mlir::ScopedDiagnosticHandler handler{&context, [this](mlir::Diagnostic &d) {
                                          errors += d.str() + "\n";
                                          return mlir::success();
                                        }};
  mlir::OwningOpRef<mlir::ModuleOp> module;
  MeshOp mesh;
};

std::string rankName(int64_t rank) { return "rank " + std::to_string(rank); }

//===----------------------------------------------------------------------===//
// Mesh arithmetic
//===----------------------------------------------------------------------===//

TEST_F(SpmdTest, MeshLayoutMatchesTheDesignFormula) {
  parse(R"mlir(ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 3, 4])mlir");
  ASSERT_EQ(mesh.getNumRanks(), 24);
  EXPECT_EQ(mesh.getAxisSize("dp"), 3);
  EXPECT_EQ(mesh.getAxisSize("ep"), std::nullopt);
  // DESIGN.md §3, as the runtime computes it.
  Mesh layout{/*dp=*/3, /*tp=*/4, /*pp=*/2};
  for (int64_t pp = 0; pp < 2; ++pp)
    for (int64_t dp = 0; dp < 3; ++dp)
      for (int64_t tp = 0; tp < 4; ++tp) {
        int64_t rank = layout.rank(dp, tp, pp);
        EXPECT_EQ(mesh.getRankAt({pp, dp, tp}), rank);
        EXPECT_EQ(mesh.getCoordinates(rank), (llvm::SmallVector<int64_t>{pp, dp, tp}));
        EXPECT_EQ(mesh.getCoordinate(rank, "tp"), tp);
        EXPECT_EQ(*mesh.getIndexInGroup(rank, {"dp", "tp"}), dp * 4 + tp);
      }
}

TEST_F(SpmdTest, GroupsShareEveryOtherCoordinate) {
  parse(R"mlir(ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4])mlir");
  using Ranks = llvm::SmallVector<int64_t>;
  EXPECT_EQ(*mesh.getGroup(5, {"tp"}), (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(*mesh.getGroup(5, {"dp"}), (Ranks{1, 5}));
  EXPECT_EQ(*mesh.getGroup(5, {"dp", "tp"}), (Ranks{0, 1, 2, 3, 4, 5, 6, 7}));
  // Listing tp first makes tp the major axis of the group order.
  EXPECT_EQ(*mesh.getGroup(5, {"tp", "dp"}), (Ranks{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(*mesh.getGroup(5, {}), (Ranks{5}));
  EXPECT_EQ(*mesh.getGroupSize({"dp", "tp"}), 8);
  EXPECT_EQ(*mesh.getIndexInGroup(6, {"tp", "dp"}), 2 * 2 + 1);
  EXPECT_TRUE(failed(mesh.getGroup(5, {"pp"})));
  EXPECT_TRUE(failed(mesh.getGroup(5, {"tp", "tp"})));
}

TEST_F(SpmdTest, ShardingAttrAccessors) {
  parse(R"mlir(ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4])mlir");
  auto sharding = ShardingAttr::get(&context, "mesh", {{"dp"}, {}, {"tp"}}, {});
  EXPECT_EQ(sharding.getRank(), 3u);
  EXPECT_EQ(sharding.getDimOfAxis("tp"), 2u);
  EXPECT_EQ(sharding.getDimOfAxis("pp"), std::nullopt);
  EXPECT_FALSE(sharding.isReplicated());
  EXPECT_EQ(*sharding.getLocalShape(mesh, {4, 3, 8}), (llvm::SmallVector<int64_t>{2, 3, 2}));
  EXPECT_TRUE(failed(sharding.getLocalShape(mesh, {4, 3, 6})));

  auto partial = ShardingAttr::get(&context, "mesh", {{}, {}}, {"tp"});
  EXPECT_TRUE(partial.isPartialOver("tp"));
  EXPECT_FALSE(partial.isReplicated());
  EXPECT_TRUE(ShardingAttr::get(&context, "mesh", {{}}).isReplicated());

  std::string printed;
  llvm::raw_string_ostream(printed) << partial;
  EXPECT_EQ(printed, "#ppc.sharding<@mesh, [[], []], partial = [tp]>");
}

TEST_F(SpmdTest, CollectiveBuildersTakePlainValues) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
    func.func @f(%x: tensor<4x2xf32>) {
      return
    })mlir");
  mlir::func::FuncOp f = function("f");
  mlir::OpBuilder b(f.getBody().front().getTerminator());
  mlir::Location loc = b.getUnknownLoc();
  mlir::Value x = f.getArgument(0);
  auto type = [&](llvm::ArrayRef<int64_t> shape) {
    return mlir::RankedTensorType::get(shape, b.getF32Type());
  };
  auto meshRef = mlir::FlatSymbolRefAttr::get(&context, "mesh");
  mlir::ArrayAttr tp = b.getStrArrayAttr({"tp"});
  b.create<AllReduceOp>(loc, x.getType(), x, meshRef, tp, ReductionKind::Max);
  b.create<AllGatherOp>(loc, type({4, 4}), x, meshRef, tp, 1);
  b.create<AllSliceOp>(loc, type({2, 2}), x, meshRef, tp, 0);
  b.create<ReduceScatterOp>(loc, type({4, 1}), x, meshRef, tp, 1, ReductionKind::Sum);
  b.create<AllToAllOp>(loc, type({8, 1}), x, meshRef, tp, 1, 0);
  b.create<AxisIndexOp>(loc, meshRef, b.getStrArrayAttr({"dp", "tp"}));
  ASSERT_TRUE(succeeded(mlir::verify(*module))) << errors;

  std::string printed;
  llvm::raw_string_ostream os(printed);
  f.print(os);
  for (llvm::StringRef expected :
       {"ppc.all_reduce %arg0 on @mesh[\"tp\"] max : tensor<4x2xf32>",
        "ppc.all_gather %arg0 on @mesh[\"tp\"] dim = 1 : tensor<4x2xf32> -> "
        "tensor<4x4xf32>",
        "ppc.all_slice %arg0 on @mesh[\"tp\"] dim = 0 : tensor<4x2xf32> -> "
        "tensor<2x2xf32>",
        "ppc.reduce_scatter %arg0 on @mesh[\"tp\"] dim = 1 sum : "
        "tensor<4x2xf32> -> tensor<4x1xf32>",
        "ppc.all_to_all %arg0 on @mesh[\"tp\"] split = 1 concat = 0 : "
        "tensor<4x2xf32> -> tensor<8x1xf32>",
        "ppc.axis_index on @mesh[\"dp\", \"tp\"] : tensor<i64>"})
    EXPECT_NE(printed.find(expected.str()), std::string::npos) << expected.str() << "\n" << printed;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

TEST_F(SpmdTest, AllReduceCombinesEachGroupOnly) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
    func.func @f(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
      %0 = ppc.all_reduce %x on @mesh["tp"] sum : tensor<2xf32>
      %1 = ppc.all_reduce %x on @mesh["dp"] max : tensor<2xf32>
      %2 = ppc.all_reduce %x on @mesh["dp", "tp"] sum : tensor<2xf32>
      return %0, %1, %2 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
    })mlir");
  // Rank r holds [r, -10 r]; tp groups are {0, 1} and {2, 3}, dp groups
  // {0, 2} and {1, 3}.
  auto results = runOk("f", [](int64_t r) {
    return llvm::SmallVector<Tensor>{makeTensor(DType::F32, {2}, {double(r), -10.0 * r})};
  });
  ASSERT_EQ(results.size(), 4u);
  double tpSum[4][2] = {{1, -10}, {1, -10}, {5, -50}, {5, -50}};
  double dpMax[4][2] = {{2, 0}, {3, -10}, {2, 0}, {3, -10}};
  for (int64_t r = 0; r < 4; ++r) {
    expectValues(results[r][0], {2}, tpSum[r], rankName(r) + " tp sum");
    expectValues(results[r][1], {2}, dpMax[r], rankName(r) + " dp max");
    expectValues(results[r][2], {2}, {6, -60}, rankName(r) + " all sum");
  }
}

TEST_F(SpmdTest, AllReduceSumsInDoubleAndRoundsOnce) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
    func.func @f(%x: tensor<1xf32>, %i: tensor<1xi32>) -> (tensor<1xf32>, tensor<1xi32>) {
      %0 = ppc.all_reduce %x on @mesh["dp", "tp"] sum : tensor<1xf32>
      %1 = ppc.all_reduce %i on @mesh["tp"] sum : tensor<1xi32>
      return %0, %1 : tensor<1xf32>, tensor<1xi32>
    })mlir");
  // 1 + 2^-24 + 2^-24 in f32 steps stays 1 (ties to even); in double it is
  // 1 + 2^-23, which f32 holds. i32 sums wrap around.
  double tiny = std::ldexp(1.0, -24);
  double xs[4] = {1, tiny, tiny, 0};
  double is[4] = {2147483647, 1, 5, 6};
  auto results = runOk("f", [&](int64_t r) {
    return llvm::SmallVector<Tensor>{makeTensor(DType::F32, {1}, {xs[r]}),
                                     makeTensor(DType::I32, {1}, {is[r]})};
  });
  ASSERT_EQ(results.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    expectValues(results[r][0], {1}, {1 + 2 * tiny}, rankName(r));
    EXPECT_EQ(results[r][1].dtype(), DType::I32);
    EXPECT_EQ(results[r][1].ints()[0], r < 2 ? -2147483648LL : 11) << rankName(r);
  }
}

TEST_F(SpmdTest, AllGatherConcatenatesInGroupOrder) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4]
    func.func @f(%x: tensor<1x2xf32>) -> (tensor<1x8xf32>, tensor<2x2xf32>, tensor<8x2xf32>) {
      %0 = ppc.all_gather %x on @mesh["tp"] dim = 1 : tensor<1x2xf32> -> tensor<1x8xf32>
      %1 = ppc.all_gather %x on @mesh["dp"] dim = 0 : tensor<1x2xf32> -> tensor<2x2xf32>
      %2 = ppc.all_gather %x on @mesh["tp", "dp"] dim = 0 : tensor<1x2xf32> -> tensor<8x2xf32>
      return %0, %1, %2 : tensor<1x8xf32>, tensor<2x2xf32>, tensor<8x2xf32>
    })mlir");
  // Rank r holds [[r, r + 0.5]].
  auto results = runOk("f", [](int64_t r) {
    return llvm::SmallVector<Tensor>{makeTensor(DType::F32, {1, 2}, {double(r), r + 0.5})};
  });
  ASSERT_EQ(results.size(), 8u);
  for (int64_t r = 0; r < 8; ++r) {
    int64_t base = r / 4 * 4, tp = r % 4;
    expectValues(results[r][0], {1, 8},
                 {double(base), base + 0.5, base + 1.0, base + 1.5, base + 2.0, base + 2.5,
                  base + 3.0, base + 3.5},
                 rankName(r) + " tp");
    expectValues(results[r][1], {2, 2}, {double(tp), tp + 0.5, tp + 4.0, tp + 4.5},
                 rankName(r) + " dp");
    // Group order over [tp, dp]: ranks 0, 4, 1, 5, 2, 6, 3, 7.
    expectValues(results[r][2], {8, 2},
                 {0, 0.5, 4, 4.5, 1, 1.5, 5, 5.5, 2, 2.5, 6, 6.5, 3, 3.5, 7, 7.5},
                 rankName(r) + " tp, dp");
  }
}

TEST_F(SpmdTest, ReduceScatterKeepsEachRanksBlockOfTheSum) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
    func.func @f(%x: tensor<4x1xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>) {
      %0 = ppc.reduce_scatter %x on @mesh["dp"] dim = 0 sum : tensor<4x1xf32> -> tensor<2x1xf32>
      %1 = ppc.reduce_scatter %x on @mesh["tp"] dim = 0 max : tensor<4x1xf32> -> tensor<2x1xf32>
      return %0, %1 : tensor<2x1xf32>, tensor<2x1xf32>
    })mlir");
  // Rank r holds 10 r + i at row i. dp groups {0, 2} sum to 20 + 2i and
  // {1, 3} to 40 + 2i; tp groups {0, 1} have the maximum 10 + i and {2, 3}
  // 30 + i. Position 0 keeps rows 0-1, position 1 rows 2-3.
  auto results = runOk("f", [](int64_t r) {
    return llvm::SmallVector<Tensor>{
        makeTensor(DType::F32, {4, 1}, {10.0 * r, 10.0 * r + 1, 10.0 * r + 2, 10.0 * r + 3})};
  });
  ASSERT_EQ(results.size(), 4u);
  double sums[4][2] = {{20, 22}, {40, 42}, {24, 26}, {44, 46}};
  double maxima[4][2] = {{10, 11}, {12, 13}, {30, 31}, {32, 33}};
  for (int64_t r = 0; r < 4; ++r) {
    expectValues(results[r][0], {2, 1}, sums[r], rankName(r) + " dp sum");
    expectValues(results[r][1], {2, 1}, maxima[r], rankName(r) + " tp max");
  }
}

TEST_F(SpmdTest, AllToAllExchangesBlocks) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
    func.func @f(%x: tensor<2x4xf32>) -> (tensor<4x2xf32>, tensor<2x4xf32>) {
      %0 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 0 : tensor<2x4xf32> -> tensor<4x2xf32>
      %1 = ppc.all_to_all %x on @mesh["dp"] split = 1 concat = 1 : tensor<2x4xf32> -> tensor<2x4xf32>
      return %0, %1 : tensor<4x2xf32>, tensor<2x4xf32>
    })mlir");
  // Rank r holds 100 r + 10 i + j. The rank at position p of its group gets
  // columns [2p, 2p + 2) of every sender, stacked in sender order.
  auto results = runOk("f", [](int64_t r) {
    llvm::SmallVector<double> values;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        values.push_back(100.0 * r + 10 * i + j);
    return llvm::SmallVector<Tensor>{makeTensor(DType::F32, {2, 4}, values)};
  });
  ASSERT_EQ(results.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    int64_t first = r / 2 * 2, p = r % 2;
    double a = 100.0 * first + 2 * p, b = a + 100;
    expectValues(results[r][0], {4, 2}, {a, a + 1, a + 10, a + 11, b, b + 1, b + 10, b + 11},
                 rankName(r) + " tp");
    // dp groups {0, 2} and {1, 3}: columns of the dp sender, side by side.
    int64_t low = r % 2, q = r / 2;
    double c = 100.0 * low + 2 * q, d = c + 200;
    expectValues(results[r][1], {2, 4}, {c, c + 1, d, d + 1, c + 10, c + 11, d + 10, d + 11},
                 rankName(r) + " dp");
  }
}

TEST_F(SpmdTest, AxisIndexAndAllSliceFollowGroupOrder) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4]
    func.func @f(%x: tensor<8xi64>) -> (tensor<i64>, tensor<i64>, tensor<i64>, tensor<i64>, tensor<2xi64>) {
      %0 = ppc.axis_index on @mesh["tp"] : tensor<i64>
      %1 = ppc.axis_index on @mesh["dp"] : tensor<i64>
      %2 = ppc.axis_index on @mesh["tp", "dp"] : tensor<i64>
      %3 = ppc.axis_index on @mesh[] : tensor<i64>
      %4 = ppc.all_slice %x on @mesh["tp"] dim = 0 : tensor<8xi64> -> tensor<2xi64>
      return %0, %1, %2, %3, %4 : tensor<i64>, tensor<i64>, tensor<i64>, tensor<i64>, tensor<2xi64>
    })mlir");
  auto results = runOk("f", [](int64_t) {
    return llvm::SmallVector<Tensor>{makeTensor(DType::I64, {8}, {0, 1, 2, 3, 4, 5, 6, 7})};
  });
  ASSERT_EQ(results.size(), 8u);
  for (int64_t r = 0; r < 8; ++r) {
    int64_t dp = r / 4, tp = r % 4;
    EXPECT_EQ(results[r][0].dtype(), DType::I64);
    EXPECT_EQ(results[r][0].ints()[0], tp) << rankName(r);
    EXPECT_EQ(results[r][1].ints()[0], dp) << rankName(r);
    EXPECT_EQ(results[r][2].ints()[0], tp * 2 + dp) << rankName(r);
    EXPECT_EQ(results[r][3].ints()[0], 0) << rankName(r);
    expectValues(results[r][4], {2}, {2.0 * tp, 2.0 * tp + 1}, rankName(r) + " slice");
  }
}

TEST_F(SpmdTest, OrdinaryOpsRunOnEachRanksValues) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["tp"] shape = [2]
    func.func @f(%x: tensor<2xf64>) -> tensor<2xf64> {
      %i = ppc.axis_index on @mesh["tp"] : tensor<i64>
      %f = ppc.cast %i : tensor<i64> -> tensor<f64>
      %y = ppc.mul %x, %f : (tensor<2xf64>, tensor<f64>) -> tensor<2xf64>
      return %y : tensor<2xf64>
    })mlir");
  auto results = runOk("f", [](int64_t r) {
    return llvm::SmallVector<Tensor>{makeTensor(DType::F64, {2}, {1.5 + r, -2.0})};
  });
  ASSERT_EQ(results.size(), 2u);
  expectValues(results[0][0], {2}, {0, 0}, rankName(0));
  expectValues(results[1][0], {2}, {2.5, -2}, rankName(1));
}

//===----------------------------------------------------------------------===//
// Partitioned programs against the unpartitioned one
//===----------------------------------------------------------------------===//

constexpr llvm::StringLiteral kMatmulModule = R"mlir(
  ppc.mesh @mesh axes = ["tp"] shape = [2]
  func.func @full(%x: tensor<3x4xf32>, %w: tensor<4x6xf32>) -> tensor<3x6xf32> {
    %y = ppc.matmul %x, %w : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
    return %y : tensor<3x6xf32>
  }
  // Megatron's column-parallel linear layer, its output gathered.
  func.func @column(%x: tensor<3x4xf32>, %w: tensor<4x3xf32>) -> tensor<3x6xf32> {
    %y = ppc.matmul %x, %w : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
    %g = ppc.all_gather %y on @mesh["tp"] dim = 1 : tensor<3x3xf32> -> tensor<3x6xf32>
    return %g : tensor<3x6xf32>
  }
  // The row-parallel layer: partial sums over the split inner dimension.
  func.func @row(%x: tensor<3x2xf32>, %w: tensor<2x6xf32>) -> (tensor<3x6xf32>, tensor<3x6xf32>) {
    %p = ppc.matmul %x, %w : (tensor<3x2xf32>, tensor<2x6xf32>) -> tensor<3x6xf32>
    %y = ppc.all_reduce %p on @mesh["tp"] sum : tensor<3x6xf32>
    return %y, %p : tensor<3x6xf32>, tensor<3x6xf32>
  }
)mlir";

/// Deterministic values with fractional parts, different per element.
Tensor values(llvm::ArrayRef<int64_t> shape, double seed, DType dtype = DType::F32) {
  Tensor tensor(dtype, shape);
  for (int64_t i = 0; i < tensor.numElements(); ++i)
    tensor.setDouble(i, std::sin(seed + 0.7 * i) * 3);
  return tensor;
}

TEST_F(SpmdTest, ColumnParallelMatmulWithAllGatherEqualsTheFullMatmul) {
  parse(kMatmulModule);
  Tensor x = values({3, 4}, 1), w = values({4, 6}, 2);
  auto full = runFunction(function("full"), {x, w}, ExecOptions{});
  ASSERT_TRUE(succeeded(full)) << errors;

  auto columns = ShardingAttr::get(&context, "mesh", {{}, {"tp"}});
  auto replicated = ShardingAttr::get(&context, "mesh", {{}, {}});
  auto results = runOk("column", [&](int64_t r) {
    llvm::Expected<Tensor> xr = shardTensor(x, replicated, mesh, r);
    llvm::Expected<Tensor> wr = shardTensor(w, columns, mesh, r);
    EXPECT_TRUE(xr && wr);
    return llvm::SmallVector<Tensor>{*xr, *wr};
  });
  ASSERT_EQ(results.size(), 2u);
  // Every output element is the same dot product, rounded once: equal.
  for (int64_t r = 0; r < 2; ++r)
    expectValues(results[r][0], {3, 6}, (*full)[0].floats(), rankName(r));
}

TEST_F(SpmdTest, RowParallelMatmulWithAllReduceMatchesTheFullMatmul) {
  parse(kMatmulModule);
  ExecOptions f64;
  f64.f64 = true;
  Tensor x = values({3, 4}, 3, DType::F64), w = values({4, 6}, 4, DType::F64);
  auto full = runFunction(function("full"), {x, w}, f64);
  ASSERT_TRUE(succeeded(full)) << errors;

  auto xSharding = ShardingAttr::get(&context, "mesh", {{}, {"tp"}});
  auto wSharding = ShardingAttr::get(&context, "mesh", {{"tp"}, {}});
  auto results = runOk(
      "row",
      [&](int64_t r) {
        llvm::Expected<Tensor> xr = shardTensor(x, xSharding, mesh, r);
        llvm::Expected<Tensor> wr = shardTensor(w, wSharding, mesh, r);
        EXPECT_TRUE(xr && wr);
        return llvm::SmallVector<Tensor>{*xr, *wr};
      },
      f64);
  ASSERT_EQ(results.size(), 2u);
  // The partial products unshard (summed over tp) to the full product too.
  auto partial = ShardingAttr::get(&context, "mesh", {{}, {}}, {"tp"});
  llvm::Expected<Tensor> summed = unshardTensor({results[0][1], results[1][1]}, partial, mesh);
  ASSERT_TRUE(bool(summed)) << llvm::toString(summed.takeError());
  for (int64_t i = 0; i < 18; ++i) {
    double expected = (*full)[0].floats()[i];
    for (int64_t r = 0; r < 2; ++r)
      EXPECT_NEAR(results[r][0].floats()[i], expected, 1e-12) << rankName(r) << " " << i;
    EXPECT_NEAR(summed->floats()[i], expected, 1e-12) << i;
  }
}

TEST_F(SpmdTest, ShardAndUnshardAreInverse) {
  parse(R"mlir(ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2])mlir");
  Tensor global =
      makeTensor(DType::F32, {4, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  auto both = ShardingAttr::get(&context, "mesh", {{"dp"}, {"tp"}});
  auto merged = ShardingAttr::get(&context, "mesh", {{"tp", "dp"}, {}});
  // Rank 1 is dp 0, tp 1: rows 0-1, columns 2-3.
  llvm::Expected<Tensor> block = shardTensor(global, both, mesh, 1);
  ASSERT_TRUE(bool(block));
  expectValues(*block, {2, 2}, {2, 3, 6, 7}, "rank 1 block");
  // Over [tp, dp], rank 1 (tp 1, dp 0) holds row block 1 * 2 + 0 = 2.
  llvm::Expected<Tensor> row = shardTensor(global, merged, mesh, 1);
  ASSERT_TRUE(bool(row));
  expectValues(*row, {1, 4}, {8, 9, 10, 11}, "rank 1 row");
  for (ShardingAttr sharding : {both, merged}) {
    llvm::SmallVector<Tensor> locals;
    for (int64_t r = 0; r < 4; ++r)
      locals.push_back(*shardTensor(global, sharding, mesh, r));
    llvm::Expected<Tensor> back = unshardTensor(locals, sharding, mesh);
    ASSERT_TRUE(bool(back));
    expectValues(*back, {4, 4}, global.floats(), "round trip");
  }
  llvm::Expected<Tensor> uneven =
      shardTensor(makeTensor(DType::F32, {3}, {1, 2, 3}),
                  ShardingAttr::get(&context, "mesh", {{"tp"}}), mesh, 0);
  ASSERT_FALSE(bool(uneven));
  EXPECT_NE(llvm::toString(uneven.takeError()).find("does not fit"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_F(SpmdTest, AKernelFailureNamesTheRank) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["tp"] shape = [2]
    func.func @f(%table: tensor<4x2xf32>, %ids: tensor<1xi64>) -> tensor<1x2xf32> {
      %0 = ppc.gather %table[%ids] axis = 0 : (tensor<4x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
      return %0 : tensor<1x2xf32>
    })mlir");
  Tensor table(DType::F32, {4, 2});
  llvm::SmallVector<llvm::SmallVector<Tensor>> args = {{table, makeTensor(DType::I64, {1}, {3})},
                                                       {table, makeTensor(DType::I64, {1}, {7})}};
  EXPECT_TRUE(failed(runSpmd(function("f"), mesh, args, ExecOptions{})));
  EXPECT_NE(errors.find("gather index 7 out of range [-4, 4) (rank 1)"), std::string::npos)
      << errors;
}

TEST_F(SpmdTest, ArgumentsMustCoverEveryRank) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["tp"] shape = [2]
    func.func @f(%x: tensor<1xf32>) -> tensor<1xf32> {
      return %x : tensor<1xf32>
    })mlir");
  llvm::SmallVector<llvm::SmallVector<Tensor>> one = {{Tensor(DType::F32, {1})}};
  EXPECT_TRUE(failed(runSpmd(function("f"), mesh, one, ExecOptions{})));
  EXPECT_NE(errors.find("mesh @mesh has 2 ranks, but arguments were given for 1"),
            std::string::npos)
      << errors;
}

} // namespace
