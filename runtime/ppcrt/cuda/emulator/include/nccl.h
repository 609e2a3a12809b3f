//===- nccl.h - NCCL, emulated over MPI ---------------------------*- C++ -*-===//
//
// The NCCL calls ppc makes, with NCCL's names and semantics, carried by MPI
// between the processes of one mpirun job: a communicator is an MPI
// communicator (ncclCommInitRank splits MPI_COMM_WORLD by the unique id, so
// every process of the job must call it, as ppc's runtime does), and each
// call is work queued on its stream (Emulator.h) that makes the MPI call
// when it runs. Sends are buffered (MPI_Isend from a copy) as an NCCL send
// on a stream of its own never holds up the host. A communicator created
// non-blocking (config.blocking = 0) is returned in progress, as NCCL's are:
// ncclCommInitRankConfig and ncclCommSplit answer ncclInProgress and
// ncclCommGetAsyncError reports it once, so a caller that does not poll (or
// that reads the handle before the call wrote it) fails here as on a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef PPCRT_EMULATOR_NCCL_H
#define PPCRT_EMULATOR_NCCL_H

#include "cuda_runtime_api.h"

#include <cstddef>

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

enum ncclDataType_t {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};

enum ncclRedOp_t { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

#define NCCL_UNIQUE_ID_BYTES 128
struct ncclUniqueId {
  char internal[NCCL_UNIQUE_ID_BYTES];
};

struct ncclComm;
typedef ncclComm *ncclComm_t;

#define NCCL_SPLIT_NOCOLOR -1

struct ncclConfig_t {
  size_t size;
  unsigned magic, version;
  int blocking;
  int cgaClusterSize, minCTAs, maxCTAs;
  const char *netName;
  int splitShare;
};
#define NCCL_CONFIG_INITIALIZER {sizeof(ncclConfig_t), 0xcafebeef, 0, 1, 0, 0, 0, nullptr, 0}

const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int ranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int ranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newComm,
                           ncclConfig_t *config);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendCount, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvCount, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

#endif // PPCRT_EMULATOR_NCCL_H
