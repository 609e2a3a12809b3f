//===- NcclRank.cpp - ppcrt::Rank on NCCL ---------------------------------===//

#include "runtime/ppcrt/cuda/NcclRank.h"
#include "runtime/ppcrt/Blocks.h"
#include "runtime/ppcrt/cuda/Cuda.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ppcrt::cuda {

static ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::F64:
    return ncclFloat64;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  case DType::I64:
    return ncclInt64;
  case DType::I32:
    return ncclInt32;
  case DType::I8:
    return ncclInt8;
  case DType::U8:
  case DType::I1:
    return ncclUint8;
  case DType::U32:
    return ncclUint32;
  case DType::U64:
    return ncclUint64;
  case DType::I16:
  case DType::U16:
    break; // NCCL has no 16-bit integers; ppc's programs communicate none
  }
  return ncclUint8;
}

static ncclRedOp_t ncclOp(Reduction reduction) {
  return reduction == Reduction::Sum ? ncclSum : ncclMax;
}

[[noreturn]] static void stop(const std::string &message) { fatal(message.c_str()); }

void NcclRank::checkNccl(ncclResult_t result, ncclComm_t comm, const char *what) {
  if (result == ncclInProgress && comm) {
    settle(comm, what);
    return;
  }
  if (result != ncclSuccess)
    stop(std::string("NCCL: ") + ncclGetErrorString(result) + " in " + what +
         (comm ? std::string(": ") + ncclGetLastError(comm) : std::string()));
}

void NcclRank::settle(ncclComm_t comm, const char *what) {
  ncclResult_t state = ncclInProgress;
  enter(what);
  while (state == ncclInProgress) {
    ncclResult_t status = ncclCommGetAsyncError(comm, &state);
    if (status != ncclSuccess)
      state = status;
  }
  leave();
  if (state != ncclSuccess)
    stop(std::string("NCCL: ") + ncclGetErrorString(state) + " in " + what + ": " +
         ncclGetLastError(comm));
}

NcclRank::NcclRank(const Program &program, double timeoutSeconds, cudaStream_t compute)
    : MpiRank(program, timeoutSeconds), compute(compute) {
  // Connections made when communicators are created, not at a call's first
  // use, where settle() would hold the host until the peer reaches it too.
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId id;
  if (rank == 0)
    checkNccl(ncclGetUniqueId(&id), nullptr, "creating the NCCL unique id");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  // The call writes `world`, which checkNccl must see: one statement each.
  ncclResult_t created = ncclCommInitRankConfig(&world, worldSize, id, rank, &config);
  checkNccl(created, world, "creating the world NCCL communicator");
  settle(world, "creating the world NCCL communicator");

  // One communicator per group, as MpiRank's: ranks sharing the coordinates
  // off the group's axes, ordered by their position in it.
  for (int g = 0; g < program.numGroups; ++g) {
    std::vector<int64_t> color = coords;
    for (int a : meshAxisIndices(program, program.groups[g]))
      color[a] = 0;
    Comm comm;
    std::string what =
        std::string("creating the NCCL communicator over '") + program.groups[g] + "'";
    checkNccl(ncclCommSplit(world, int(meshRankAt(program, color)), int(groups[g].position),
                            &comm.comm, &config),
              world, what.c_str());
    settle(world, what.c_str());
    settle(comm.comm, what.c_str());
    check(cudaStreamCreateWithFlags(&comm.stream, cudaStreamNonBlocking), what.c_str());
    groupComms.push_back(comm);
  }
  // One two-rank communicator per channel: the rank at `from` (NCCL rank 0)
  // and the one at `to` (1), the other coordinates alike.
  for (int c = 0; c < program.numChannels; ++c) {
    const Channel &ch = program.channels[c];
    int64_t at = coordinateOn(program, coords, ch.axis);
    Comm comm;
    int color = NCCL_SPLIT_NOCOLOR, key = 0;
    if (at == ch.from || at == ch.to) {
      color = peerRank(ch.axis, ch.from);
      key = at == ch.from ? 0 : 1;
    }
    std::string what = "creating the NCCL channel from " + std::to_string(ch.from) + " to " +
                       std::to_string(ch.to) + " on '" + ch.axis + "'";
    checkNccl(ncclCommSplit(world, color, key, &comm.comm, &config), world, what.c_str());
    settle(world, what.c_str());
    if (comm.comm) {
      settle(comm.comm, what.c_str());
      check(cudaStreamCreateWithFlags(&comm.stream, cudaStreamNonBlocking), what.c_str());
    }
    channelComms.push_back(comm);
  }
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "creating a CUDA event");
  // --offload: a copy stream each way, so gradients going to the host and
  // parameters coming back do not wait for each other.
  for (Comm *copies : {&toHost, &toDevice})
    check(cudaStreamCreateWithFlags(&copies->stream, cudaStreamNonBlocking),
          "creating a copy stream");
}

