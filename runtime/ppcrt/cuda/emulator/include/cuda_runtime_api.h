//===- cuda_runtime_api.h - the CUDA runtime API, emulated -------*- C++ -*-===//
//
// ppc's CUDA emulator (runtime/ppcrt/cuda/emulator/README.md): the part of
// the CUDA runtime API that libppcrt_cuda and generated executables call,
// with the toolkit's names and semantics, implemented on the host. Device
// memory is host memory; each stream is a queue of work (Emulator.h says
// when it runs). Only what ppc uses is declared.
//
//===----------------------------------------------------------------------===//

#ifndef PPCRT_EMULATOR_CUDA_RUNTIME_API_H
#define PPCRT_EMULATOR_CUDA_RUNTIME_API_H

#include <cstddef>
#include <cstdint>

/// Marks code built against the emulator rather than the CUDA toolkit.
#define PPCRT_CUDA_EMULATOR 1

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidSymbol = 13,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureWrongThread = 908,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

struct CUstream_st;
struct CUevent_st;
typedef CUstream_st *cudaStream_t;
typedef CUevent_st *cudaEvent_t;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
typedef CUgraph_st *cudaGraph_t;
typedef CUgraphExec_st *cudaGraphExec_t;
typedef CUgraphNode_st *cudaGraphNode_t;

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
  int maxThreadsPerBlock;
  int warpSize;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *props, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t *free, size_t *total);

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);

cudaError_t cudaMalloc(void **pointer, size_t bytes);
cudaError_t cudaFree(void *pointer);
cudaError_t cudaMallocHost(void **pointer, size_t bytes);
cudaError_t cudaFreeHost(void *pointer);
cudaError_t cudaMallocAsync(void **pointer, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void *pointer, cudaStream_t stream);

cudaError_t cudaMemcpy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *to, const void *from, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy2DAsync(void *to, size_t toPitch, const void *from, size_t fromPitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void *pointer, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaStreamQuery(cudaStream_t stream);

// Graphs: stream capture of the work issued on any stream (ppc's
// communication streams join the compute stream's capture through events),
// replayed by cudaGraphLaunch. Nodes count the kernels, copies, fills,
// GEMMs and NCCL calls; event records and waits are edges, as on a GPU.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

namespace ppcrt::emu {
/// The bytes of a __device__ variable, copied on the legacy default stream.
cudaError_t copySymbol(void *to, const void *from, size_t bytes);
} // namespace ppcrt::emu

/// __device__ variables are host variables here.
template <typename T>
cudaError_t cudaMemcpyFromSymbol(void *to, const T &symbol, size_t bytes, size_t offset = 0,
                                 cudaMemcpyKind = cudaMemcpyDeviceToHost) {
  if (offset + bytes > sizeof(T))
    return cudaErrorInvalidValue;
  return ppcrt::emu::copySymbol(to, reinterpret_cast<const char *>(&symbol) + offset, bytes);
}
template <typename T>
cudaError_t cudaMemcpyToSymbol(T &symbol, const void *from, size_t bytes, size_t offset = 0,
                               cudaMemcpyKind = cudaMemcpyHostToDevice) {
  if (offset + bytes > sizeof(T))
    return cudaErrorInvalidValue;
  return ppcrt::emu::copySymbol(reinterpret_cast<char *>(&symbol) + offset, from, bytes);
}

#endif // PPCRT_EMULATOR_CUDA_RUNTIME_API_H
