//===- PartitionTest.cpp - partitioned ops against the whole op -----------===//
//
// Each test is a small @train_step whose arguments carry the layouts a plan
// would give them. It runs whole on the reference executor in f64, then
// through `ppc-partition` on every rank of the mesh (`runSpmd`, arguments
// sharded by their layouts); the results, returned whole by the
// partitioned program, must match on every rank. This covers the ops whose
// sharded form is not a clone of the op (LocalForms.cpp): the vocabulary-
// parallel gather, softmax and nll_loss, and means over split dimensions.
// ShardingRulesTest covers every other rule factor by factor.
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "executor/Spmd.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using namespace ppc;

namespace {

constexpr double kTolerance = 1e-12;

class PartitionTest : public ::testing::Test {
protected:
  PartitionTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  Tensor uniform(llvm::ArrayRef<int64_t> shape) {
    Tensor t(DType::F64, shape);
    for (double &v : t.floats())
      v = std::uniform_real_distribution<double>(-2, 2)(rng);
    return t;
  }
  Tensor ints(llvm::ArrayRef<int64_t> shape, int64_t lo, int64_t hi) {
    Tensor t(DType::I64, shape);
    for (int64_t e = 0; e < t.numElements(); ++e)
      t.setInt(e, std::uniform_int_distribution<int64_t>(lo, hi - 1)(rng));
    return t;
  }

  /// Partitions `source` (an @train_step) for a dp x tp mesh and checks that
  /// every rank returns what the whole program does. Returns the
  /// partitioner's errors ("" on success).
  std::string partitionError(llvm::StringRef source, int64_t dp, int64_t tp,
                             llvm::ArrayRef<Tensor> args) {
    errors.clear();
    std::string text = "ppc.mesh @mesh axes = [\"pp\", \"dp\", \"tp\"] shape = [1, " +
                       std::to_string(dp) + ", " + std::to_string(tp) + "]\n" + source.str();
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
    if (!module)
      return "cannot parse: " + errors;
    OwningOpRef<ModuleOp> whole = module->clone();
    auto step = whole->lookupSymbol<func::FuncOp>("train_step");
    ExecOptions f64;
    f64.f64 = true;
    auto expected = runFunction(step, args, f64);
    if (failed(expected))
      return "the whole program failed: " + errors;

    PassManager pm(&context);
    PartitionOptions options;
    options.dataParallel = dp;
    options.tensorParallel = tp;
    pm.addPass(createPartition(options));
    if (failed(pm.run(*module)))
      return errors.empty() ? "partitioning failed" : errors;
    auto spmd = module->lookupSymbol<func::FuncOp>("train_step");
    auto mesh = module->lookupSymbol<MeshOp>("mesh");
    llvm::SmallVector<llvm::SmallVector<Tensor>> perRank(mesh.getNumRanks());
    for (int64_t rank = 0; rank < mesh.getNumRanks(); ++rank)
      for (auto [i, arg] : llvm::enumerate(args)) {
        auto sharding = spmd.getArgAttrOfType<ShardingAttr>(i, "ppc.sharding");
        llvm::Expected<Tensor> local = shardTensor(arg, sharding, mesh, rank);
        if (!local)
          return llvm::toString(local.takeError());
        perRank[rank].push_back(*local);
      }
    auto results = runSpmd(spmd, mesh, perRank, f64);
    if (failed(results))
      return "the partitioned program failed: " + errors;
    for (int64_t rank = 0; rank < mesh.getNumRanks(); ++rank)
      for (auto [r, want] : llvm::enumerate(*expected)) {
        const Tensor &got = (*results)[rank][r];
        EXPECT_EQ(got.shape(), want.shape()) << "rank " << rank << " result " << r;
        if (got.shape() != want.shape())
          continue;
        for (int64_t e = 0; e < want.numElements(); ++e)
          EXPECT_NEAR(got.getDouble(e), want.getDouble(e),
                      kTolerance * (1 + std::abs(want.getDouble(e))))
              << "rank " << rank << " result " << r << " element " << e;
      }
    return "";
  }

