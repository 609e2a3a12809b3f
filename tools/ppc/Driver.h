//===- Driver.h - what the ppc subcommands share ----------------*- C++ -*-===//

#ifndef PPC_TOOLS_DRIVER_H
#define PPC_TOOLS_DRIVER_H

#include "frontend/OnnxImporter.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"

#include <functional>

namespace ppc {

/// Prints "error: <message>" on stderr (one line) and returns 1, the exit
/// status of every user-input error.
int reportError(const llvm::Twine &message);

/// Routes MLIR diagnostics to one-line "error: node '<name>': ..." messages.
class DriverDiagnostics {
public:
  explicit DriverDiagnostics(mlir::MLIRContext &context);
  ~DriverDiagnostics();

private:
  mlir::MLIRContext &context;
  mlir::DiagnosticEngine::HandlerID id;
};

/// Options every subcommand that runs passes takes.
struct PipelineFlags {
  llvm::cl::opt<std::string> dumpIR{
      "dump-ir", llvm::cl::desc("write the IR before the first pass and after "
                                "every pass to DIR/NN_<pass>.mlir"),
      llvm::cl::value_desc("DIR")};
};

/// Runs the passes `build` adds on `module`; with `dumpDir`, writes the IR
/// before the pipeline and after each pass as numbered files.
mlir::LogicalResult
runPipeline(mlir::ModuleOp module,
            const std::function<void(mlir::OpPassManager &)> &build,
            llvm::StringRef dumpDir);

/// Parses `--dim NAME=N` flags into import options.
mlir::LogicalResult parseDimFlags(llvm::ArrayRef<std::string> flags,
                                  ImportOptions &options);

/// Loads and imports an ONNX model; reports every problem.
mlir::OwningOpRef<mlir::ModuleOp> loadAndImport(llvm::StringRef path,
                                                mlir::MLIRContext &context,
                                                const ImportOptions &options);

/// Writes `text` to `path` ("-" is stdout) only once it is complete, so an
/// error never leaves a truncated file behind.
mlir::LogicalResult writeOutput(llvm::StringRef path,
                                llvm::function_ref<void(llvm::raw_ostream &)> write);

int runImportCommand(int argc, char **argv);

} // namespace ppc

#endif // PPC_TOOLS_DRIVER_H
