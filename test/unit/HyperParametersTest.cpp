//===- HyperParametersTest.cpp - one list of the step's hyper-parameters ---===//
//
// runtime/ppcrt/HyperParameters.h lists the hyper-parameters a training
// step takes as arguments; the executables' flags are made from it. The
// passes spell the compile-time values as options of their own (MLIR
// declares them statically), so these tests hold them to the list: the
// pipeline's and the pass's options exist for every entry with the list's
// default, hyperParameter() resolves every entry, and the training step
// takes no hyper-parameter the list lacks.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/HyperParameters.h"
#include "ir/PpcDialect.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace mlir;

namespace {

/// The options of `pass` as its textual pipeline spells them ("lr" ->
/// "1.000000e-03").
std::map<std::string, std::string> optionsOf(Pass &pass) {
  std::string text;
  llvm::raw_string_ostream os(text);
  pass.printAsTextualPipeline(os);
  llvm::StringRef body = llvm::StringRef(text).split('{').second.rsplit('}').first;
  std::map<std::string, std::string> options;
  llvm::SmallVector<llvm::StringRef> pairs;
  body.split(pairs, ' ', -1, false);
  for (llvm::StringRef pair : pairs) {
    auto [key, value] = pair.split('=');
    options[key.str()] = value.str();
  }
  return options;
}

/// A pass option's name for the hyper-parameter `name` ("min_lr" ->
/// "min-lr").
std::string optionName(llvm::StringRef name) {
  std::string option = name.str();
  std::replace(option.begin(), option.end(), '_', '-');
  return option;
}

TEST(HyperParametersTest, ThePassOptionsHaveEveryEntryWithItsDefault) {
  auto pass = ppc::createBuildTrainStep();
  std::map<std::string, std::string> options = optionsOf(*pass);
  for (const ppcrt::HyperParameter &h : ppcrt::kHyperParameters) {
    auto it = options.find(optionName(h.name));
    ASSERT_NE(it, options.end()) << "ppc-build-train-step has no option for " << h.name;
    double value;
    ASSERT_FALSE(llvm::StringRef(it->second).getAsDouble(value)) << it->second;
    EXPECT_EQ(value, h.defaultValue) << h.name << " (passes/Passes.td)";
  }
}

TEST(HyperParametersTest, ThePipelineOptionsHaveEveryEntryWithItsDefault) {
  ppc::TrainingPipelineOptions options;
  for (const ppcrt::HyperParameter &h : ppcrt::kHyperParameters) {
    std::optional<double> value = ppc::hyperParameter(options, h.name);
    ASSERT_TRUE(value.has_value()) << "hyperParameter() does not know " << h.name;
    EXPECT_EQ(*value, h.defaultValue) << h.name << " (passes/Pipelines.h)";
  }
}

TEST(HyperParametersTest, TheStepTakesOnlyListedHyperParameters) {
  MLIRContext context;
  context.loadDialect<ppc::PpcDialect, func::FuncDialect>();
  const char *forward = R"mlir(
    func.func @forward(%x: tensor<2x3xf32> {ppc.input = "x"},
                       %w: tensor<3x3xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
      %h = ppc.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
      %l = ppc.reduce_mean %h axes = [0, 1] keepdims = false : (tensor<2x3xf32>) -> tensor<f32>
      return %l : tensor<f32>
    })mlir";
  std::set<std::string> listed, taken;
  for (const ppcrt::HyperParameter &h : ppcrt::kHyperParameters)
    listed.insert(h.name);
  // Every optimizer and schedule, with every optional term switched on.
  for (const char *optimizer : {"sgd", "adamw"}) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(forward, &context);
    ASSERT_TRUE(module);
    ppc::TrainingPipelineOptions options;
    options.optimizer = optimizer;
    options.momentum = 0.9;
    options.gradClip = 1.0;
    options.lrSchedule = "cosine";
    options.minLr = 1e-5;
    options.totalSteps = 10;
    PassManager pm(&context);
    ppc::buildTrainingPipeline(pm, options);
    ASSERT_TRUE(succeeded(pm.run(*module))) << optimizer;
    auto step = module->lookupSymbol<func::FuncOp>("train_step");
    ASSERT_TRUE(step);
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (auto name = step.getArgAttrOfType<StringAttr>(i, ppc::PpcDialect::kHyperAttrName))
        taken.insert(name.getValue().str());
  }
  for (const std::string &name : taken)
    EXPECT_TRUE(listed.count(name))
        << "the step takes '" << name << "', which runtime/ppcrt/HyperParameters.h lacks";
  EXPECT_EQ(taken, listed) << "every listed hyper-parameter is taken by some step";
}

} // namespace
