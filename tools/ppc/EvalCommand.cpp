//===- EvalCommand.cpp - `ppc eval` ---------------------------------------===//

#include "executor/Interpreter.h"
#include "executor/Npy.h"
#include "ir/PpcDialect.h"
#include "tools/ppc/Driver.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {

/// A graph output's file name: ONNX names may contain '/' and ':'.
static std::string outputFileName(llvm::StringRef name) {
  std::string file = name.str();
  for (char &c : file)
    if (c == '/' || c == '\\' || c == ':')
      c = '_';
  return file + ".npy";
}

int runEvalCommand(int argc, char **argv) {
  cl::OptionCategory category("ppc eval options");
  cl::opt<std::string> input(cl::Positional, cl::desc("MODEL.onnx"), cl::Required,
                             cl::cat(category));
  cl::list<std::string> inputFlags(
      "input", cl::desc("a graph input's value, NAME=FILE.npy (repeat per input)"),
      cl::value_desc("NAME=FILE.npy"), cl::cat(category));
  cl::opt<std::string> outputDir("output-dir",
                                 cl::desc("directory for <output name>.npy (default: .)"),
                                 cl::value_desc("DIR"), cl::init("."), cl::cat(category));
  cl::opt<std::string> dtype("dtype",
                             cl::desc("precision of float computation: f32 (the "
                                      "model's types) or f64 (all floats promoted)"),
                             cl::value_desc("f32|f64"), cl::init("f32"), cl::cat(category));
  cl::list<std::string> dims("dim", cl::desc("size of a symbolic input dimension, NAME=N"),
                             cl::value_desc("NAME=N"), cl::cat(category));
  PipelineFlags pipelineFlags(category);
  parseCommandLine(argc, argv, category,
                   "ppc eval: run an ONNX model on the reference executor\n\n"
                   "Imports MODEL.onnx, runs it on the given inputs and writes every graph\n"
                   "output as DIR/<output name>.npy.\n");

  ExecOptions exec;
  if (dtype == "f64")
    exec.f64 = true;
  else if (dtype != "f32")
    return reportError("--dtype '" + dtype + "': expected f32 or f64");
  ImportOptions options;
  options.promoteToF64 = exec.f64;
  if (failed(parseDimFlags(dims, options)))
    return 1;
  llvm::StringMap<Tensor> inputs;
  for (const std::string &flag : inputFlags) {
    auto [name, file] = llvm::StringRef(flag).split('=');
    if (name.empty() || file.empty())
      return reportError("--input '" + flag + "': expected NAME=FILE.npy");
    auto tensor = readNpy(file);
    if (!tensor)
      return reportError(llvm::toString(tensor.takeError()));
    if (!inputs.try_emplace(name, std::move(*tensor)).second)
      return reportError("--input '" + name + "' is given twice");
  }

  MLIRContext context;
  DriverDiagnostics diagnostics(context);
  std::unique_ptr<OnnxModel> model;
  OwningOpRef<ModuleOp> module = importModel(input, context, options, pipelineFlags.dumpIR, model);
  if (!module)
    return 1;
  auto func = *module->getOps<func::FuncOp>().begin();
  auto args = bindArguments(func, *model, inputs, exec);
  if (failed(args))
    return 1;
  auto results = runFunction(func, *args, exec);
  if (failed(results))
    return 1;

  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return reportError("--output-dir '" + outputDir + "': " + ec.message());
  for (auto [i, result] : llvm::enumerate(*results)) {
    auto name = func.getResultAttrOfType<StringAttr>(i, PpcDialect::kOutputAttrName);
    llvm::SmallString<256> path(outputDir);
    llvm::sys::path::append(path, outputFileName(name.getValue()));
    if (llvm::Error e = writeNpy(result, path))
      return reportError(llvm::toString(std::move(e)));
    llvm::errs() << "wrote " << printable(path) << "\n";
  }
  return 0;
}

} // namespace ppc
