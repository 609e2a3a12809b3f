//===- Toolchain.cpp - building generated executables ---------------------===//

#include "codegen/Toolchain.h"
#include "codegen/ToolchainConfig.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <cstdlib>

namespace ppc::codegen {

bool haveCudaToolkit() {
#ifdef PPC_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

llvm::Expected<std::vector<std::string>> cudaArchFlags(llvm::StringRef archs) {
  llvm::SmallVector<llvm::StringRef> names;
  archs.split(names, ',', -1, false);
  if (names.empty())
    return llvm::createStringError("--cuda-arch: name at least one architecture (sm_90)");
  std::vector<std::string> flags;
  for (llvm::StringRef name : names) {
    name = name.trim();
    unsigned number = 0;
    llvm::StringRef digits = name;
    if (!digits.consume_front("sm_") || digits.getAsInteger(10, number) || number < 75)
      return llvm::createStringError("--cuda-arch '" + name.str() +
                                     "': expected sm_NN with NN >= 75 (sm_80, sm_90, ...)");
    flags.push_back("-gencode");
    flags.push_back("arch=compute_" + digits.str() + ",code=" + name.str());
  }
  return flags;
}

static std::vector<std::string> cudaBuildCommand(llvm::StringRef source, llvm::StringRef output,
                                                 const std::vector<std::string> &archFlags) {
#ifdef PPC_HAVE_CUDA
  const char *nvcc = std::getenv("PPC_NVCC");
  // OpenMP for the loops the host runs (--offload's optimizer step).
  std::vector<std::string> args = {nvcc ? nvcc : PPC_NVCC,         "-std=c++17",        "-O3",
                                   "-Xcompiler=" PPC_OPENMP_FLAGS, "-I" PPC_SOURCE_DIR, "-w"};
  args.insert(args.end(), archFlags.begin(), archFlags.end());
  args.insert(args.end(), {source.str(), "-o", output.str()});
  // nvcc takes libraries named *.a or *.so; others (libonnx_proto.so.1)
  // go to the host linker as they are.
  for (const char *lib : {PPC_CUDA_LINK_LIBRARIES, PPC_LINK_LIBRARIES}) {
    llvm::StringRef name(lib);
    if (name.empty())
      continue;
    if (name.ends_with(".a") || name.ends_with(".so"))
      args.push_back(lib);
    else
      args.push_back("-Xlinker=" + name.str());
  }
  args.push_back("-Xlinker=-rpath," PPC_CUDA_LIBRARY_DIR);
  args.push_back("-lpthread");
  return args;
#else
  (void)source, (void)output, (void)archFlags;
  return {};
#endif
}

/// The system compiler's command: `compile` (flags and the source), then
/// the target's runtime archive `targetLibrary`, what every host build
/// links, and OpenBLAS (the CPU GEMMs and the emulated cuBLASLt's).
static std::vector<std::string> hostBuildCommand(std::vector<std::string> compile,
                                                 llvm::StringRef output,
                                                 const char *targetLibrary) {
  const char *cxx = std::getenv("PPC_CXX");
  std::vector<std::string> args = {cxx ? cxx : PPC_CXX_COMPILER, "-std=c++17", PPC_OPENMP_FLAGS,
                                   "-I" PPC_SOURCE_DIR, "-w"};
  args.insert(args.end(), compile.begin(), compile.end());
  args.insert(args.end(), {"-o", output.str()});
  args.push_back(targetLibrary);
  for (const char *lib : {PPC_LINK_LIBRARIES})
    if (*lib)
      args.push_back(lib);
  args.push_back(PPC_OPENBLAS_LIBRARY);
  args.push_back("-lpthread");
  return args;
}

std::vector<std::string> buildCommand(Build build, llvm::StringRef source, llvm::StringRef output,
                                      const std::vector<std::string> &archFlags) {
  if (build == Build::Cuda)
    return cudaBuildCommand(source, output, archFlags);
  if (build == Build::CudaEmulator)
    // The CUDA source as C++, the emulator's CUDA headers first. -O1: the
    // emulator's time goes into its threads' switches and its mma.sync (in
    // its library, built optimised), not into the generated code. (A test GPT:
    // -O0 builds in 2.8 s rather than 6.5, and steps 40% slower.)
    return hostBuildCommand({"-O1", "-I" PPC_SOURCE_DIR "/runtime/ppcrt/cuda/emulator/include",
                             "-x", "c++", source.str(), "-x", "none"},
                            output, PPC_CUDA_EMULATOR_LIBRARY);
  // -ffp-contract=off: each op of a fusion group rounds once, as the
  // reference executor's do, wherever the group's boundaries fall; with
  // contraction a recomputed clone fused with other neighbours than its
  // original rounded differently (e2e-recompute). The GEMMs, attention's
  // products among them, are OpenBLAS's, with FMAs.
  // -fno-trapping-math and -fno-math-errno change no result: nothing reads
  // the floating-point exception flags or errno, and without them GCC
  // vectorizes no loop with a select (max, relu, where, Math.h's exp) or a
  // sqrt (issue 19: 174 of a GPT's loops vectorized, 216 with them).
  return hostBuildCommand({"-O3", "-march=native", "-ffp-contract=off", "-fno-trapping-math",
                           "-fno-math-errno", source.str()},
                          output, PPC_CPU_LIBRARY);
}

llvm::Error buildExecutable(Build build, llvm::StringRef source, llvm::StringRef output,
                            const std::vector<std::string> &archFlags) {
  std::vector<std::string> args = buildCommand(build, source, output, archFlags);
  if (args.empty())
    return llvm::createStringError("the CUDA target is not built: ppc found no CUDA toolkit "
                                   "with cuBLASLt and NCCL when it was configured");
  auto program = llvm::sys::findProgramByName(args[0]);
  if (!program)
    return llvm::createStringError("the compiler '" + args[0] + "' was not found");
  llvm::SmallString<128> log;
  if (auto ec = llvm::sys::fs::createTemporaryFile("ppc-cxx", "log", log))
    return llvm::createStringError("cannot create a temporary file: " + ec.message());
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*program, argv, std::nullopt, redirects, 0, 0, &message);
  auto text = llvm::MemoryBuffer::getFile(log);
  llvm::sys::fs::remove(log);
  if (status == 0)
    return llvm::Error::success();
  std::string first;
  if (text) {
    llvm::StringRef rest = (*text)->getBuffer();
    for (int line = 0; line < 8 && !rest.empty();) {
      auto [head, tail] = rest.split('\n');
      rest = tail;
      if (head.trim().empty())
        continue;
      first += "\n  " + head.str();
      ++line;
    }
  }
  return llvm::createStringError("compiling the generated '" + source.str() + "' failed" +
                                 (message.empty() ? "" : " (" + message + ")") + ":" + first);
}

} // namespace ppc::codegen
