//===- ImportCommand.cpp - `ppc import` -----------------------------------===//

#include "executor/Tensor.h"
#include "ir/PpcDialect.h"
#include "tools/ppc/Driver.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {

/// A one-screen description of the imported program.
static void printSummary(ModuleOp module, llvm::raw_ostream &os) {
  auto func = *module.getOps<func::FuncOp>().begin();
  auto source = module->getAttrOfType<StringAttr>(PpcDialect::kSourceAttrName);
  auto opset = module->getAttrOfType<IntegerAttr>(PpcDialect::kOpsetAttrName);
  os << "model       " << (source ? source.getValue() : "?") << " (opset "
     << (opset ? opset.getInt() : 0) << ")\n";
  int64_t paramTensors = 0, paramElements = 0, paramBytes = 0;
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto type = llvm::cast<RankedTensorType>(arg.getType());
    if (auto name = func.getArgAttrOfType<StringAttr>(i, PpcDialect::kInputAttrName))
      os << "input       " << name.getValue() << ": " << type << "\n";
    if (func.getArgAttr(i, PpcDialect::kParamAttrName)) {
      ++paramTensors;
      paramElements += type.getNumElements();
      paramBytes += type.getNumElements() * byteWidth(*dtypeOf(type.getElementType()));
    }
  }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    if (auto name = func.getResultAttrOfType<StringAttr>(i, PpcDialect::kOutputAttrName))
      os << "output      " << name.getValue() << ": " << type << "\n";
  os << llvm::formatv("parameters  {0} tensors, {1} elements ({2:f1} MiB)\n", paramTensors,
                      paramElements, paramBytes / 1048576.0);
  std::map<std::string, int64_t> histogram;
  int64_t total = 0;
  bool allStatic = true;
  func.walk([&](Operation *op) {
    if (op == func || llvm::isa<func::ReturnOp>(op))
      return;
    ++histogram[op->getName().getStringRef().str()];
    ++total;
    for (Type t : op->getResultTypes())
      if (auto shaped = llvm::dyn_cast<ShapedType>(t))
        allStatic &= shaped.hasStaticShape();
  });
  os << "ops         " << total << " (" << (allStatic ? "all" : "NOT all") << " shapes static)\n";
  for (const auto &[name, count] : histogram)
    os << llvm::formatv("  {0,-20} {1,5}\n", name, count);
}

int runImportCommand(int argc, char **argv) {
  cl::OptionCategory category("ppc import options");
  cl::opt<std::string> input(cl::Positional, cl::desc("MODEL.onnx"), cl::Required,
                             cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("write the IR to FILE (default: stdout)"),
                              cl::value_desc("FILE"), cl::init("-"), cl::cat(category));
  cl::opt<bool> summary("summary",
                        cl::desc("print a summary of the program instead of its IR "
                                 "(the IR still goes to -o FILE when given)"),
                        cl::cat(category));
  cl::list<std::string> dims("dim", cl::desc("size of a symbolic input dimension, NAME=N"),
                             cl::value_desc("NAME=N"), cl::cat(category));
  cl::opt<int64_t> maxFoldElements("max-fold-elements",
                                   cl::desc("largest constant (in elements) that folding produces"),
                                   cl::init(int64_t(1) << 22), cl::cat(category));
  ParameterFlags parameters(category);
  PipelineFlags pipelineFlags(category);
  parseCommandLine(argc, argv, category,
                   "ppc import: ONNX model to ppc IR\n\n"
                   "Imports MODEL.onnx (with its external data), folds shape computations\n"
                   "and constant subgraphs, and prints the ppc dialect.\n");

  ImportOptions options;
  options.maxFoldElements = maxFoldElements;
  if (failed(parseDimFlags(dims, options)))
    return 1;
  auto model = OnnxModel::load(input);
  if (!model)
    return reportError(llvm::toString(model.takeError()));
  if (failed(parameters.apply(**model, options)))
    return 1;
  MLIRContext context;
  DriverDiagnostics diagnostics(context);
  OwningOpRef<ModuleOp> module = importModel(**model, context, options, pipelineFlags.dumpIR);
  if (!module)
    return 1;
  if (summary) {
    printSummary(*module, llvm::outs());
    if (output == "-")
      return 0;
  }
  return failed(writeOutput(output, [&](llvm::raw_ostream &os) { module->print(os); }));
}

} // namespace ppc
