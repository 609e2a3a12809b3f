//===- CompileCommand.cpp - `ppc compile` ---------------------------------===//
//
// Builds the training step of a model for a mesh: import, training
// pipeline, partitioning. `--emit mlir` writes the per-rank program;
// emitting C++/CUDA and building the executable arrive with the
// code-generation issue.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/memory/MemoryPlan.h"
#include "tools/ppc/Driver.h"
#include "tools/ppc/TrainingFlags.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {

int runCompileCommand(int argc, char **argv) {
  cl::OptionCategory category("ppc compile options");
  cl::opt<std::string> input(cl::Positional, cl::desc("MODEL.onnx"), cl::Required,
                             cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("output file (the IR for --emit mlir)"),
                              cl::value_desc("FILE"), cl::init("-"), cl::cat(category));
  cl::opt<std::string> emit("emit", cl::desc("what to write: mlir (cpp and cuda arrive "
                                             "with code generation)"),
                            cl::value_desc("mlir|cpp|cuda"), cl::init(""),
                            cl::cat(category));
  cl::opt<std::string> target("target", cl::desc("cpu or cuda"), cl::init(""),
                              cl::cat(category));
  ReportFlag report;
  cl::opt<std::string> tracePath(
      "trace", cl::desc("write the predicted pipeline schedule as Chrome trace JSON (Perfetto)"),
      cl::value_desc("F.json"), cl::cat(category));
  cl::opt<std::string> timelinePath(
      "timeline", cl::desc("draw the predicted pipeline schedule as SVG, one row per rank"),
      cl::value_desc("F.svg"), cl::cat(category));
  report.path.addCategory(category);
  cl::opt<int64_t> scheduleSteps(
      "lr-total-steps", cl::desc("steps the cosine learning-rate schedule spans"),
      cl::init(1), cl::cat(category));
  TrainingFlags training(category);
  PipelineFlags pipelineFlags(category);
  parseCommandLine(
      argc, argv, category,
      "ppc compile: build the training step of a model for a mesh\n\n"
      "Imports MODEL.onnx, builds @train_step and partitions it for --mesh;\n"
      "--emit mlir writes the per-rank program.\n");

  if (emit != "mlir")
    return reportError(
        emit.empty() ? "building an executable arrives with the code-generation issue; "
                       "use --emit mlir to write the partitioned program"
                     : "--emit '" + emit + "': only mlir so far (cpp and cuda arrive with "
                                           "the code-generation issue)");
  if (!target.empty() && target != "cpu" && target != "cuda")
    return reportError("--target '" + target + "': expected cpu or cuda");
  if (training.lrSchedule == "cosine" && scheduleSteps < 1)
    return reportError("--lr-total-steps must be at least 1");

  auto start = std::chrono::steady_clock::now();
  auto model = OnnxModel::load(input);
  if (!model)
    return reportError(llvm::toString(model.takeError()));
  ImportOptions options;
  TrainingFlags::Setup setup;
  if (failed(training.setUp(**model, options, scheduleSteps, setup)))
    return 1;
  MLIRContext context;
  DriverDiagnostics diagnostics(context);
  OwningOpRef<ModuleOp> module = importModel(**model, context, options, pipelineFlags.dumpIR);
  if (!module)
    return 1;
  if (failed(runPipeline(
          *module, [&](OpPassManager &pm) { TrainingFlags::buildPipeline(pm, setup); },
          pipelineFlags.dumpIR)))
    return 1;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (!report.path.empty() && failed(writeCommunicationReport(report.path, *module, 1)))
    return 1;
  if ((!tracePath.empty() || !timelinePath.empty()) &&
      failed(writeTimeline(*module, tracePath, timelinePath)))
    return 1;
  // Each program's static memory plan, and its size.
  for (func::FuncOp program : trainingPrograms(*module)) {
    int64_t ops = 0;
    program.walk([&](Operation *) { ++ops; });
    MemoryPlan plan = planMemory(program);
    printMemoryTable(plan, program.getSymName(), llvm::errs());
    // The planner chose by an estimate; the plan is exact.
    if (plan.peakBytes > setup.memoryPerRank)
      llvm::errs() << llvm::formatv("warning: @{0} needs {1} bytes per rank, more than "
                                    "--memory-per-rank {2:F0}\n",
                                    program.getSymName(), plan.peakBytes,
                                    setup.memoryPerRank);
    llvm::errs() << llvm::formatv("compiled @{0}: {1} ops per rank\n", program.getSymName(),
                                  ops);
  }
  llvm::errs() << llvm::formatv("compiled in {0:f2} s\n", seconds);
  return failed(writeOutput(output, [&](llvm::raw_ostream &os) { module->print(os); }));
}

} // namespace ppc