  void expectPartitions(llvm::StringRef source, int64_t dp, int64_t tp,
                        llvm::ArrayRef<Tensor> args) {
    EXPECT_EQ(partitionError(source, dp, tp, args), "") << source.str();
  }

  MLIRContext context;
  std::string errors;
  ScopedDiagnosticHandler handler{&context, [this](Diagnostic &d) {
                                    errors += d.str() + "\n";
                                    return success();
                                  }};
  std::mt19937_64 rng{20261121};
};

/// An @train_step of one op `body` (its result %y) with the arguments'
/// types and layouts.
std::string step(llvm::ArrayRef<std::pair<std::string, std::string>> args,
                 const std::string &resultType, const std::string &body) {
  std::string text = "func.func @train_step(";
  for (auto [i, arg] : llvm::enumerate(args))
    text += (i ? ", " : "") + ("%a" + std::to_string(i)) + ": " + arg.first +
            " {ppc.sharding = #ppc.sharding<@mesh, " + arg.second + ">}";
  text += ") -> (" + resultType + " {ppc.output = \"y\"}) {\n  " + body +
          "\n  return %y : " + resultType + "\n}\n";
  return text;
}

TEST_F(PartitionTest, VocabularyParallelGather) {
  std::string gather = "%y = ppc.gather %a0[%a1] axis = 0 : (tensor<8x3xf32>, "
                       "tensor<4x5xi64>) -> tensor<4x5x3xf32>";
  // Rows split contiguously and in two blocks; indices split over dp too;
  // negative indices count from the end.
  for (const char *rows : {"[[tp], []]", "[2 * [tp], []]"})
    for (auto [dp, tp, indices] :
         {std::tuple{1, 2, "[[], []]"}, {2, 2, "[[dp], []]"}, {1, 4, "[[], []]"}}) {
      SCOPED_TRACE(std::string(rows) + " " + std::to_string(dp) + "x" + std::to_string(tp));
      expectPartitions(step({{"tensor<8x3xf32>", rows}, {"tensor<4x5xi64>", indices}},
                            "tensor<4x5x3xf32>", gather),
                       dp, tp, {uniform({8, 3}), ints({4, 5}, -8, 8)});
    }
  // A gather along a later axis.
  expectPartitions(step({{"tensor<3x8xf32>", "[[], [tp]]"}, {"tensor<5xi64>", "[[]]"}},
                        "tensor<3x5xf32>",
                        "%y = ppc.gather %a0[%a1] axis = 1 : (tensor<3x8xf32>, "
                        "tensor<5xi64>) -> tensor<3x5xf32>"),
                   1, 2, {uniform({3, 8}), ints({5}, 0, 8)});
}

TEST_F(PartitionTest, SoftmaxOverASplitAxis) {
  for (const char *op : {"softmax", "log_softmax"})
    for (auto [dp, tp, layout] :
         {std::tuple{1, 2, "[[], [tp]]"}, {2, 2, "[[dp], [tp]]"}, {1, 4, "[[], [tp]]"}}) {
      SCOPED_TRACE(std::string(op) + " " + layout);
      expectPartitions(step({{"tensor<4x8xf32>", layout}}, "tensor<4x8xf32>",
                            std::string("%y = ppc.") + op + " %a0 axis = 1 : tensor<4x8xf32>"),
                       dp, tp, {uniform({4, 8})});
    }
}

TEST_F(PartitionTest, NllLossOverSplitClassesAndBatch) {
  auto nll = [](const std::string &reduction, const std::string &resultType) {
    return "%y = ppc.nll_loss %a0, %a1 " + reduction + " : (tensor<6x8xf32>, tensor<6xi64>) -> " +
           resultType;
  };
  Tensor input = uniform({6, 8});
  // Class 2 is common, so some shards ignore more targets than others.
  Tensor target = ints({6}, 0, 8);
  target.setInt(1, 2);
  target.setInt(4, 2);
  for (auto [dp, tp, inputLayout, targetLayout] : {std::tuple{1, 2, "[[], [tp]]", "[[]]"},
                                                   {2, 2, "[[dp], [tp]]", "[[dp]]"},
                                                   {2, 1, "[[dp], []]", "[[dp]]"},
                                                   {1, 2, "[[], 2 * [tp]]", "[[]]"}}) {
    for (auto [reduction, resultType] : {std::pair{"mean", "tensor<f32>"},
                                         {"mean ignore_index = 2", "tensor<f32>"},
                                         {"sum ignore_index = 2", "tensor<f32>"},
                                         {"sum", "tensor<f32>"},
                                         {"none ignore_index = 5", "tensor<6xf32>"}}) {
      SCOPED_TRACE(std::string(reduction) + " " + inputLayout);
      expectPartitions(step({{"tensor<6x8xf32>", inputLayout}, {"tensor<6xi64>", targetLayout}},
                            resultType, nll(reduction, resultType)),
                       dp, tp, {input, target});
    }
  }
  // Class weights split with the classes (a sum), or whole over a split
  // batch (a mean).
  expectPartitions(step({{"tensor<6x8xf32>", "[[], [tp]]"},
                         {"tensor<6xi64>", "[[]]"},
                         {"tensor<8xf32>", "[[tp]]"}},
                        "tensor<f32>",
                        "%y = ppc.nll_loss %a0, %a1, %a2 sum : (tensor<6x8xf32>, "
                        "tensor<6xi64>, tensor<8xf32>) -> tensor<f32>"),
                   1, 2, {input, target, uniform({8})});
  expectPartitions(step({{"tensor<6x8xf32>", "[[dp], []]"},
                         {"tensor<6xi64>", "[[dp]]"},
                         {"tensor<8xf32>", "[[]]"}},
                        "tensor<f32>",
                        "%y = ppc.nll_loss %a0, %a1, %a2 mean ignore_index = 2 : "
                        "(tensor<6x8xf32>, tensor<6xi64>, tensor<8xf32>) -> tensor<f32>"),
                   2, 1, {input, target, uniform({8})});
  // A weighted mean over split classes is refused by name.
  std::string error =
      partitionError(step({{"tensor<6x8xf32>", "[[], [tp]]"},
                           {"tensor<6xi64>", "[[]]"},
                           {"tensor<8xf32>", "[[tp]]"}},
                          "tensor<f32>",
                          "%y = ppc.nll_loss %a0, %a1, %a2 mean : (tensor<6x8xf32>, tensor<6xi64>, "
                          "tensor<8xf32>) -> tensor<f32>"),
                     1, 2, {input, target, uniform({8})});
  EXPECT_NE(error.find("a weighted mean nll_loss with its classes split over [tp] is not "
                       "partitioned yet"),
            std::string::npos)
      << error;
}

TEST_F(PartitionTest, VocabularyParallelCrossEntropy) {
  // log_softmax + nll_loss over logits split by class, batch over dp.
  std::string body = R"mlir(%l = ppc.log_softmax %a0 axis = 1 : tensor<6x8xf32>
  %y = ppc.nll_loss %l, %a1 mean : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>)mlir";
  for (auto [dp, tp, inputLayout, targetLayout] :
       {std::tuple{1, 4, "[[], [tp]]", "[[]]"}, {2, 2, "[[dp], [tp]]", "[[dp]]"}})
    expectPartitions(step({{"tensor<6x8xf32>", inputLayout}, {"tensor<6xi64>", targetLayout}},
                          "tensor<f32>", body),
                     dp, tp, {uniform({6, 8}), ints({6}, 0, 8)});
}

TEST_F(PartitionTest, MeanOverASplitDimension) {
  expectPartitions(step({{"tensor<4x6xf32>", "[[dp], [tp]]"}}, "tensor<4x1xf32>",
                        "%y = ppc.reduce_mean %a0 axes = [1] keepdims = true : "
                        "(tensor<4x6xf32>) -> tensor<4x1xf32>"),
                   2, 2, {uniform({4, 6})});
  expectPartitions(step({{"tensor<4x6xf32>", "[[dp], [tp]]"}}, "tensor<f32>",
                        "%y = ppc.reduce_mean %a0 axes = [0, 1] keepdims = false : "
                        "(tensor<4x6xf32>) -> tensor<f32>"),
                   2, 2, {uniform({4, 6})});
}

} // namespace
