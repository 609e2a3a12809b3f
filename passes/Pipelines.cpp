//===- Pipelines.cpp - the pass pipelines of ppc --------------------------===//

#include "passes/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace ppc {

void buildImportPipeline(OpPassManager &pm, const ImportPipelineOptions &options) {
  FoldConstantsOptions fold;
  fold.maxElements = options.maxFoldElements;
  pm.addNestedPass<func::FuncOp>(createFoldConstants(fold));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void registerPpcPassesAndPipelines() {
  registerPpcPasses();
  registerCanonicalizerPass();
  registerCSEPass();
  PassPipelineRegistration<ImportPipelineOptions>(
      "ppc-import-pipeline", "cleanup after ONNX import (as ppc import runs it)",
      buildImportPipeline);
}

} // namespace ppc
