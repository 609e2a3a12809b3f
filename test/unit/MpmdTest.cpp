//===- MpmdTest.cpp - send/recv and ranks running different programs -----===//
//
// Each test parses a module with a small mesh and one function per pipeline
// stage, runs every rank's program with `runMesh` and compares with values
// worked out by hand, or checks the error a broken program gets.
//
//===----------------------------------------------------------------------===//

#include "executor/Spmd.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "test/unit/TestTensors.h"

#include <gtest/gtest.h>

using namespace ppc;
using ppc::test::expectValues;
using ppc::test::makeTensor;

namespace {

Tensor f32(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<double> values) {
  return makeTensor(DType::F32, shape, values);
}

std::string rankName(int64_t rank) { return "rank " + std::to_string(rank); }

using Results = llvm::SmallVector<llvm::SmallVector<Tensor>>;

class MpmdTest : public ::testing::Test {
protected:
  MpmdTest() { context.loadDialect<PpcDialect, mlir::func::FuncDialect>(); }

  /// Parses and verifies `source` (a mesh and functions); the mesh is
  /// `@mesh`.
  void parse(llvm::StringRef source) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    ASSERT_TRUE(module) << "cannot parse:\n" << source.str() << "\n" << errors;
    mesh = module->lookupSymbol<MeshOp>("mesh");
    ASSERT_TRUE(mesh) << "no @mesh";
  }

  mlir::func::FuncOp function(llvm::StringRef name) {
    auto func = module->lookupSymbol<mlir::func::FuncOp>(name);
    EXPECT_TRUE(func) << "no @" << name.str();
    return func;
  }

  /// The function of each rank: `stages[i]` runs on the ranks whose
  /// coordinate on pp is i.
  llvm::SmallVector<mlir::func::FuncOp> programs(llvm::ArrayRef<llvm::StringRef> stages) {
    llvm::SmallVector<mlir::func::FuncOp> programOfRank;
    for (int64_t rank = 0; rank < mesh.getNumRanks(); ++rank)
      programOfRank.push_back(function(stages[*mesh.getCoordinate(rank, "pp")]));
    return programOfRank;
  }

  mlir::FailureOr<Results> run(llvm::ArrayRef<llvm::StringRef> stages, const Results &args,
                               llvm::SmallVectorImpl<int64_t> *peakBytes = nullptr) {
    return runMesh(programs(stages), mesh, args, ExecOptions{}, peakBytes);
  }

  Results runOk(llvm::ArrayRef<llvm::StringRef> stages, const Results &args,
                llvm::SmallVectorImpl<int64_t> *peakBytes = nullptr) {
    auto results = run(stages, args, peakBytes);
    if (failed(results)) {
      ADD_FAILURE() << "runMesh failed: " << errors;
      return {};
    }
    return *results;
  }

  /// Runs and expects a failure whose diagnostics contain each of `texts`.
  void expectError(llvm::ArrayRef<llvm::StringRef> stages, const Results &args,
                   llvm::ArrayRef<std::string> texts) {
    errors.clear();
    EXPECT_TRUE(failed(run(stages, args)));
    for (const std::string &text : texts)
      EXPECT_NE(errors.find(text), std::string::npos) << "missing '" << text << "' in:\n" << errors;
  }

  mlir::MLIRContext context;
  std::string errors;
  /// Each diagnostic as `loc: message`, then its notes.
  mlir::ScopedDiagnosticHandler handler{&context, [this](mlir::Diagnostic &d) {
                                          llvm::raw_string_ostream os(errors);
                                          os << d.getLocation() << ": " << d.str() << "\n";
                                          for (mlir::Diagnostic &note : d.getNotes())
                                            os << "note: " << note.getLocation() << ": "
                                               << note.str() << "\n";
                                          return mlir::success();
                                        }};
  mlir::OwningOpRef<mlir::ModuleOp> module;
  MeshOp mesh;
};

//===----------------------------------------------------------------------===//
// Running pipelines
//===----------------------------------------------------------------------===//

