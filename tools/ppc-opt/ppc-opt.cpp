//===- ppc-opt.cpp - runs ppc passes on .mlir files -----------------------===//

#include "ir/PpcDialect.h"
#include "passes/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<ppc::PpcDialect, mlir::func::FuncDialect>();
  ppc::registerPpcPassesAndPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "ppc optimizer driver\n", registry));
}
