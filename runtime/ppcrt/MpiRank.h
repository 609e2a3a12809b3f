//===- MpiRank.h - ppcrt::Rank on MPI ----------------------------*- C++ -*-===//
//
// One MPI sub-communicator per axis set the program names (MPI_Comm_split of
// the world by the coordinates off those axes, ordered by the position in
// the group), collectives mapped 1:1 to MPI calls, and point-to-point
// messages on the world communicator, sent from copies so that a send never
// waits for its receive (the schedule checker assumes as much). A watchdog
// thread ends the process when one call waits longer than the timeout.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_MPIRANK_H
#define PPC_RUNTIME_PPCRT_MPIRANK_H

#include "runtime/ppcrt/Rank.h"

#include <mpi.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace ppcrt {

/// Marks this process as ending on an error already reported (every rank
/// leaving together): a SIGTERM from mpirun stopping the job then ends it
/// without a second error line.
void stopQuietly();

class MpiRank : public Rank {
public:
  /// Creates the communicators of `program.groups` (collective over the
  /// world). `timeoutSeconds` <= 0 disables the watchdog.
  MpiRank(const Program &program, double timeoutSeconds);
  ~MpiRank() override;

  int worldRank() const override { return rank; }
  int64_t position(int g) const override { return groups[g].position; }
  int64_t groupSize(int g) const override { return groups[g].size; }
  /// This rank's coordinates on the mesh (Blocks.h), one per axis.
  const std::vector<int64_t> &coordinates() const { return coords; }

  Ticket allReduce(int g, DType dtype, const void *in, void *out, int64_t count,
                   Reduction reduction, const char *what) override;
  Ticket allGather(int g, DType dtype, const void *in, void *out, int64_t outer, int64_t inner,
                   const char *what) override;
  Ticket reduceScatter(int g, DType dtype, const void *in, void *out, int64_t outer, int64_t inner,
                       Reduction reduction, const char *what) override;
  Ticket allToAll(int g, DType dtype, const void *in, void *out, const int64_t *shape, int rank,
                  int split, int concat, const char *what) override;
  Ticket send(const char *axis, int64_t peer, DType dtype, const void *data, int64_t count,
              const char *what) override;
  Ticket recv(const char *axis, int64_t peer, DType dtype, void *data, int64_t count,
              const char *what) override;
  void endStep() override;
  void watched(const char *what, const std::function<void()> &call) override {
    enter(what);
    call();
    leave();
  }

  /// What this rank is waiting in now (null when computing), without
  /// allocating: signal handlers read it.
  const char *waitingFor() const { return waitingIn.load(); }
  /// Blocking calls made so far (the number of the current one).
  int64_t calls() const { return sequence.load(); }

protected:
  struct Group {
    MPI_Comm comm = MPI_COMM_NULL;
    int64_t position = 0, size = 1;
  };
  struct PendingSend {
    std::vector<char> data;
    MPI_Request request;
  };

  /// Called by the watchdog before it stops the job: a subclass aborts the
  /// communicators it adds (NCCL's) so that no kernel waits on a dead peer.
  virtual void abortCommunicators() {}

  /// Marks the start and end of a blocking call for the watchdog.
  void enter(const char *what);
  void leave();
  void watch();
  /// The world rank whose coordinate on `axis` is `peer`, the others being
  /// this rank's.
  int peerRank(const char *axis, int64_t peer) const;

  const Program &program;
  int rank = 0, worldSize = 1;
  std::vector<int64_t> coords;
  std::vector<Group> groups;
  std::vector<PendingSend> pending;
  std::vector<char> scratch, scratch2;
  double timeout;
  std::atomic<const char *> waitingIn{nullptr};
  std::atomic<int64_t> sequence{0};
  std::atomic<double> waitingSince{0};
  std::atomic<bool> stopping{false};
  std::thread watchdog;
};

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_MPIRANK_H
