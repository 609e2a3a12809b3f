//===- Nccl.cpp - NCCL over MPI -------------------------------------------===//

#include "runtime/ppcrt/cuda/emulator/include/nccl.h"
#include "runtime/ppcrt/cuda/emulator/Emulator.h"
#include "runtime/ppcrt/cuda/emulator/include/cuda_bf16.h"

#include <mpi.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

struct ncclComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::atomic<bool> aborted{false};
  /// Created non-blocking and not yet polled by ncclCommGetAsyncError.
  bool inProgress = false;
  /// Sends in flight, from copies of their data.
  struct Send {
    std::vector<char> data;
    MPI_Request request;
  };
  std::deque<Send> sends;
};

namespace {

/// Every message of the emulated NCCL carries this tag; MPI keeps messages
/// between two ranks of a communicator in order, as NCCL does.
constexpr int kTag = 0x4e43;

thread_local std::string lastError;

ncclResult_t error(ncclResult_t result, const std::string &message) {
  lastError = message;
  return result;
}

MPI_Datatype mpiType(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
    return MPI_INT8_T;
  case ncclUint8:
    return MPI_UINT8_T;
  case ncclInt32:
    return MPI_INT32_T;
  case ncclUint32:
    return MPI_UINT32_T;
  case ncclInt64:
    return MPI_INT64_T;
  case ncclUint64:
    return MPI_UINT64_T;
  case ncclFloat32:
    return MPI_FLOAT;
  case ncclFloat64:
    return MPI_DOUBLE;
  case ncclFloat16:
  case ncclBfloat16:
    return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

size_t typeBytes(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  }
  return 0;
}

/// bf16 reductions as MPI user operations (each pair in f32, rounded).
template <ncclRedOp_t Op> void bf16Reduce(void *in, void *inout, int *count, MPI_Datatype *) {
  auto *x = static_cast<const __nv_bfloat16 *>(in);
  auto *y = static_cast<__nv_bfloat16 *>(inout);
  for (int i = 0; i < *count; ++i) {
    float a = float(x[i]), b = float(y[i]);
    float r = Op == ncclSum    ? a + b
              : Op == ncclProd ? a * b
              : Op == ncclMax  ? (a > b ? a : b)
                               : (a < b ? a : b);
    y[i] = __nv_bfloat16(r);
  }
}

/// The MPI operation of `op` on `type` (MPI_OP_NULL: not emulated).
MPI_Op mpiOp(ncclRedOp_t op, ncclDataType_t type) {
  if (type == ncclFloat16)
    return MPI_OP_NULL;
  if (type == ncclBfloat16) {
    static MPI_Op ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
    static MPI_User_function *functions[4] = {bf16Reduce<ncclSum>, bf16Reduce<ncclProd>,
                                              bf16Reduce<ncclMax>, bf16Reduce<ncclMin>};
    if (op > ncclMin)
      return MPI_OP_NULL;
    if (ops[op] == MPI_OP_NULL)
      MPI_Op_create(functions[op], 1, &ops[op]);
    return ops[op];
  }
  switch (op) {
  case ncclSum:
    return MPI_SUM;
  case ncclProd:
    return MPI_PROD;
  case ncclMax:
    return MPI_MAX;
  case ncclMin:
    return MPI_MIN;
  case ncclAvg:
    return MPI_OP_NULL;
  }
  return MPI_OP_NULL;
}

/// Checks what every call checks; "" when the call may go on.
std::string invalid(ncclComm_t comm, size_t count, ncclDataType_t type) {
  if (!comm || comm->comm == MPI_COMM_NULL)
    return "invalid communicator";
  if (comm->aborted)
    return "the communicator was aborted";
  if (typeBytes(type) == 0)
    return "invalid data type " + std::to_string(int(type));
  if (count > size_t(INT_MAX))
    return "a count above INT_MAX is not emulated";
  return "";
}

/// Completes the sends that have arrived, freeing their copies.
void reap(ncclComm &comm) {
  while (!comm.sends.empty()) {
    int done = 0;
    MPI_Test(&comm.sends.front().request, &done, MPI_STATUS_IGNORE);
    if (!done)
      return;
    comm.sends.pop_front();
  }
}

void postSend(ncclComm &comm, const void *data, size_t bytes, int peer) {
  reap(comm);
  comm.sends.push_back(
      {std::vector<char>(static_cast<const char *>(data), static_cast<const char *>(data) + bytes),
       MPI_REQUEST_NULL});
  ncclComm::Send &send = comm.sends.back();
  MPI_Isend(send.data.data(), int(bytes), MPI_BYTE, peer, kTag, comm.comm, &send.request);
}

/// Point-to-point calls between ncclGroupStart and ncclGroupEnd.
struct GroupCall {
  bool isSend;
  void *data;
  size_t bytes;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
};
int groupDepth = 0;
std::vector<GroupCall> groupCalls;

void runPointToPoint(const std::vector<GroupCall> &calls) {
  std::vector<MPI_Request> receives;
  for (const GroupCall &call : calls)
    if (!call.isSend && !call.comm->aborted) {
      receives.push_back(MPI_REQUEST_NULL);
      MPI_Irecv(call.data, int(call.bytes), MPI_BYTE, call.peer, kTag, call.comm->comm,
                &receives.back());
    }
  for (const GroupCall &call : calls)
    if (call.isSend && !call.comm->aborted)
      postSend(*call.comm, call.data, call.bytes, call.peer);
  MPI_Waitall(int(receives.size()), receives.data(), MPI_STATUSES_IGNORE);
}

ncclResult_t pointToPoint(bool isSend, void *data, size_t count, ncclDataType_t type, int peer,
                          ncclComm_t comm, cudaStream_t stream) {
  std::string why = invalid(comm, count * typeBytes(type), type);
  if (!why.empty())
    return error(ncclInvalidArgument, why);
  if (peer < 0 || peer >= comm->size)
    return error(ncclInvalidArgument, "peer " + std::to_string(peer) + " is not in the " +
                                          std::to_string(comm->size) + "-rank communicator");
  size_t bytes = count * typeBytes(type);
  if (bytes && !ppcrt::emu::isDeviceRange(data, bytes))
    return error(ncclInvalidArgument, "the buffer is not device memory");
  GroupCall call{isSend, data, bytes, peer, comm, stream};
  if (groupDepth > 0) {
    groupCalls.push_back(call);
    return ncclSuccess;
  }
  ppcrt::emu::enqueue(stream, [call] { runPointToPoint({call}); });
  return ncclSuccess;
}

ncclResult_t newComm(MPI_Comm mpi, ncclComm_t *comm, const ncclConfig_t *config = nullptr) {
  if (mpi == MPI_COMM_NULL) {
    *comm = nullptr;
    return ncclSuccess;
  }
  *comm = new ncclComm;
  (*comm)->comm = mpi;
  MPI_Comm_rank(mpi, &(*comm)->rank);
  MPI_Comm_size(mpi, &(*comm)->size);
  // NCCL's non-blocking creation returns before the communicator is ready.
  if (config && !config->blocking) {
    (*comm)->inProgress = true;
    return ncclInProgress;
  }
  return ncclSuccess;
}

} // namespace

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t) { return lastError.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::random_device random;
  for (size_t i = 0; i < sizeof(id->internal); i += sizeof(unsigned)) {
    unsigned value = random();
    std::memcpy(id->internal + i, &value, sizeof(value));
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int ranks, ncclUniqueId id, int rank) {
  // The processes that were given the same id: MPI_COMM_WORLD split by it.
  uint32_t color = 2166136261u;
  for (char c : id.internal)
    color = (color ^ uint8_t(c)) * 16777619u;
  MPI_Comm mpi;
  MPI_Comm_split(MPI_COMM_WORLD, int(color & 0x7fffffff), rank, &mpi);
  int size = 0, at = 0;
  MPI_Comm_size(mpi, &size);
  MPI_Comm_rank(mpi, &at);
  if (size != ranks || at != rank) {
    MPI_Comm_free(&mpi);
    return error(ncclInvalidArgument, std::to_string(size) + " processes share the unique id; " +
                                          std::to_string(ranks) + " were named");
  }
  return newComm(mpi, comm);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int ranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  ncclResult_t result = ncclCommInitRank(comm, ranks, id, rank);
  if (result == ncclSuccess && config && !config->blocking) {
    (*comm)->inProgress = true;
    return ncclInProgress;
  }
  return result;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newComm_,
                           ncclConfig_t *config) {
  if (!comm || comm->aborted)
    return error(ncclInvalidArgument, "invalid communicator");
  MPI_Comm mpi;
  MPI_Comm_split(comm->comm, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &mpi);
  return newComm(mpi, newComm_, config);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm)
    return error(ncclInvalidArgument, "invalid communicator");
  if (comm->aborted)
    return ncclSuccess;
  // What the communicator still owes its peers: its sends.
  for (ncclComm::Send &send : comm->sends)
    MPI_Wait(&send.request, MPI_STATUS_IGNORE);
  comm->sends.clear();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return error(ncclInvalidArgument, "invalid communicator");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !comm->aborted) {
    ncclCommFinalize(comm);
    MPI_Comm_free(&comm->comm);
  }
  delete comm;
  return ncclSuccess;
}

