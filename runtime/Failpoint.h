//===- Failpoint.h - crash on purpose where a test asks --------------*- C++ -*-===//
//
// Fault-injection hook for the tests of what survives a crash
// (test/e2e/fault_injection.py): with PPC_FAILPOINT=NAME:K[:RANK[:hang]] in
// the environment, the process ends abruptly (_exit(137), the status SIGKILL
// leaves) the K-th time (from 1) it reaches failpoint NAME, on rank RANK
// (any rank when omitted or -1); with `hang` it stops instead (SIGSTOP), as
// a rank that hangs does (test/e2e/exe_parity.py's watchdog). Without the
// variable a failpoint costs one cached getenv. The points, in the order a
// run passes them:
//
//   step-done         a step's kernels and collectives are done, its error
//                     check and report not yet
//   shard-written     a rank's shard is in the staging directory, not yet digested
//   staging-complete  index.json is in the staging directory, not yet renamed
//   committed         the step directory is renamed, its parent not yet fsynced
//   pruning           an old checkpoint's index.json is removed, its files not yet
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_FAILPOINT_H
#define PPC_RUNTIME_FAILPOINT_H

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace ppcrt {

inline void failpoint(const char *name, long rank = -1) {
  static const char *spec = std::getenv("PPC_FAILPOINT");
  if (!spec)
    return;
  static std::string point;
  static long wanted = 0, onRank = -1, reached = 0;
  static bool parsed = false, hang = false;
  if (!parsed) {
    parsed = true;
    std::string text(spec);
    size_t colon = text.find(':');
    point = text.substr(0, colon);
    if (colon != std::string::npos) {
      char *end = nullptr;
      wanted = std::strtol(text.c_str() + colon + 1, &end, 10);
      if (end && *end == ':')
        onRank = std::strtol(end + 1, &end, 10);
      hang = end && std::strcmp(end, ":hang") == 0;
    }
  }
  if (point != name || (onRank >= 0 && rank >= 0 && rank != onRank))
    return;
  if (++reached != wanted)
    return;
  if (hang)
    std::raise(SIGSTOP);
  else
    _exit(137);
}

} // namespace ppcrt

#endif // PPC_RUNTIME_FAILPOINT_H
