//===- AutodiffTest.cpp - the autodiff pass against finite differences ----===//
//
// The gradient rules are checked one by one in GradientCheckTest; this checks
// the pass that chains them (reverse order, accumulation of shared values,
// tied parameters) on a small transformer-like function, in f64.
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "ir/PpcDialect.h"
#include "passes/PassValidation.h"
#include "passes/Passes.h"
#include "test/unit/FiniteDifferences.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace ppc;

namespace {
constexpr const char *kModel = R"mlir(
func.func @forward(%ids: tensor<2x3xi64> {ppc.input = "ids"},
                   %labels: tensor<6xi64> {ppc.input = "labels"},
                   %wte: tensor<4x5xf64> {ppc.param = "wte"},
                   %g: tensor<5xf64> {ppc.param = "ln.weight"},
                   %b: tensor<5xf64> {ppc.param = "ln.bias"},
                   %w1: tensor<5x5xf64> {ppc.param = "w1"}) -> (tensor<f64> {ppc.output = "loss"}) {
  %e = ppc.gather %wte[%ids] axis = 0 : (tensor<4x5xf64>, tensor<2x3xi64>) -> tensor<2x3x5xf64>
  %n = ppc.layer_norm %e, %g, %b axis = 2 epsilon = 1.0e-5 : (tensor<2x3x5xf64>, tensor<5xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>
  %h = ppc.matmul %n, %w1 : (tensor<2x3x5xf64>, tensor<5x5xf64>) -> tensor<2x3x5xf64>
  %t = ppc.tanh %h : tensor<2x3x5xf64>
  %r = ppc.add %t, %e : (tensor<2x3x5xf64>, tensor<2x3x5xf64>) -> tensor<2x3x5xf64>
  %s = ppc.softmax %r axis = 1 : tensor<2x3x5xf64>
  %m = ppc.mul %s, %r : (tensor<2x3x5xf64>, tensor<2x3x5xf64>) -> tensor<2x3x5xf64>
  %wt = ppc.transpose %wte perm = [1, 0] : (tensor<4x5xf64>) -> tensor<5x4xf64>
  %logits = ppc.matmul %m, %wt : (tensor<2x3x5xf64>, tensor<5x4xf64>) -> tensor<2x3x4xf64>
  %flat = ppc.reshape %logits : tensor<2x3x4xf64> -> tensor<6x4xf64>
  %lp = ppc.log_softmax %flat axis = 1 : tensor<6x4xf64>
  %loss = ppc.nll_loss %lp, %labels mean : (tensor<6x4xf64>, tensor<6xi64>) -> tensor<f64>
  return %loss : tensor<f64>
})mlir";
} // namespace

TEST(Autodiff, GradientsMatchCentralDifferences) {
  MLIRContext context;
  context.loadDialect<PpcDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModel, &context);
  ASSERT_TRUE(module);
  PassManager pm(&context);
  pm.addPass(createAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  auto grad = module->lookupSymbol<func::FuncOp>("forward_grad");
  ASSERT_TRUE(forward && grad);

  ExecOptions exec;
  llvm::SmallVector<Tensor> args = randomArguments(forward, 3, exec);
  // Token ids and labels within the 4-entry vocabulary.
  for (int64_t &v : args[0].ints())
    v = (v * 7 + 1) % 4;
  for (int64_t &v : args[1].ints())
    v = (v * 5 + 2) % 4;
  auto loss = [&](llvm::ArrayRef<Tensor> a) {
    return (*runFunction(forward, a, exec))[0].floats()[0];
  };
  auto grads = runFunction(grad, args, exec);
  ASSERT_TRUE(succeeded(grads));
  EXPECT_NEAR((*grads)[0].floats()[0], loss(args), 1e-15);

  double worst = worstCentralDifference(forward, grad, args, {2, 3, 4, 5}, exec);
  EXPECT_LT(worst, 1e-8) << "worst relative error " << worst;
}
