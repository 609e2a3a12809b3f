//===- PassValidationTest.cpp - comparing functions through the executor --===//

#include "passes/PassValidation.h"
#include "ir/PpcDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace ppc;

namespace {
class PassValidationTest : public ::testing::Test {
protected:
  PassValidationTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  func::FuncOp parse(llvm::StringRef body) {
    modules.push_back(parseSourceString<ModuleOp>(body, &context));
    return *modules.back()->getOps<func::FuncOp>().begin();
  }

  MLIRContext context;
  std::vector<OwningOpRef<ModuleOp>> modules;
};

constexpr const char *kAdd = R"mlir(
  func.func @f(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
    %0 = ppc.add %x, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  })mlir";
} // namespace

TEST_F(PassValidationTest, EqualFunctionsAgree) {
  auto diff = compareFunctions(parse(kAdd), parse(kAdd), 1, ExecOptions{});
  ASSERT_TRUE(succeeded(diff));
  EXPECT_EQ(diff->maxAbs, 0.0);
  EXPECT_EQ(diff->maxRelative, 0.0);
}

TEST_F(PassValidationTest, ADifferentComputationIsCaught) {
  func::FuncOp sub = parse(R"mlir(
    func.func @f(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
      %0 = ppc.sub %x, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
      return %0 : tensor<8xf32>
    })mlir");
  auto diff = compareFunctions(parse(kAdd), sub, 1, ExecOptions{});
  ASSERT_TRUE(succeeded(diff));
  // x + y and x - y differ by 2|y|, and y is uniform in [-1, 1).
  EXPECT_GT(diff->maxAbs, 0.1);
  EXPECT_LE(diff->maxAbs, 2.0);
  EXPECT_GT(diff->maxRelative, 0.05);
}

TEST_F(PassValidationTest, AChangedSignatureFails) {
  func::FuncOp other = parse(R"mlir(
    func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
      return %x : tensor<8xf32>
    })mlir");
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) { return success(); });
  EXPECT_TRUE(failed(compareFunctions(parse(kAdd), other, 1, ExecOptions{})));
}

TEST_F(PassValidationTest, RandomIndicesAreValidForSmallTables) {
  func::FuncOp gather = parse(R"mlir(
    func.func @g(%t: tensor<3x2xf32>, %i: tensor<16xi64>) -> tensor<16x2xf32> {
      %0 = ppc.gather %t[%i] axis = 0 : (tensor<3x2xf32>, tensor<16xi64>) -> tensor<16x2xf32>
      return %0 : tensor<16x2xf32>
    })mlir");
  auto args = randomArguments(gather, 7, ExecOptions{});
  ASSERT_EQ(args.size(), 2u);
  for (int64_t v : args[1].ints()) {
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 3);
  }
  EXPECT_TRUE(succeeded(compareFunctions(gather, gather, 7, ExecOptions{})));
}
