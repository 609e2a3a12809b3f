//===- ppc-opt.cpp - runs ppc passes on .mlir files -----------------------===//

#include "ir/PpcDialect.h"
#include "passes/PassValidation.h"
#include "passes/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

static llvm::cl::opt<bool>
    validatePasses("ppc-validate-passes",
                   llvm::cl::desc("run every function before and after each pass on random "
                                  "inputs through the reference executor and report the "
                                  "largest difference (fails above --ppc-validate-tolerance)"));
static llvm::cl::opt<double>
    validateTolerance("ppc-validate-tolerance",
                      llvm::cl::desc("largest relative difference --ppc-validate-passes accepts"),
                      llvm::cl::init(1e-6));

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<ppc::PpcDialect, mlir::func::FuncDialect>();
  ppc::registerPpcPassesAndPipelines();
  auto [inputFile, outputFile] =
      mlir::registerAndParseCLIOptions(argc, argv, "ppc optimizer driver\n", registry);

  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  auto validationFailed = std::make_shared<bool>(false);
  if (validatePasses) {
    // The setup function replaces the one that adds the command line's
    // passes; chain to it.
    mlir::MlirOptMainConfig cliConfig = config;
    config.setPassPipelineSetupFn([&, cliConfig](mlir::PassManager &pm) {
      if (mlir::failed(cliConfig.setupPassPipeline(pm)))
        return mlir::failure();
      // Snapshots are taken per pass; keep passes in order on one thread.
      pm.getContext()->disableMultithreading();
      pm.addInstrumentation(std::make_unique<ppc::PassValidationInstrumentation>(
          validateTolerance, llvm::errs(), validationFailed));
      return mlir::success();
    });
  }
  std::string error;
  auto input = mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  auto output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return *validationFailed ? 1 : 0;
}
