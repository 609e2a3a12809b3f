//===- NcclRank.h - ppcrt::Rank on NCCL --------------------------*- C++ -*-===//
//
// The CUDA runtime's communication (DESIGN.md §2): a world NCCL communicator
// bootstrapped through MPI (rank 0's unique id broadcast), split
// (ncclCommSplit) into one communicator per axis set the program names,
// with the same colors and keys as MpiRank's MPI_Comm_split, and one
// two-rank communicator per pipeline channel (Program::channels), so that
// a send never queues behind a receive. A send is made from a copy, so the
// program never waits for it (as MPI's buffered sends; Rank.h). Every communicator has its own
// stream: a call waits for the compute stream's work so far, runs on its
// stream beside the kernels that follow, and returns a ticket the generated
// code waits for before touching what the call reads or writes.
//
// Communicators are non-blocking (ncclConfig_t::blocking = 0). The step's
// end waits for every call, under MpiRank's watchdog: a call that takes
// longer than --timeout aborts every communicator (ncclCommAbort) and ends
// the job, naming the call (op, mesh axes, ONNX node, call number).
//
// From the second step on, the step runs as one CUDA graph (runStep): the
// first step, run from the host, creates what the step allocates on first
// use (cuBLASLt plans and workspace, packing space, send copies, NCCL's
// connections); the second is captured on the compute stream, with every
// communicator's stream joined into it, and launched; later steps launch the
// graph again. The arena's addresses never change, and what changes between
// steps (the step number, hyper-parameters, tokens) is copied into the
// arena before the launch. A graph's calls cannot be watched one by one:
// the watchdog names the graph and the axes of its calls. Programs with
// --offload (whose host ops wait for copies) run from the host.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_CUDA_NCCLRANK_H
#define PPC_RUNTIME_PPCRT_CUDA_NCCLRANK_H

#include "runtime/ppcrt/MpiRank.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <mutex>
#include <string>
#include <vector>

namespace ppcrt::cuda {

class NcclRank final : public MpiRank {
public:
  /// Collective over the world. `compute` is the stream the program runs on.
  NcclRank(const Program &program, double timeoutSeconds, cudaStream_t compute);
  ~NcclRank() override;

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
  Ticket transfer(void *to, const void *from, int64_t bytes, bool toHost,
                  const char *what) override;
  void wait(Ticket ticket) override;
  void waitOnHost(Ticket ticket) override;
  void runStep(const RankProgram &program, char *arena, char *hostArena, bool graphs) override;
  int64_t graphNodes() const override { return nodes; }
  void endStep() override;

private:
  struct Comm {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    /// Packing space for collectives over non-leading dimensions.
    void *scratch = nullptr, *scratch2 = nullptr;
    size_t scratchBytes = 0;
  };
  struct Call {
    cudaEvent_t done;
    const char *what;
  };

  void abortCommunicators() override;
  /// Waits until `comm` has finished what its last call started (a
  /// non-blocking communicator returns ncclInProgress meanwhile).
  void settle(ncclComm_t comm, const char *what);
  /// Checks an NCCL result; ends the job on an error.
  void checkNccl(ncclResult_t result, ncclComm_t comm, const char *what);
  /// Orders `comm`'s stream after the compute stream's work so far.
  void begin(Comm &comm);
  /// Records the end of a call on `comm`'s stream; returns its ticket.
  Ticket finish(Comm &comm, const char *what);
  /// Makes `comm`'s packing space at least `bytes` large (twice), ordered
  /// on its stream.
  void reserve(Comm &comm, size_t bytes);
  /// Device memory for the copy a send is made from (one per send of the
  /// step, reused from the next step on).
  void *stage(size_t bytes);
  /// Stops the job when a communicator reports an error (a dead peer).
  void checkAsyncErrors(const char *what);
  /// The channel comm for messages from coordinate `from` to `to` on `axis`.
  Comm &channel(const char *axis, int64_t from, int64_t to, const char *what);

  cudaStream_t compute;
  ncclComm_t world = nullptr;
  std::vector<Comm> groupComms;
  std::vector<Comm> channelComms;
  /// The copy streams of --offload's transfers (no communicator).
  Comm toHost, toDevice;
  cudaEvent_t ready = nullptr;
  /// The calls of this step, by ticket - 1; events are reused across steps.
  std::vector<Call> calls;
  size_t callsThisStep = 0;
  struct Staged {
    void *data;
    size_t bytes;
  };
  std::vector<Staged> staged;
  size_t stagedThisStep = 0;
  /// The step as a CUDA graph (runStep), captured from the second step.
  cudaGraphExec_t graph = nullptr;
  int64_t nodes = 0, stepsRun = 0;
  /// What the watchdog names while the graph runs (its calls' axes).
  std::string graphWhat;
  std::mutex aborting;
  bool aborted = false;
};

} // namespace ppcrt::cuda

#endif // PPC_RUNTIME_PPCRT_CUDA_NCCLRANK_H