NcclRank::~NcclRank() {
  endStep();
  for (Comm *copies : {&toHost, &toDevice})
    cudaStreamDestroy(copies->stream);
  for (Call &call : calls)
    cudaEventDestroy(call.done);
  cudaEventDestroy(ready);
  if (graph)
    cudaGraphExecDestroy(graph);
  for (Staged &buffer : staged)
    cudaFree(buffer.data);
  // Non-blocking communicators are finalized (flushing what they still
  // owe their peers) before they are destroyed; the children first.
  auto close = [&](ncclComm_t comm) {
    if (!comm || aborted)
      return;
    checkNccl(ncclCommFinalize(comm), comm, "finalizing an NCCL communicator");
    settle(comm, "finalizing an NCCL communicator");
    ncclCommDestroy(comm);
  };
  for (std::vector<Comm> *comms : {&groupComms, &channelComms})
    for (Comm &comm : *comms) {
      close(comm.comm);
      if (comm.stream)
        cudaStreamDestroy(comm.stream);
      cudaFree(comm.scratch);
      cudaFree(comm.scratch2);
    }
  close(world);
}

void NcclRank::abortCommunicators() {
  std::lock_guard<std::mutex> lock(aborting);
  if (aborted)
    return;
  aborted = true;
  for (std::vector<Comm> *comms : {&groupComms, &channelComms})
    for (Comm &comm : *comms)
      if (comm.comm)
        ncclCommAbort(comm.comm);
  if (world)
    ncclCommAbort(world);
}

//===----------------------------------------------------------------------===//
// Streams and tickets
//===----------------------------------------------------------------------===//

void NcclRank::begin(Comm &comm) {
  check(cudaEventRecord(ready, compute), "ordering a collective after the kernels");
  check(cudaStreamWaitEvent(comm.stream, ready, 0), "ordering a collective after the kernels");
}

Ticket NcclRank::finish(Comm &comm, const char *what) {
  if (callsThisStep == calls.size()) {
    Call call;
    check(cudaEventCreateWithFlags(&call.done, cudaEventDisableTiming), "creating a CUDA event");
    calls.push_back(call);
  }
  Call &call = calls[callsThisStep++];
  call.what = what;
  check(cudaEventRecord(call.done, comm.stream), what);
  return Ticket(callsThisStep);
}

Ticket NcclRank::transfer(void *to, const void *from, int64_t bytes, bool toHostMemory,
                          const char *what) {
  Comm &copies = toHostMemory ? toHost : toDevice;
  begin(copies);
  check(cudaMemcpyAsync(to, from, size_t(bytes),
                        toHostMemory ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                        copies.stream),
        what);
  return finish(copies, what);
}

void NcclRank::waitOnHost(Ticket ticket) {
  if (ticket <= 0)
    return;
  enter(calls[ticket - 1].what);
  check(cudaEventSynchronize(calls[ticket - 1].done), calls[ticket - 1].what);
  leave();
}