TEST_F(MpmdTest, TwoTensorParallelStagesExchangeActivations) {
  // Ranks: 0 = (pp 0, tp 0), 1 = (pp 0, tp 1), 2 = (pp 1, tp 0),
  // 3 = (pp 1, tp 1). Rank 0 sends to rank 2, rank 1 to rank 3.
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 2]
    func.func @stage0(%x: tensor<2x2xf32>) {
      %sq = ppc.mul %x, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %h = ppc.all_reduce %sq on @mesh["tp"] sum : tensor<2x2xf32>
      ppc.send %h to @mesh["pp"] 1 {ppc.value = "h"} : tensor<2x2xf32>
      return
    }
    func.func @stage1(%w: tensor<2x1xf32>) -> tensor<2x2xf32> {
      %h = ppc.recv from @mesh["pp"] 0 {ppc.value = "h"} : tensor<2x2xf32>
      %y = ppc.matmul %h, %w : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
      %g = ppc.all_gather %y on @mesh["tp"] dim = 1 : tensor<2x1xf32> -> tensor<2x2xf32>
      return %g : tensor<2x2xf32>
    })mlir");
  // h = [[1,2],[3,4]]^2 + [[0,1],[1,0]]^2 = [[1,5],[10,16]] on ranks 0-3.
  // Rank 2: h @ [1,1]^T = [6, 26]; rank 3: h @ [2,0]^T = [2, 20].
  Results args = {{f32({2, 2}, {1, 2, 3, 4})},
                  {f32({2, 2}, {0, 1, 1, 0})},
                  {f32({2, 1}, {1, 1})},
                  {f32({2, 1}, {2, 0})}};
  llvm::SmallVector<int64_t> peakBytes;
  Results results = runOk({"stage0", "stage1"}, args, &peakBytes);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].empty());
  EXPECT_TRUE(results[1].empty());
  for (int64_t r : {2, 3}) {
    ASSERT_EQ(results[r].size(), 1u) << rankName(r);
    expectValues(results[r][0], {2, 2}, {6, 2, 26, 20}, rankName(r));
  }
  // Stage 0 peaks at mul and all_reduce (16 bytes held + 16 produced);
  // stage 1 at matmul (w and h, 8 + 16, plus y, 8).
  EXPECT_EQ(peakBytes, (llvm::SmallVector<int64_t>{32, 32, 32, 32}));
}

TEST_F(MpmdTest, MessagesBetweenTwoRanksArriveInTheOrderSent) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @stage0(%a: tensor<2xf32>, %b: tensor<2xf32>, %c: tensor<1xi64>) {
      ppc.send %a to @mesh["pp"] 1 : tensor<2xf32>
      ppc.send %b to @mesh["pp"] 1 : tensor<2xf32>
      ppc.send %c to @mesh["pp"] 1 : tensor<1xi64>
      ppc.send %a to @mesh["pp"] 1 : tensor<2xf32>
      return
    }
    func.func @stage1() -> (tensor<2xf32>, tensor<2xf32>, tensor<1xi64>, tensor<2xf32>) {
      %0 = ppc.recv from @mesh["pp"] 0 : tensor<2xf32>
      %1 = ppc.recv from @mesh["pp"] 0 : tensor<2xf32>
      %2 = ppc.recv from @mesh["pp"] 0 : tensor<1xi64>
      %3 = ppc.recv from @mesh["pp"] 0 : tensor<2xf32>
      return %0, %1, %2, %3 : tensor<2xf32>, tensor<2xf32>, tensor<1xi64>, tensor<2xf32>
    })mlir");
  Results args = {{f32({2}, {1, 2}), f32({2}, {3, 4}), makeTensor(DType::I64, {1}, {7})}, {}};
  Results results = runOk({"stage0", "stage1"}, args);
  ASSERT_EQ(results.size(), 2u);
  ASSERT_EQ(results[1].size(), 4u);
  expectValues(results[1][0], {2}, {1, 2}, "first");
  expectValues(results[1][1], {2}, {3, 4}, "second");
  EXPECT_EQ(results[1][2].dtype(), DType::I64);
  expectValues(results[1][2], {1}, {7}, "third");
  expectValues(results[1][3], {2}, {1, 2}, "fourth");
}

