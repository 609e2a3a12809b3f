//===- Profile.h - --profile: each kernel's measured time --------*- C++ -*-===//
//
// What the executable's --profile reports (Profile.cpp): the time between
// the generated code's marks (Rank::mark), by kind of kernel, beside the
// compiler's predictions, and a Chrome trace of the last step.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_PROFILE_H
#define PPC_RUNTIME_PPCRT_PROFILE_H

#include "runtime/ppcrt/Rank.h"

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace ppcrt {

/// A profiler on the host's clock: what CPUs use.
std::unique_ptr<Profiler> hostProfiler(int numKernels);

struct ProfileReport {
  const Program &programInfo;
  const RankProgram &program;
  const Profiler &profiler;
  std::string device;
  /// The mean wall time of the profiled steps, marks and all.
  double stepSeconds = 0;
  int worldRank = 0, worldSize = 1;
  /// Print the table (the logging rank), of the `top` kinds that took the
  /// most.
  bool print = false;
  int top = 20;
  /// Where the Chrome trace goes ("": nowhere); ".rankR" is added before
  /// the extension when there are several ranks.
  std::string tracePath;
};

/// Where rank `worldRank` writes the trace asked for at `path`: `path`
/// itself for one rank, else with ".rankR" before its extension.
std::string tracePathOf(const std::string &path, int worldRank, int worldSize);

/// Prints the table to `os` (when r.print) and writes the trace. Returns a
/// one-line error (the trace could not be written), or "".
std::string reportProfile(const ProfileReport &r, llvm::raw_ostream &os);

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_PROFILE_H