void NcclRank::wait(Ticket ticket) {
  if (ticket <= 0)
    return;
  // On a GPU this returns at once; the CUDA emulator runs the call here, so
  // it is watched as a blocking call.
  enter(calls[ticket - 1].what);
  check(cudaStreamWaitEvent(compute, calls[ticket - 1].done, 0), calls[ticket - 1].what);
  leave();
}

void NcclRank::runStep(const RankProgram &program, char *arena, char *hostArena, bool graphs) {
  if (!graphs || program.hostArenaBytes > 0 || ++stepsRun < 2) {
    program.run(*this, arena, hostArena);
    return;
  }
  if (!graph) {
    const char *what = "capturing the step as a CUDA graph";
    check(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal), what);
    program.run(*this, arena, hostArena);
    // Every communicator's stream joins the compute stream before the
    // capture ends (a graph's forks must), so the graph is done when its
    // last call is.
    std::string axes;
    for (size_t i = 0; i < callsThisStep; ++i) {
      check(cudaStreamWaitEvent(compute, calls[i].done, 0), what);
      std::string call = calls[i].what;
      size_t on = call.find(" on ["), end = call.find(']', on);
      if (on == std::string::npos || end == std::string::npos)
        continue;
      std::string axis = call.substr(on + 4, end - on - 3);
      if (axes.find(axis) == std::string::npos)
        axes += (axes.empty() ? "" : ", ") + axis;
    }
    cudaGraph_t captured = nullptr;
    check(cudaStreamEndCapture(compute, &captured), what);
    size_t count = 0;
    check(cudaGraphGetNodes(captured, nullptr, &count), what);
    check(cudaGraphInstantiate(&graph, captured, 0), what);
    check(cudaGraphDestroy(captured), what);
    nodes = int64_t(count);
    graphWhat = "the step's CUDA graph (" + std::to_string(callsThisStep) + " calls" +
                (axes.empty() ? "" : " on " + axes) + ")";
    // The events of a capture are not recorded when the graph runs: the
    // step's end waits for the compute stream instead (endStep).
    callsThisStep = 0;
  }
  // The emulator runs the graph's calls here; a GPU returns at once.
  enter(graphWhat.c_str());
  check(cudaGraphLaunch(graph, compute), "launching the step's CUDA graph");
  leave();
}

void NcclRank::endStep() {
  // Every call, in order, under the watchdog (enter/leave): a peer that
  // died leaves its event pending until --timeout.
  for (size_t i = 0; i < callsThisStep; ++i) {
    enter(calls[i].what);
    cudaError_t status;
    while ((status = cudaEventQuery(calls[i].done)) == cudaErrorNotReady)
      checkAsyncErrors(calls[i].what);
    leave();
    check(status, calls[i].what);
  }
  callsThisStep = 0;
  stagedThisStep = 0;
  // The kernels, and a graph's calls, likewise.
  const char *what = graph ? graphWhat.c_str() : "finishing the step's kernels";
  enter(what);
  cudaError_t status;
  while ((status = cudaStreamQuery(compute)) == cudaErrorNotReady)
    checkAsyncErrors(what);
  leave();
  check(status, what);
}

void NcclRank::checkAsyncErrors(const char *what) {
  for (std::vector<Comm> *comms : {&groupComms, &channelComms})
    for (Comm &comm : *comms) {
      if (!comm.comm)
        continue;
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm.comm, &state) == ncclSuccess && state != ncclSuccess &&
          state != ncclInProgress) {
        abortCommunicators();
        stop(std::string("NCCL: ") + ncclGetErrorString(state) + " while waiting in " + what +
             ": " + ncclGetLastError(comm.comm));
      }
    }
}

void NcclRank::reserve(Comm &comm, size_t bytes) {
  if (comm.scratchBytes >= bytes)
    return;
  // Ordered on the communicator's stream after the calls still using the
  // old space; nothing here waits on the host (a peer may be late).
  const char *what = "allocating a collective's packing space";
  if (comm.scratch) {
    check(cudaFreeAsync(comm.scratch, comm.stream), what);
    check(cudaFreeAsync(comm.scratch2, comm.stream), what);
  }
  check(cudaMallocAsync(&comm.scratch, bytes, comm.stream), what);
  check(cudaMallocAsync(&comm.scratch2, bytes, comm.stream), what);
  comm.scratchBytes = bytes;
}