TEST_F(MpmdTest, AnActivationGoesForwardAndItsGradientComesBack) {
  // Stage 0: h = x * w; stage 1: loss = sum(h^2), dloss/dh = 2h, sent back;
  // stage 0: dloss/dw = dh * x.
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @stage0(%x: tensor<3xf32>, %w: tensor<3xf32>) -> tensor<3xf32> {
      %h = ppc.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      ppc.send %h to @mesh["pp"] 1 {ppc.value = "h"} : tensor<3xf32>
      %dh = ppc.recv from @mesh["pp"] 1 {ppc.value = "h.grad"} : tensor<3xf32>
      %dw = ppc.mul %dh, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      return %dw : tensor<3xf32>
    }
    func.func @stage1(%two: tensor<3xf32>) -> tensor<3xf32> {
      %h = ppc.recv from @mesh["pp"] 0 {ppc.value = "h"} : tensor<3xf32>
      %dh = ppc.mul %h, %two : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      ppc.send %dh to @mesh["pp"] 0 {ppc.value = "h.grad"} : tensor<3xf32>
      %sq = ppc.mul %h, %h : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      return %sq : tensor<3xf32>
    })mlir");
  Results args = {{f32({3}, {1, 2, 3}), f32({3}, {4, 5, -1})}, {f32({3}, {2, 2, 2})}};
  Results results = runOk({"stage0", "stage1"}, args);
  ASSERT_EQ(results.size(), 2u);
  // h = [4, 10, -3]; dh = [8, 20, -6]; dw = [8, 40, -18].
  expectValues(results[0][0], {3}, {8, 40, -18}, "dw");
  expectValues(results[1][0], {3}, {16, 100, 9}, "h^2");
}

TEST_F(MpmdTest, DataParallelStagesReduceOverDp) {
  // Ranks: 0 = (pp 0, dp 0), 1 = (pp 0, dp 1), 2 = (pp 1, dp 0),
  // 3 = (pp 1, dp 1). The dp groups are {0, 1} and {2, 3}.
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 2, 1]
    func.func @stage0(%x: tensor<2xf32>, %two: tensor<2xf32>) -> tensor<2xf32> {
      %h = ppc.mul %x, %two : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      ppc.send %h to @mesh["pp"] 1 : tensor<2xf32>
      %g = ppc.recv from @mesh["pp"] 1 : tensor<2xf32>
      %sum = ppc.all_reduce %g on @mesh["dp"] sum : tensor<2xf32>
      return %sum : tensor<2xf32>
    }
    func.func @stage1(%one: tensor<2xf32>) -> (tensor<2xf32>, tensor<i64>) {
      %h = ppc.recv from @mesh["pp"] 0 : tensor<2xf32>
      %max = ppc.all_reduce %h on @mesh["dp"] max : tensor<2xf32>
      %g = ppc.add %h, %one : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      ppc.send %g to @mesh["pp"] 0 : tensor<2xf32>
      %i = ppc.axis_index on @mesh["pp", "dp"] : tensor<i64>
      return %max, %i : tensor<2xf32>, tensor<i64>
    })mlir");
  Results args = {{f32({2}, {1, 2}), f32({2}, {2, 2})},
                  {f32({2}, {3, -1}), f32({2}, {2, 2})},
                  {f32({2}, {1, 1})},
                  {f32({2}, {1, 1})}};
  Results results = runOk({"stage0", "stage1"}, args);
  ASSERT_EQ(results.size(), 4u);
  // h: rank 2 gets [2, 4], rank 3 gets [6, -2]; g: [3, 5] and [7, -1].
  for (int64_t r : {0, 1})
    expectValues(results[r][0], {2}, {10, 4}, rankName(r) + " dp sum");
  for (int64_t r : {2, 3}) {
    expectValues(results[r][0], {2}, {6, 4}, rankName(r) + " dp max");
    expectValues(results[r][1], {}, {double(r)}, rankName(r) + " axis index");
  }
}

TEST_F(MpmdTest, ACollectiveOverPpMatchesTheStagesOpsByStructure) {
  // Each stage is its own function, so the group over pp meets at two
  // different but equal ops.
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @stage0(%x: tensor<2xf32>) -> tensor<2xf32> {
      %s = ppc.all_reduce %x on @mesh["pp"] sum : tensor<2xf32>
      return %s : tensor<2xf32>
    }
    func.func @stage1(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = ppc.add %x, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      %s = ppc.all_reduce %y on @mesh["pp"] sum : tensor<2xf32>
      return %s : tensor<2xf32>
    })mlir");
  Results results = runOk({"stage0", "stage1"}, {{f32({2}, {1, 2})}, {f32({2}, {10, 20})}});
  ASSERT_EQ(results.size(), 2u);
  for (int64_t r : {0, 1})
    expectValues(results[r][0], {2}, {21, 42}, rankName(r));
}

