//===- Pipelines.h - the pass pipelines of ppc ------------------*- C++ -*-===//
//
// Each pipeline is one options struct plus one build function, shared by the
// `ppc` driver and `ppc-opt` (as a registered pipeline).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_PIPELINES_H
#define PPC_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace ppc {

struct ImportPipelineOptions
    : public mlir::PassPipelineOptions<ImportPipelineOptions> {
  Option<int64_t> maxFoldElements{
      *this, "max-fold-elements",
      llvm::cl::desc("largest constant (in elements) that folding produces"),
      llvm::cl::init(int64_t(1) << 22)};
};

/// Cleans freshly imported IR: folds constant subgraphs, canonicalizes and
/// removes common subexpressions.
void buildImportPipeline(mlir::OpPassManager &pm,
                         const ImportPipelineOptions &options);

/// Registers the passes and pipelines of ppc for ppc-opt.
void registerPpcPassesAndPipelines();

} // namespace ppc

#endif // PPC_PASSES_PIPELINES_H
