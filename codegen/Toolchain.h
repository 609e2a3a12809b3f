//===- Toolchain.h - building generated executables --------------*- C++ -*-===//
//
// The generated C++ is compiled by the system compiler (the one ppc was
// built with; PPC_CXX overrides it) against runtime/ppcrt and linked with
// libppcrt, MPI, OpenBLAS and OpenMP.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_TOOLCHAIN_H
#define PPC_CODEGEN_TOOLCHAIN_H

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace ppc::codegen {

/// The compiler command line that builds `source` into `output`.
std::vector<std::string> cpuBuildCommand(llvm::StringRef source, llvm::StringRef output);

/// Runs it; on failure, the error quotes the compiler's first lines.
llvm::Error buildCpuExecutable(llvm::StringRef source, llvm::StringRef output);

} // namespace ppc::codegen

#endif // PPC_CODEGEN_TOOLCHAIN_H