TEST_F(MpmdTest, RunSpmdIsRunMeshWithOneProgram) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
    func.func @f(%x: tensor<1xf32>) -> tensor<1xf32> {
      %0 = ppc.all_reduce %x on @mesh["tp"] sum : tensor<1xf32>
      %1 = ppc.all_reduce %0 on @mesh["dp"] sum : tensor<1xf32>
      return %1 : tensor<1xf32>
    })mlir");
  Results args;
  for (int64_t r = 0; r < 4; ++r)
    args.push_back({f32({1}, {double(1 << r)})});
  llvm::SmallVector<int64_t> peakBytes;
  auto results = runSpmd(function("f"), mesh, args, ExecOptions{}, &peakBytes);
  ASSERT_TRUE(succeeded(results)) << errors;
  for (int64_t r = 0; r < 4; ++r)
    expectValues((*results)[r][0], {1}, {15}, rankName(r));
  EXPECT_EQ(peakBytes, (llvm::SmallVector<int64_t>{8, 8, 8, 8}));
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_F(MpmdTest, StagesThatBothReceiveFirstDeadlock) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @stage0(%x: tensor<2xf32>) -> tensor<2xf32> {
      %g = ppc.recv from @mesh["pp"] 1 : tensor<2xf32>
      ppc.send %x to @mesh["pp"] 1 : tensor<2xf32>
      return %g : tensor<2xf32>
    }
    func.func @stage1(%x: tensor<2xf32>) -> tensor<2xf32> {
      %h = ppc.recv from @mesh["pp"] 0 : tensor<2xf32>
      ppc.send %x to @mesh["pp"] 0 : tensor<2xf32>
      return %h : tensor<2xf32>
    })mlir");
  expectError({"stage0", "stage1"}, {{f32({2}, {1, 2})}, {f32({2}, {3, 4})}},
              {"loc(\"-\":4:12): deadlock: rank 0 waits at ppc.recv "
               "loc(\"-\":4:12), rank 1 waits at ppc.recv loc(\"-\":9:12)\n"});
  // Not blamed on one rank.
  EXPECT_EQ(errors.find("(rank"), std::string::npos) << errors;
}

TEST_F(MpmdTest, ACollectiveThatAMemberNeverReachesDeadlocks) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 1, 2]
    func.func @reduce(%x: tensor<2xf32>) -> tensor<2xf32> {
      %s = ppc.all_reduce %x on @mesh["tp"] sum : tensor<2xf32>
      return %s : tensor<2xf32>
    }
    func.func @skip(%x: tensor<2xf32>) -> tensor<2xf32> {
      return %x : tensor<2xf32>
    })mlir");
  Results args = {{f32({2}, {1, 2})}, {f32({2}, {3, 4})}};
  errors.clear();
  EXPECT_TRUE(failed(runMesh({function("reduce"), function("skip")}, mesh, args, ExecOptions{})));
  EXPECT_NE(errors.find("deadlock: rank 0 waits at ppc.all_reduce "
                        "loc(\"-\":4:12); returned: rank 1\n"),
            std::string::npos)
      << errors;
}

TEST_F(MpmdTest, ARecvChecksTheMessagesShape) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @stage0(%x: tensor<2xf32>) {
      ppc.send %x to @mesh["pp"] 1 {ppc.value = "act"} : tensor<2xf32>
      return
    }
    func.func @stage1() -> tensor<3xf32> {
      %h = ppc.recv from @mesh["pp"] 0 : tensor<3xf32>
      return %h : tensor<3xf32>
    })mlir");
  expectError({"stage0", "stage1"}, {{f32({2}, {1, 2})}, {}},
              {"loc(\"-\":8:12): message 'act' from rank 0 is f32 [2], "
               "expected f32 [3] (rank 1)",
               "note: loc(\"-\":4:7): sent here by rank 0"});
}

