//===- ppc.cpp - the ppc compiler driver ----------------------------------===//

#include "tools/ppc/Driver.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace {
struct Command {
  const char *name;
  int (*run)(int, char **);
  const char *summary;
};

const Command commands[] = {
    {"import", ppc::runImportCommand, "ONNX model to ppc IR (MODEL.onnx [-o OUT.mlir])"},
    {"eval", ppc::runEvalCommand,
     "run a model on the reference executor (MODEL.onnx --input NAME=FILE.npy ...)"},
    {"simulate", ppc::runSimulateCommand,
     "train a model on the reference executor (MODEL.onnx --data F --steps N ...)"},
    {"compile", ppc::runCompileCommand,
     "build the partitioned training step (MODEL.onnx --mesh M --emit mlir ...)"},
    {"checkpoint", ppc::runCheckpointCommand,
     "inspect a checkpoint or consolidate it into one file (inspect|consolidate DIR ...)"},
};

void printUsage(llvm::raw_ostream &os) {
  os << "usage: ppc <command> [options]\n\ncommands:\n";
  for (const Command &c : commands)
    os << "  " << llvm::left_justify(c.name, 12) << c.summary << "\n";
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
  for (const Command &c : commands) {
    if (name != c.name)
      continue;
    // The command parses its own options; it is argv[0] of its line.
    std::string program = std::string("ppc ") + c.name;
    std::vector<char *> args{program.data()};
    args.insert(args.end(), argv + 2, argv + argc);
    return c.run(static_cast<int>(args.size()), args.data());
  }
  ppc::reportError("unknown command '" + name + "'; run `ppc --help`");
  return 1;
}
