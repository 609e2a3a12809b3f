//===- onnx-import.cpp - fuzz target: ONNX bytes to the ppc dialect -------===//
//
// Parses the input as an ONNX model and imports it as `ppc import` does
// before its pass pipeline: the parameter choice (the export helper's
// metadata included), GraphImporter's checks, every op importer, folding on
// the reference executor and the verifier. The model lives, for the
// importer, in an empty directory, so external data it names is never read:
// it is missing, or refused for leaving the directory.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "frontend/TrainableParameters.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"

#include <cstdint>
#include <cstdlib>
#include <string>

static std::string &modelDirectory() {
  static std::string directory;
  return directory;
}

static void removeModelDirectory() { llvm::sys::fs::remove(modelDirectory()); }

/// Whether `directory` holds no entry.
static bool isEmptyDirectory(llvm::StringRef directory) {
  std::error_code ec;
  llvm::sys::fs::directory_iterator it(directory, ec);
  return !ec && it == llvm::sys::fs::directory_iterator();
}

// The model's directory is $PPC_FUZZ_MODEL_DIR (tools/fuzz.sh gives one in
// its build tree: fork mode's children end without running atexit handlers,
// and would leave a temporary directory each), else a temporary one.
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  if (const char *given = std::getenv("PPC_FUZZ_MODEL_DIR")) {
    if (!isEmptyDirectory(given))
      llvm::report_fatal_error("fuzz-onnx-import: PPC_FUZZ_MODEL_DIR '" + llvm::Twine(given) +
                               "' is not an empty directory");
    modelDirectory() = given;
    return 0;
  }
  llvm::SmallString<128> directory;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("ppc-fuzz-onnx", directory))
    llvm::report_fatal_error("fuzz-onnx-import: cannot create a temporary directory: " +
                             llvm::Twine(ec.message()));
  modelDirectory() = directory.str().str();
  std::atexit(removeModelDirectory);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto model = ppc::OnnxModel::parse(bytes, modelDirectory() + "/model.onnx");
  if (!model) {
    llvm::consumeError(model.takeError());
    return 0;
  }
  auto ignore = [](const llvm::Twine &) {};
  ppc::ImportOptions options;
  // A model whose metadata is refused still imports, with every float
  // initializer a parameter, so the importer sees it too.
  auto parameters = ppc::chooseParameters(**model, {}, ignore, ignore);
  if (mlir::succeeded(parameters))
    options.parameters = std::move(*parameters);
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler silence(&context,
                                        [](mlir::Diagnostic &) { return mlir::success(); });
  ppc::importOnnxModel(**model, context, options, ignore);
  return 0;
}