/// Called by another thread while this one may wait in MPI: only marks the
/// communicator (the caller ends the process).
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm)
    comm->aborted = true;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  if (!comm)
    return error(ncclInvalidArgument, "invalid communicator");
  *state = comm->inProgress ? ncclInProgress : ncclSuccess;
  comm->inProgress = false;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (!comm)
    return error(ncclInvalidArgument, "invalid communicator");
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  if (!comm)
    return error(ncclInvalidArgument, "invalid communicator");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  std::string why = invalid(comm, count, type);
  if (!why.empty())
    return error(ncclInvalidArgument, why);
  MPI_Op mpi = mpiOp(op, type);
  if (mpi == MPI_OP_NULL)
    return error(ncclInvalidArgument, "this reduction is not emulated");
  size_t bytes = count * typeBytes(type);
  if (!ppcrt::emu::isDeviceRange(send, bytes) || !ppcrt::emu::isDeviceRange(recv, bytes))
    return error(ncclInvalidArgument, "a buffer is not device memory");
  ppcrt::emu::enqueue(stream, [=] {
    if (!comm->aborted)
      MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, int(count), mpiType(type), mpi,
                    comm->comm);
  });
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendCount, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  std::string why = invalid(comm, sendCount * size_t(comm ? comm->size : 1), type);
  if (!why.empty())
    return error(ncclInvalidArgument, why);
  size_t bytes = sendCount * typeBytes(type);
  if (!ppcrt::emu::isDeviceRange(send, bytes) ||
      !ppcrt::emu::isDeviceRange(recv, bytes * comm->size))
    return error(ncclInvalidArgument, "a buffer is not device memory");
  ppcrt::emu::enqueue(stream, [=] {
    if (comm->aborted)
      return;
    // In place when the input is this rank's block of the output.
    bool inPlace = send == static_cast<char *>(recv) + comm->rank * bytes;
    MPI_Allgather(inPlace ? MPI_IN_PLACE : send, int(sendCount), mpiType(type), recv,
                  int(sendCount), mpiType(type), comm->comm);
  });
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvCount, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  std::string why = invalid(comm, recvCount * size_t(comm ? comm->size : 1), type);
  if (!why.empty())
    return error(ncclInvalidArgument, why);
  MPI_Op mpi = mpiOp(op, type);
  if (mpi == MPI_OP_NULL)
    return error(ncclInvalidArgument, "this reduction is not emulated");
  size_t bytes = recvCount * typeBytes(type);
  if (!ppcrt::emu::isDeviceRange(send, bytes * comm->size) ||
      !ppcrt::emu::isDeviceRange(recv, bytes))
    return error(ncclInvalidArgument, "a buffer is not device memory");
  ppcrt::emu::enqueue(stream, [=] {
    if (comm->aborted)
      return;
    // The output may be a block of the input (NCCL's in-place form).
    std::vector<char> input(static_cast<const char *>(send),
                            static_cast<const char *>(send) + bytes * comm->size);
    MPI_Reduce_scatter_block(input.data(), recv, int(recvCount), mpiType(type), mpi, comm->comm);
  });
  return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint(true, const_cast<void *>(send), count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return pointToPoint(false, recv, count, type, peer, comm, stream);
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return error(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth > 0)
    return ncclSuccess;
  // One piece of work per stream, in the order the streams were named.
  std::vector<GroupCall> calls = std::move(groupCalls);
  groupCalls.clear();
  while (!calls.empty()) {
    cudaStream_t stream = calls.front().stream;
    std::vector<GroupCall> mine, rest;
    for (const GroupCall &call : calls)
      (call.stream == stream ? mine : rest).push_back(call);
    ppcrt::emu::enqueue(stream, [mine] { runPointToPoint(mine); });
    calls = std::move(rest);
  }
  return ncclSuccess;
}
