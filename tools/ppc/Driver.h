//===- Driver.h - what the ppc subcommands share ----------------*- C++ -*-===//

#ifndef PPC_TOOLS_DRIVER_H
#define PPC_TOOLS_DRIVER_H

#include "executor/Kernels.h"
#include "frontend/OnnxImporter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "passes/sharding/PlanSearch.h"
#include "runtime/Printable.h"
#include "llvm/Support/CommandLine.h"

#include <functional>
#include <optional>

namespace ppc {

/// Prints "error: <message>" on stderr (one line) and returns 1, the exit
/// status of every user-input error. Messages print names from the model
/// through `printable`; the whole line goes through it once more here, so a
/// name a message forgot still cannot break the line or drive the terminal.
int reportError(const llvm::Twine &message);

/// Prints "warning: <message>" on stderr the same way (one printable line).
void reportWarning(const llvm::Twine &message);

/// Parses a subcommand's flags. `--help` lists `category` (the command's
/// own flags); LLVM's and MLIR's options stay accepted and are listed by
/// `--help-hidden` (MLIR's IR printing and debugging flags among them).
/// Exits with status 1 where a flag is followed by another flag where its
/// value should be (ppcrt::flagTakenAsValue).
void parseCommandLine(int argc, char **argv, llvm::cl::OptionCategory &category,
                      const char *overview);

/// Routes MLIR diagnostics to one-line "error: node '<name>': ..." messages
/// (printable, as reportError's).
class DriverDiagnostics {
public:
  explicit DriverDiagnostics(mlir::MLIRContext &context);
  ~DriverDiagnostics();

private:
  mlir::MLIRContext &context;
  mlir::DiagnosticEngine::HandlerID id;
};

/// Options every subcommand that runs passes takes: --dump-ir in the
/// command's category, and MLIR's own (--mlir-print-ir-after-all, ...).
struct PipelineFlags {
  explicit PipelineFlags(llvm::cl::OptionCategory &category);

  llvm::cl::opt<std::string> dumpIR;
};

/// `--train`, `--freeze` and `--untie`: which float initializers of the model
/// train (`ppc import`, `simulate` and `compile`).
struct ParameterFlags {
  explicit ParameterFlags(llvm::cl::OptionCategory &category);

  /// Applies --untie to `model`, then decides its parameters
  /// (chooseParameters: the export helper's record, the patterns, warnings
  /// for the signs of an inference export) into `options`.
  mlir::LogicalResult apply(OnnxModel &model, ImportOptions &options);