void *NcclRank::stage(size_t bytes) {
  if (stagedThisStep == staged.size())
    staged.push_back({nullptr, 0});
  Staged &buffer = staged[stagedThisStep++];
  if (buffer.bytes < bytes) {
    // The schedule is the same every step: this happens in the first only.
    const char *what = "allocating a send's copy";
    if (buffer.data)
      check(cudaFreeAsync(buffer.data, compute), what);
    check(cudaMallocAsync(&buffer.data, bytes, compute), what);
    buffer.bytes = bytes;
  }
  return buffer.data;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

Ticket NcclRank::allReduce(int g, DType dtype, const void *in, void *out, int64_t count,
                           Reduction reduction, const char *what) {
  Comm &comm = groupComms[g];
  begin(comm);
  checkNccl(ncclAllReduce(in, out, size_t(count), ncclType(dtype), ncclOp(reduction), comm.comm,
                          comm.stream),
            comm.comm, what);
  return finish(comm, what);
}

Ticket NcclRank::allGather(int g, DType dtype, const void *in, void *out, int64_t outer,
                           int64_t inner, const char *what) {
  Comm &comm = groupComms[g];
  int64_t size = groups[g].size, bytes = int64_t(dtypeBytes(dtype));
  if (outer != 1)
    reserve(comm, size * outer * inner * bytes);
  begin(comm);
  if (outer == 1) {
    checkNccl(ncclAllGather(in, out, size_t(inner), ncclType(dtype), comm.comm, comm.stream),
              comm.comm, what);
    return finish(comm, what);
  }
  // Members' blocks arrive one after the other; interleave them per row.
  checkNccl(ncclAllGather(in, comm.scratch, size_t(outer * inner), ncclType(dtype), comm.comm,
                          comm.stream),
            comm.comm, what);
  for (int64_t j = 0; j < size; ++j)
    check(cudaMemcpy2DAsync(static_cast<char *>(out) + j * inner * bytes, size * inner * bytes,
                            static_cast<char *>(comm.scratch) + j * outer * inner * bytes,
                            inner * bytes, inner * bytes, outer, cudaMemcpyDeviceToDevice,
                            comm.stream),
          what);
  return finish(comm, what);
}

Ticket NcclRank::reduceScatter(int g, DType dtype, const void *in, void *out, int64_t outer,
                               int64_t inner, Reduction reduction, const char *what) {
  Comm &comm = groupComms[g];
  int64_t size = groups[g].size, bytes = int64_t(dtypeBytes(dtype));
  if (outer != 1)
    reserve(comm, size * outer * inner * bytes);
  begin(comm);
  const void *send = in;
  if (outer != 1) {
    // Member j's block (rows of every outer index) made contiguous.
    for (int64_t j = 0; j < size; ++j)
      check(cudaMemcpy2DAsync(static_cast<char *>(comm.scratch) + j * outer * inner * bytes,
                              inner * bytes, static_cast<const char *>(in) + j * inner * bytes,
                              size * inner * bytes, inner * bytes, outer, cudaMemcpyDeviceToDevice,
                              comm.stream),
            what);
    send = comm.scratch;
  }
  checkNccl(ncclReduceScatter(send, out, size_t(outer * inner), ncclType(dtype), ncclOp(reduction),
                              comm.comm, comm.stream),
            comm.comm, what);
  return finish(comm, what);
}

/// The 2-D copy of block `index` of `parts` along dimension `dim` of a
/// row-major tensor of `shape` to or from a dense buffer.
static void copyBlock(const int64_t *shape, int rank, int dim, int64_t parts, int64_t index,
                      size_t bytes, char *tensor, char *dense, bool pack, cudaStream_t stream,
                      const char *what) {
  int64_t outer = 1, inner = bytes;
  for (int d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int d = dim + 1; d < rank; ++d)
    inner *= shape[d];
  int64_t rows = shape[dim] / parts, width = rows * inner, pitch = shape[dim] * inner;
  char *at = tensor + index * width;
  if (pack)
    check(
        cudaMemcpy2DAsync(dense, width, at, pitch, width, outer, cudaMemcpyDeviceToDevice, stream),
        what);
  else
    check(
        cudaMemcpy2DAsync(at, pitch, dense, width, width, outer, cudaMemcpyDeviceToDevice, stream),
        what);
}

Ticket NcclRank::allToAll(int g, DType dtype, const void *in, void *out, const int64_t *shape,
                          int rank, int split, int concat, const char *what) {
  Comm &comm = groupComms[g];
  int64_t size = groups[g].size, bytes = int64_t(dtypeBytes(dtype));
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= shape[d];
  int64_t block = total / size;
  reserve(comm, total * bytes);
  begin(comm);
  char *packed = static_cast<char *>(comm.scratch), *arrived = static_cast<char *>(comm.scratch2);
  for (int64_t j = 0; j < size; ++j)
    copyBlock(shape, rank, split, size, j, bytes, const_cast<char *>(static_cast<const char *>(in)),
              packed + j * block * bytes, true, comm.stream, what);
  checkNccl(ncclGroupStart(), comm.comm, what);
  for (int64_t j = 0; j < size; ++j) {
    checkNccl(ncclSend(packed + j * block * bytes, size_t(block), ncclType(dtype), int(j),
                       comm.comm, comm.stream),
              comm.comm, what);
    checkNccl(ncclRecv(arrived + j * block * bytes, size_t(block), ncclType(dtype), int(j),
                       comm.comm, comm.stream),
              comm.comm, what);
  }
  checkNccl(ncclGroupEnd(), comm.comm, what);
  std::vector<int64_t> outShape(shape, shape + rank);
  outShape[split] /= size;
  outShape[concat] *= size;
  for (int64_t j = 0; j < size; ++j)
    copyBlock(outShape.data(), rank, concat, size, j, bytes, static_cast<char *>(out),
              arrived + j * block * bytes, false, comm.stream, what);
  return finish(comm, what);
}

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

NcclRank::Comm &NcclRank::channel(const char *axis, int64_t from, int64_t to, const char *what) {
  for (int c = 0; c < program.numChannels; ++c) {
    const Channel &ch = program.channels[c];
    if (ch.from == from && ch.to == to && std::strcmp(ch.axis, axis) == 0 && channelComms[c].comm)
      return channelComms[c];
  }
  stop(std::string("no NCCL channel for ") + what);
}

Ticket NcclRank::send(const char *axis, int64_t peer, DType dtype, const void *data, int64_t count,
                      const char *what) {
  // As Rank.h promises (and MPI's buffered sends give), the data is copied
  // and the program may overwrite it at once: an NCCL send completes only
  // when its receive runs, and a program waiting for it before its own
  // receive could deadlock with its peer doing the same.
  Comm &comm = channel(axis, coordinateOn(program, coords, axis), peer, what);
  size_t bytes = size_t(count) * dtypeBytes(dtype);
  void *copy = stage(bytes);
  check(cudaMemcpyAsync(copy, data, bytes, cudaMemcpyDeviceToDevice, compute), what);
  begin(comm);
  checkNccl(ncclSend(copy, size_t(count), ncclType(dtype), 1, comm.comm, comm.stream), comm.comm,
            what);
  finish(comm, what); // Waited for at the end of the step.
  return 0;
}

Ticket NcclRank::recv(const char *axis, int64_t peer, DType dtype, void *data, int64_t count,
                      const char *what) {
  Comm &comm = channel(axis, peer, coordinateOn(program, coords, axis), what);
  begin(comm);
  checkNccl(ncclRecv(data, size_t(count), ncclType(dtype), 0, comm.comm, comm.stream), comm.comm,
            what);
  return finish(comm, what);
}

} // namespace ppcrt::cuda
