//===- Toolchain.cpp - building generated executables ---------------------===//

#include "codegen/Toolchain.h"
#include "codegen/ToolchainConfig.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <cstdlib>

namespace ppc::codegen {

std::vector<std::string> cpuBuildCommand(llvm::StringRef source, llvm::StringRef output) {
  const char *cxx = std::getenv("PPC_CXX");
  std::vector<std::string> args = {cxx ? cxx : PPC_CXX_COMPILER,
                                   "-std=c++17",
                                   "-O3",
                                   "-march=native",
                                   PPC_OPENMP_FLAGS,
                                   "-I" PPC_SOURCE_DIR,
                                   "-w",
                                   source.str(),
                                   "-o",
                                   output.str()};
  for (const char *lib : {PPC_LINK_LIBRARIES})
    if (*lib)
      args.push_back(lib);
  args.push_back("-Wl,-rpath," PPC_LLVM_LIBRARY_DIR);
  args.push_back("-lpthread");
  return args;
}

llvm::Error buildCpuExecutable(llvm::StringRef source, llvm::StringRef output) {
  std::vector<std::string> args = cpuBuildCommand(source, output);
  auto program = llvm::sys::findProgramByName(args[0]);
  if (!program)
    return llvm::createStringError("the C++ compiler '" + args[0] + "' was not found");
  llvm::SmallString<128> log;
  if (auto ec = llvm::sys::fs::createTemporaryFile("ppc-cxx", "log", log))
    return llvm::createStringError("cannot create a temporary file: " + ec.message());
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*program, argv, std::nullopt, redirects, 0, 0,
                                         &message);
  auto text = llvm::MemoryBuffer::getFile(log);
  llvm::sys::fs::remove(log);
  if (status == 0)
    return llvm::Error::success();
  std::string first;
  if (text) {
    llvm::StringRef rest = (*text)->getBuffer();
    for (int line = 0; line < 8 && !rest.empty(); ++line) {
      auto [head, tail] = rest.split('\n');
      first += "\n  " + head.str();
      rest = tail;
    }
  }
  return llvm::createStringError("compiling the generated '" + source.str() + "' failed" +
                                 (message.empty() ? "" : " (" + message + ")") + ":" + first);
}

} // namespace ppc::codegen
