//===- Rank.h - the communication a generated rank program calls ---------===//
//
// One object per process. Collectives and point-to-point messages map 1:1 to
// MPI (CPU) or NCCL (CUDA) calls on the communicator of the mesh group they
// name (created once at start-up, DESIGN.md §2). Every call names what it
// does for the watchdog and for errors: "all_reduce on [dp] for node
// 'blocks.0/attn/MatMul'".
//
// A call returns a ticket. On CPUs the call is complete when it returns; on
// GPUs it is queued on a communication stream and runs beside the program's
// kernels, and generated code calls wait(ticket) before the first kernel
// that reads what it writes or overwrites what it reads.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_RANK_H
#define PPC_RUNTIME_PPCRT_RANK_H

#include "runtime/ppcrt/Program.h"

#include <functional>
#include <memory>
#include <vector>

namespace ppcrt {

enum class Reduction { Sum, Max };

/// Times what a rank program runs between its marks (--profile): the host's
/// clock on CPUs, CUDA events on the compute stream on GPUs.
class Profiler {
public:
  virtual ~Profiler();
  /// Mark `k` of the step now running (RankProgram::kernels).
  virtual void mark(int k) = 0;
  /// The step has ended: adds its time between each pair of marks.
  virtual void endStep() = 0;
  /// Seconds between mark k and k + 1 of the last step; per step over the
  /// steps since reset; and how many those are.
  const std::vector<double> &lastStep() const { return last; }
  const std::vector<double> &total() const { return sum; }
  int64_t steps() const { return numSteps; }
  /// Forgets the steps so far (the first, which warms up).
  void reset();

protected:
  /// Adds one step's seconds per kernel (endStep's implementations).
  void add(std::vector<double> seconds);

private:
  std::vector<double> last, sum;
  int64_t numSteps = 0;
};

/// A communication call in flight (0: one that is complete).
using Ticket = int64_t;

class Rank {
public:
  virtual ~Rank();

  /// This process's rank in the world and its position/size in group `g`
  /// (an index into Program::groups).
  virtual int worldRank() const = 0;
  virtual int64_t position(int g) const = 0;
  virtual int64_t groupSize(int g) const = 0;

  /// `out` = the elementwise reduction of every group member's `in`
  /// (`count` elements; `in == out` allowed).
  virtual Ticket allReduce(int g, DType dtype, const void *in, void *out, int64_t count,
                           Reduction reduction, const char *what) = 0;
  /// `in` is [outer, inner]; `out` is [outer, size * inner], the members'
  /// blocks side by side in group order.
  virtual Ticket allGather(int g, DType dtype, const void *in, void *out, int64_t outer,
                           int64_t inner, const char *what) = 0;
  /// `in` is [outer, size * inner]; `out` is [outer, inner]: block
  /// `position(g)` of the reduction over the group.
  virtual Ticket reduceScatter(int g, DType dtype, const void *in, void *out, int64_t outer,
                               int64_t inner, Reduction reduction, const char *what) = 0;
  /// `in` has `shape` (rank `rank`); it is cut into size blocks along
  /// `split`, block j goes to member j, and the blocks received are
  /// concatenated along `concat` in group order into `out`.
  virtual Ticket allToAll(int g, DType dtype, const void *in, void *out, const int64_t *shape,
                          int rank, int split, int concat, const char *what) = 0;
  /// Sends `count` elements to the rank whose coordinate on mesh axis
  /// `axis` is `peer` (the other coordinates being this rank's). Returns at
  /// once: the data is copied and delivered in order per peer.
  virtual Ticket send(const char *axis, int64_t peer, DType dtype, const void *data, int64_t count,
                      const char *what) = 0;
  /// Receives the next message from that rank into `data`.
  virtual Ticket recv(const char *axis, int64_t peer, DType dtype, void *data, int64_t count,
                      const char *what) = 0;
  /// Copies `bytes` from device memory to host memory (`toHost`) or from
  /// host to device (--offload). On CPUs, one memory, a copy complete when
  /// it returns; on GPUs it runs on a copy stream after the kernels so far.
  virtual Ticket transfer(void *to, const void *from, int64_t bytes, bool toHost, const char *what);
  /// Makes the program's next kernels wait for call `ticket`.
  virtual void wait(Ticket ticket) { (void)ticket; }
  /// Blocks until call `ticket` is complete: before the host's own ops
  /// (--offload) read what it writes or overwrite what it reads.
  virtual void waitOnHost(Ticket ticket) { (void)ticket; }
  /// Runs one step of `program` (endStep ends it). `graphs`: the CUDA rank
  /// captures the second step as a CUDA graph and launches it for that step
  /// and every later one, instead of each kernel from the host.
  virtual void runStep(const RankProgram &program, char *arena, char *hostArena, bool graphs) {
    (void)graphs;
    program.run(*this, arena, hostArena);
  }
  /// The operations of the step's CUDA graph (0 before it is captured, and
  /// where there is none).
  virtual int64_t graphNodes() const { return 0; }
  /// Ends a step: waits for every call and for the messages this rank sent.
  virtual void endStep() = 0;
  /// Runs `call`, one of the runtime's own collectives on the world (the
  /// ranks' error check after a step, the step's verdict, a checkpoint's
  /// digests), under the same watchdog as the program's: a peer that hangs
  /// between steps stops every rank too.
  virtual void watched(const char *what, const std::function<void()> &call) = 0;

  /// Generated code marks the start of each kernel, library call and
  /// communication call, and the step's end (RankProgram::kernels); a mark
  /// costs a test unless --profile attached a profiler.
  void mark(int k) {
    if (profiler)
      profiler->mark(k);
  }
  Profiler *profiler = nullptr;
};

/// Records an error of the running program's CPU kernels (a gather index
/// out of range, ...): the first one of the step is kept, the kernel goes on
/// with a defined result (a zero row, a skipped target), and the runtime
/// stops every rank cleanly at the step's end, as the CUDA kernels' error
/// flag does. Safe from any thread.
void kernelFailed(const char *message);
/// The error recorded since the last call (nullptr when none), cleared.
const char *takeKernelError();

/// Ends the job on an unrecoverable error of this rank (a CUDA, cuBLAS or
/// NCCL call failed): prints it, naming the rank, and aborts every rank with
/// MPI_Abort, since peers may wait inside a collective that can no longer
/// complete (Open MPI adds its abort banner after the line).
[[noreturn]] void fatal(const char *message);

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_RANK_H
