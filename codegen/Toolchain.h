//===- Toolchain.h - building generated executables --------------*- C++ -*-===//
//
// CPU: the generated C++ is compiled by the system compiler (the one ppc was
// built with; PPC_CXX overrides it) against runtime/ppcrt and linked with
// libppcrt, MPI, OpenBLAS and OpenMP. CUDA: the generated .cu is compiled by
// the toolkit's nvcc (PPC_NVCC overrides it) for the architectures asked
// for and linked with libppcrt_cuda, cuBLASLt, NCCL and the same. CUDA on
// the emulator: the same .cu compiled as C++ by the system compiler against
// runtime/ppcrt/cuda/emulator and linked with libppcrt_cuda_emulator, so
// that it runs on CPUs (tests of the CUDA target without a GPU).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_TOOLCHAIN_H
#define PPC_CODEGEN_TOOLCHAIN_H

#include "codegen/Emitter.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace ppc::codegen {

/// How a generated source becomes an executable.
enum class Build {
  /// The C++ source (Target::Cpu) by the system compiler.
  Cpu,
  /// The CUDA source (Target::Cuda) by nvcc.
  Cuda,
  /// The CUDA source by the system compiler against the CUDA emulator.
  CudaEmulator,
};

/// Whether ppc was built with the CUDA target (a toolkit with cuBLASLt and
/// NCCL was found).
bool haveCudaToolkit();

/// Checks a --cuda-arch list ("sm_80,sm_90") and returns nvcc's -gencode
/// flags for it.
llvm::Expected<std::vector<std::string>> cudaArchFlags(llvm::StringRef archs);

/// The compiler command line that builds `source` into `output`.
std::vector<std::string> buildCommand(Build build, llvm::StringRef source, llvm::StringRef output,
                                      const std::vector<std::string> &archFlags = {});

/// Runs it; on failure, the error quotes the compiler's first lines.
llvm::Error buildExecutable(Build build, llvm::StringRef source, llvm::StringRef output,
                            const std::vector<std::string> &archFlags = {});

} // namespace ppc::codegen

#endif // PPC_CODEGEN_TOOLCHAIN_H