TEST_F(MpmdTest, MessagesNeverReceivedAreAnError) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @stage0(%x: tensor<2xf32>) {
      ppc.send %x to @mesh["pp"] 1 {ppc.value = "a"} : tensor<2xf32>
      ppc.send %x to @mesh["pp"] 1 {ppc.value = "b"} : tensor<2xf32>
      ppc.send %x to @mesh["pp"] 1 {ppc.value = "c"} : tensor<2xf32>
      return
    }
    func.func @stage1() -> tensor<2xf32> {
      %h = ppc.recv from @mesh["pp"] 0 : tensor<2xf32>
      return %h : tensor<2xf32>
    })mlir");
  expectError({"stage0", "stage1"}, {{f32({2}, {1, 2})}, {}},
              {"loc(\"-\":5:7): rank 0 sent 2 messages to rank 1 that were "
               "never received (first: 'b')"});
}

TEST_F(MpmdTest, GroupMembersMustMeetAtTheSameCollective) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 1, 2]
    func.func @sum(%x: tensor<2xf32>) -> tensor<2xf32> {
      %s = ppc.all_reduce %x on @mesh["tp"] sum : tensor<2xf32>
      return %s : tensor<2xf32>
    }
    func.func @max(%x: tensor<2xf32>) -> tensor<2xf32> {
      %s = ppc.all_reduce %x on @mesh["tp"] max : tensor<2xf32>
      return %s : tensor<2xf32>
    }
    func.func @gather(%x: tensor<2xf32>) -> tensor<4xf32> {
      %g = ppc.all_gather %x on @mesh["tp"] dim = 0 : tensor<2xf32> -> tensor<4xf32>
      return %g : tensor<4xf32>
    })mlir");
  Results args = {{f32({2}, {1, 2})}, {f32({2}, {3, 4})}};
  for (auto [other, name, line] :
       {std::tuple{"gather", "ppc.all_gather", 12}, {"max", "ppc.all_reduce", 8}}) {
    errors.clear();
    EXPECT_TRUE(failed(runMesh({function("sum"), function(other)}, mesh, args, ExecOptions{})));
    // Emitted at the collective the last rank reached.
    std::string at = "loc(\"-\":" + std::to_string(line) + ":12)";
    std::string expected = at +
                           ": group over [\"tp\"] (ranks 0, 1) meets at different "
                           "collectives: rank 0 waits at 'ppc.all_reduce' loc(\"-\":4:12), "
                           "rank 1 reaches '" +
                           name + "' " + at + "\n";
    EXPECT_NE(errors.find(expected), std::string::npos) << expected << "\n" << errors;
    EXPECT_NE(errors.find("note: loc(\"-\":4:12): rank 0 waits here"), std::string::npos) << errors;
  }
}

TEST_F(MpmdTest, AKernelFailureNamesTheRank) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @stage0(%ids: tensor<1xi64>) {
      ppc.send %ids to @mesh["pp"] 1 : tensor<1xi64>
      return
    }
    func.func @stage1(%table: tensor<4x2xf32>) -> tensor<1x2xf32> {
      %ids = ppc.recv from @mesh["pp"] 0 : tensor<1xi64>
      %0 = ppc.gather %table[%ids] axis = 0 : (tensor<4x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
      return %0 : tensor<1x2xf32>
    })mlir");
  expectError({"stage0", "stage1"},
              {{makeTensor(DType::I64, {1}, {7})}, {Tensor(DType::F32, {4, 2})}},
              {"gather index 7 out of range [-4, 4) (rank 1)"});
}

TEST_F(MpmdTest, ProgramsMustCoverEveryRank) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @f(%x: tensor<1xf32>) -> tensor<1xf32> {
      return %x : tensor<1xf32>
    })mlir");
  Results args = {{f32({1}, {1})}, {f32({1}, {2})}};
  errors.clear();
  EXPECT_TRUE(failed(runMesh({function("f")}, mesh, args, ExecOptions{})));
  EXPECT_NE(errors.find("mesh @mesh has 2 ranks, but programs were given for 1"), std::string::npos)
      << errors;
}

//===----------------------------------------------------------------------===//
// The ops
//===----------------------------------------------------------------------===//

