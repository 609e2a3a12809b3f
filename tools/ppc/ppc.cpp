//===- ppc.cpp - the ppc compiler driver ----------------------------------===//

#include "tools/ppc/Driver.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace {
const ppc::Subcommand commands[] = {
    {"import", ppc::runImportCommand, "ONNX model to ppc IR (MODEL.onnx [-o OUT.mlir])"},
    {"eval", ppc::runEvalCommand,
     "run a model on the reference executor (MODEL.onnx --input NAME=FILE.npy ...)"},
    {"simulate", ppc::runSimulateCommand,
     "train a model on the reference executor (MODEL.onnx --data F --steps N ...)"},
    {"compile", ppc::runCompileCommand,
     "build the partitioned training step (MODEL.onnx --mesh M --emit mlir ...)"},
    {"explain", ppc::runExplainCommand,
     "why each collective and pipeline message is there (ppc compile's flags: MODEL.onnx "
     "--mesh M ...)"},
    {"plan", ppc::runPlanCommand,
     "choose the whole layout from the device count (MODEL.onnx --devices N ...)"},
    {"checkpoint", ppc::runCheckpointCommand,
     "inspect a checkpoint or consolidate it into one file (inspect|consolidate DIR ...)"},
};

void printUsage(llvm::raw_ostream &os) {
  os << "usage: ppc <command> [options]\n\ncommands:\n";
  ppc::printSubcommands(commands, os);
  os << "\n`ppc <command> --help` lists a command's options.\n";
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc < 2) {
    printUsage(llvm::errs());
    return 1;
  }
  llvm::StringRef name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    printUsage(llvm::outs());
    return 0;
  }
  if (std::optional<int> status = ppc::runSubcommand(commands, "ppc", argc, argv))
    return *status;
  ppc::reportError("unknown command '" + name + "'; run `ppc --help`");
  return 1;
}