  llvm::cl::list<std::string> train, freeze;
  llvm::cl::opt<bool> untie;
};

/// `--report F.json`, which `simulate` and `compile` take.
struct ReportFlag {
  llvm::cl::opt<std::string> path{
      "report",
      llvm::cl::desc("write the collectives of one step, per rank, and the chosen "
                     "parameter shardings as JSON"),
      llvm::cl::value_desc("F.json")};
};

/// The predicted schedule of a pipelined `module` (ppc-pipeline's
/// `ppc.schedule`, stage costs from its programs' ops): `--trace` writes it
/// as Chrome trace JSON, `--timeline` as an SVG picture, one row per
/// pipeline rank. Prints the bubble fraction against its formula.
mlir::LogicalResult writeTimeline(mlir::ModuleOp module, llvm::StringRef tracePath,
                                  llvm::StringRef svgPath);

/// The mesh and the training programs of a partitioned `module`; without a
/// mesh, reports that `flag` ("--report") has nothing to say, and fails.
mlir::FailureOr<std::pair<MeshOp, llvm::SmallVector<mlir::func::FuncOp>>>
meshPrograms(mlir::ModuleOp module, llvm::StringRef flag);

/// Writes the communication report of the partitioned @train_step of
/// `module` to `path`; reports an error (and fails) when it has no mesh.
mlir::LogicalResult writeCommunicationReport(llvm::StringRef path, mlir::ModuleOp module,
                                             int64_t steps);

struct Cluster;
/// `--explain`: why each collective and pipeline message of every rank's
/// step is there, grouped, then one line each (tools/ppc/Explain.cpp), with
/// times priced for `cluster`; reports an error (and fails) without a mesh.
mlir::LogicalResult writeExplanation(llvm::StringRef path, mlir::ModuleOp module,
                                     const Cluster &cluster);

/// Runs the passes `build` adds on `module`; with `dumpDir`, writes the IR
/// before the pipeline and after each pass as numbered files.
mlir::LogicalResult runPipeline(mlir::ModuleOp module,
                                const std::function<void(mlir::OpPassManager &)> &build,
                                llvm::StringRef dumpDir);

/// Where --dump-ir stands in a directory: the next file's number and the
/// passes pipeline.txt lists. A command that runs a pipeline again from an
/// earlier point (ppc compile's second try at --recompute auto) rewinds to
/// it, so that the files and pipeline.txt describe the run it keeps.
struct DumpPoint {
  int counter = 0;
  std::string passes;
};
DumpPoint dumpPoint(llvm::StringRef dumpDir);
void rewindDump(llvm::StringRef dumpDir, const DumpPoint &point);

/// Parses `--dim NAME=N` flags into import options.
mlir::LogicalResult parseDimFlags(llvm::ArrayRef<std::string> flags, ImportOptions &options);

/// Checks, before any work, that the files a command will write can be
/// written without destroying what it reads: each (flag, path) of `outputs`
/// (empty and "-" skipped) is not a directory, not the same file as any of
/// `inputs`, and not another output's path. Reports the first conflict.
mlir::LogicalResult checkOutputs(llvm::ArrayRef<std::pair<std::string, std::string>> outputs,
                                 llvm::ArrayRef<std::string> inputs);

/// The files a model is read from: `path` and its external data files (what
/// checkOutputs must not let a command overwrite).
std::vector<std::string> modelFiles(const OnnxModel &model, llvm::StringRef path);

/// Writes `text` to `path` ("-" is stdout) only once it is complete, so an
/// error never leaves a truncated file behind.
mlir::LogicalResult writeOutput(llvm::StringRef path,
                                llvm::function_ref<void(llvm::raw_ostream &)> write);

/// Imports `path` and runs the import pipeline: what every command that
/// works on a model starts with. `model` receives the loaded ONNX model.
mlir::OwningOpRef<mlir::ModuleOp> importModel(llvm::StringRef path, mlir::MLIRContext &context,
                                              const ImportOptions &options, llvm::StringRef dumpDir,
                                              std::unique_ptr<OnnxModel> &model);

/// The same for a model already loaded; the importer's errors go to
/// `emitError` where given (reportError otherwise).
mlir::OwningOpRef<mlir::ModuleOp>
importModel(const OnnxModel &model, mlir::MLIRContext &context, const ImportOptions &options,
            llvm::StringRef dumpDir, llvm::function_ref<void(const llvm::Twine &)> emitError = {});

/// The values of `func`'s arguments: graph inputs from `inputs` (name ->
/// tensor, checked against the declared type and converted to the storage
/// dtype of `options`) and parameters from the model's initializers.
mlir::FailureOr<llvm::SmallVector<Tensor>> bindArguments(mlir::func::FuncOp func,
                                                         const OnnxModel &model,
                                                         llvm::StringMap<Tensor> &inputs,
                                                         const ExecOptions &options);

/// The token-window inputs ("input:NAME" keys) in the order they are fed:
/// the model's graph inputs in graph order, then inputs the training step
/// appended (labels). Reports an error (and fails) unless there are one or
/// two.
mlir::FailureOr<llvm::SmallVector<std::string>> orderTokenInputs(const OnnxModel &model,
                                                                 llvm::ArrayRef<std::string> keys);

/// A subcommand (`ppc compile`, `ppc checkpoint inspect`): its name, its
/// entry point and a one-line summary.
struct Subcommand {
  const char *name;
  int (*run)(int, char **);
  const char *summary;
};

/// Prints each subcommand's name and summary, one per line.
void printSubcommands(llvm::ArrayRef<Subcommand> subcommands, llvm::raw_ostream &os);

/// Runs the subcommand argv[1] names on the rest of argv (its argv[0] is
/// "`prefix` NAME", which its --help shows); none when no subcommand has
/// that name.
std::optional<int> runSubcommand(llvm::ArrayRef<Subcommand> subcommands, llvm::StringRef prefix,
                                 int argc, char **argv);

int runImportCommand(int argc, char **argv);
int runEvalCommand(int argc, char **argv);
int runSimulateCommand(int argc, char **argv);
int runCompileCommand(int argc, char **argv);
int runPlanCommand(int argc, char **argv);

struct TrainingFlags;
/// `ppc plan`'s search, which `ppc compile --mesh auto` runs too: builds the
/// training step of `path` as `training` says (one micro-batch; `training`
/// is left as it was) and searches the plans of `devices` devices of
/// `cluster` for steps of `globalBatch` sequences (0: the model's fixed
/// batch). Errors are reported.
struct PlanRun {
  SearchResult result;
  SearchOptions search;
  double buildSeconds = 0;
};
mlir::FailureOr<PlanRun> runPlanSearch(llvm::StringRef path, TrainingFlags &training,
                                       const Cluster &cluster, int64_t devices, int64_t globalBatch,
                                       int64_t maxTp, size_t keep, llvm::StringRef dumpIR,
                                       const PlanPins &pins = {});
/// The knobs `training`'s flags pin (--mesh, --zero, ...: those given);
/// a bad value is reported.
mlir::FailureOr<PlanPins> pinsOf(TrainingFlags &training);
/// The preset named `flag`, or the cluster file it names (errors reported).
std::optional<Cluster> clusterNamed(llvm::StringRef flag);
/// A plan as ppc compile's flags ("--mesh 2x4x1 --micro-batches 8 ...").
std::string describePlan(const PlanChoice &choice);
int runCheckpointCommand(int argc, char **argv);
/// `ppc explain`: `ppc compile --explain -` (tools/ppc/Explain.cpp).
int runExplainCommand(int argc, char **argv);

} // namespace ppc

#endif // PPC_TOOLS_DRIVER_H