TEST_F(MpmdTest, SendAndRecvPrintAndBuild) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @f(%x: tensor<4x8xf32>) {
      return
    })mlir");
  mlir::func::FuncOp f = function("f");
  mlir::OpBuilder b(f.getBody().front().getTerminator());
  mlir::Location loc = b.getUnknownLoc();
  mlir::Value x = f.getArgument(0);
  auto meshRef = mlir::FlatSymbolRefAttr::get(&context, "mesh");
  auto send = b.create<SendOp>(loc, x, meshRef, "pp", 1);
  send->setAttr(SendOp::kValueAttrName, b.getStringAttr("h"));
  auto recv = b.create<RecvOp>(loc, x.getType(), meshRef, "pp", 0);
  ASSERT_TRUE(succeeded(mlir::verify(*module))) << errors;
  EXPECT_EQ(send.getValueName(), "h");
  EXPECT_EQ(recv.getValueName(), "");
  EXPECT_EQ(send.getPeerRank(mesh, 0), 1);
  EXPECT_EQ(recv.getPeerRank(mesh, 1), 0);
  EXPECT_EQ(send.getMeshOp(), mesh);
  // Neither is a collective: only the two ranks of a message meet.
  EXPECT_FALSE(send->hasTrait<CollectiveTrait>());
  EXPECT_FALSE(recv->hasTrait<CollectiveTrait>());

  std::string printed;
  llvm::raw_string_ostream os(printed);
  f.print(os);
  for (llvm::StringRef expected : {"ppc.send %arg0 to @mesh[\"pp\"] 1 {ppc.value = \"h\"} : "
                                   "tensor<4x8xf32>",
                                   "ppc.recv from @mesh[\"pp\"] 0 : tensor<4x8xf32>"})
    EXPECT_NE(printed.find(expected.str()), std::string::npos) << expected.str() << "\n" << printed;
}

TEST_F(MpmdTest, SendAndRecvSurviveCseAndCanonicalization) {
  parse(R"mlir(
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      ppc.send %x to @mesh["pp"] 1 : tensor<2xf32>
      ppc.send %x to @mesh["pp"] 1 : tensor<2xf32>
      %0 = ppc.recv from @mesh["pp"] 1 : tensor<2xf32>
      %1 = ppc.recv from @mesh["pp"] 1 : tensor<2xf32>
      %unused = ppc.recv from @mesh["pp"] 1 : tensor<2xf32>
      %2 = ppc.add %0, %1 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %2 : tensor<2xf32>
    })mlir");
  mlir::Operation *recv = nullptr;
  module->walk([&](RecvOp op) { recv = op; });
  ASSERT_TRUE(recv);
  EXPECT_FALSE(mlir::isPure(recv));
  EXPECT_FALSE(mlir::wouldOpBeTriviallyDead(recv));

  mlir::PassManager pm(&context);
  pm.addPass(mlir::createCSEPass());
  pm.addPass(mlir::createCanonicalizerPass());
  ASSERT_TRUE(succeeded(pm.run(*module))) << errors;
  int sends = 0, recvs = 0;
  module->walk([&](mlir::Operation *op) {
    sends += llvm::isa<SendOp>(op);
    recvs += llvm::isa<RecvOp>(op);
  });
  EXPECT_EQ(sends, 2);
  EXPECT_EQ(recvs, 3);
}

TEST_F(MpmdTest, VerifierChecksTheAxisAndThePeer) {
  struct Case {
    const char *op, *error;
  };
  for (Case c : {
           Case{R"(ppc.send %x to @mesh["pp"] 2 : tensor<2xf32>)",
                "'ppc.send' op peer 2 is out of range [0, 2) of axis 'pp'"},
           Case{R"(ppc.send %x to @mesh["pp"] -1 : tensor<2xf32>)",
                "'ppc.send' op peer -1 is out of range [0, 2) of axis 'pp'"},
           Case{R"(%y = ppc.recv from @mesh["tp"] 4 : tensor<2xf32>)",
                "'ppc.recv' op peer 4 is out of range [0, 4) of axis 'tp'"},
           Case{R"(%y = ppc.recv from @mesh["ep"] 0 : tensor<2xf32>)",
                "'ppc.recv' op axis 'ep' is not an axis of mesh @mesh "
                "([\"pp\", \"dp\", \"tp\"])"},
           Case{R"(ppc.send %x to @other["pp"] 0 : tensor<2xf32>)",
                "'ppc.send' op names @other, which is not a ppc.mesh"},
       }) {
    errors.clear();
    std::string source = std::string(R"mlir(
      ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 4]
      func.func @f(%x: tensor<2xf32>) {
        )mlir") + c.op + R"mlir(
        return
      })mlir";
    auto parsed = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_FALSE(parsed) << c.op;
    EXPECT_NE(errors.find(c.error), std::string::npos) << c.op << "\n" << errors;
  }
}

} // namespace
