//===- Runtime.cpp - the CUDA runtime API on the host ---------------------===//
//
// Devices, memory, streams, events and launches (Emulator.h says when queued
// work runs). Device memory is host memory, filled with 0xff bytes (NaN as
// floats) when allocated, so that reading what was never written shows.
// Copies and fills check that the device side of each lies within one
// allocation, as the real runtime rejects what is not device memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/cuda/emulator/Emulator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <vector>

struct CUstream_st {
  unsigned flags = cudaStreamDefault;
  /// Runs its work at once (the compute stream; see Emulator.h).
  bool eager = false;
  struct Work {
    uint64_t number;
    std::function<void()> run;
  };
  std::deque<Work> queue;
  /// The number of the last work queued here (0: none yet).
  uint64_t last = 0;
};

/// A captured step: what each operation does when the graph is launched
/// (kernels and copies are queued on their streams again; event records
/// and waits act as they did), in capture order.
struct GraphNodes {
  struct Node {
    std::function<void()> replay;
    /// A kernel, copy, fill, GEMM or NCCL call (cudaGraphGetNodes counts
    /// these; records and waits are edges).
    bool counted;
  };
  std::vector<Node> nodes;
};

struct CUgraph_st {
  std::shared_ptr<GraphNodes> nodes;
};

struct CUgraphExec_st {
  std::shared_ptr<GraphNodes> nodes;
};

struct CUevent_st {
  /// The work the event waits for: everything issued up to this number on
  /// its stream (0: recorded on nothing, or never recorded).
  uint64_t number = 0;
  /// Timing events (not cudaEventDisableTiming): the host's clock when the
  /// stream reached the last record (negative: not yet), and that record.
  bool timing = true;
  double seconds = -1;
  uint64_t record = 0;
};

namespace ppcrt::emu {
namespace {

/// The emulator's state. Never destroyed: static destructors elsewhere
/// (cuBLASLt plans, NCCL communicators) may still call the runtime at exit.
struct State {
  /// Work numbers, in issue order over every stream.
  uint64_t issued = 0;
  /// The legacy default stream (null): runs its work at once.
  CUstream_st legacy;
  std::vector<CUstream_st *> streams;
  cudaError_t lastError = cudaSuccess;
  int device = 0;
  /// Device allocations by address (their sizes).
  std::map<uintptr_t, size_t> allocations;
  size_t allocatedBytes = 0;
  /// Page-locked host allocations (cudaMallocHost) by address.
  std::map<uintptr_t, size_t> pinned;
  /// The capture in progress (cudaStreamBeginCapture), on stream `origin`;
  /// `invalidated` once a call a capture cannot hold was made.
  std::shared_ptr<GraphNodes> capture;
  CUstream_st *origin = nullptr;
  bool invalidated = false;

  State() {
    legacy.eager = true;
    streams.push_back(&legacy);
  }
};

State &state() {
  static State *instance = new State;
  return *instance;
}

constexpr size_t kDeviceBytes = size_t(80) << 30;

CUstream_st *resolve(cudaStream_t stream) { return stream ? stream : &state().legacy; }

bool knownStream(cudaStream_t stream) {
  for (CUstream_st *s : state().streams)
    if (s == resolve(stream))
      return true;
  return false;
}

/// Runs the queued work numbered up to `number`, in number order.
void runThrough(uint64_t number) {
  for (;;) {
    CUstream_st *next = nullptr;
    for (CUstream_st *s : state().streams)
      if (!s->queue.empty() && s->queue.front().number <= number &&
          (!next || s->queue.front().number < next->queue.front().number))
        next = s;
    if (!next)
      return;
    std::function<void()> work = std::move(next->queue.front().run);
    next->queue.pop_front();
    work();
  }
}

/// What a synchronous copy on the legacy default stream waits for: the
/// blocking streams' work (cudaStreamNonBlocking ones go on).
void waitForBlockingStreams() {
  for (CUstream_st *s : state().streams)
    if (!(s->flags & cudaStreamNonBlocking))
      runThrough(s->last);
}

void *allocate(size_t bytes) {
  void *memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!memory)
    return nullptr;
  std::memset(memory, 0xff, bytes);
  state().allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  state().allocatedBytes += bytes;
  return memory;
}

cudaError_t release(void *pointer) {
  auto it = state().allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == state().allocations.end())
    return cudaErrorInvalidDevicePointer;
  state().allocatedBytes -= it->second;
  state().allocations.erase(it);
  std::free(pointer);
  return cudaSuccess;
}

/// Whether [pointer, pointer + bytes) meets an allocation of `in`.
bool meets(const std::map<uintptr_t, size_t> &in, const void *pointer, size_t bytes) {
  auto at = reinterpret_cast<uintptr_t>(pointer);
  auto it = in.upper_bound(at + std::max<size_t>(bytes, 1) - 1);
  if (it == in.begin())
    return false;
  --it;
  return it->first + it->second > at;
}

/// Whether the sides of a copy of `kind` are where the kind says: the
/// device side within one device allocation, the host side (of a copy
/// between host and device) outside every one.
bool validCopy(void *to, size_t toSpan, const void *from, size_t fromSpan, cudaMemcpyKind kind) {
  bool toDevice = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool fromDevice = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind > cudaMemcpyDefault)
    return false;
  if (kind == cudaMemcpyHostToDevice && meets(state().allocations, from, fromSpan))
    return false;
  if (kind == cudaMemcpyDeviceToHost && meets(state().allocations, to, toSpan))
    return false;
  return (!toDevice || isDeviceRange(to, toSpan)) && (!fromDevice || isDeviceRange(from, fromSpan));
}

} // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  if (state().capture) {
    // Work on the legacy default stream cannot join a capture (on a GPU:
    // cudaErrorStreamCaptureImplicit); it invalidates it.
    if (resolve(stream) == &state().legacy)
      state().invalidated = true;
    state().capture->nodes.push_back({[stream, work] { enqueue(stream, work); }, /*counted=*/true});
    return;
  }
  CUstream_st *s = resolve(stream);
  uint64_t number = ++state().issued;
  s->last = number;
  if (s->eager && s->queue.empty()) {
    work();
    return;
  }
  s->queue.push_back({number, std::move(work)});
}

void runsKernels(cudaStream_t stream) {
  CUstream_st *s = resolve(stream);
  if (s->eager)
    return;
  runThrough(s->last);
  s->eager = true;
}

bool isPinnedRange(const void *pointer, size_t bytes) {
  return meets(state().pinned, pointer, bytes);
}

bool isDeviceRange(const void *pointer, size_t bytes) {
  auto at = reinterpret_cast<uintptr_t>(pointer);
  auto it = state().allocations.upper_bound(at);
  if (it == state().allocations.begin())
    return false;
  --it;
  return at >= it->first && at + bytes <= it->first + it->second;
}

cudaError_t copySymbol(void *to, const void *from, size_t bytes) {
  waitForBlockingStreams();
  std::memcpy(to, from, bytes);
  return cudaSuccess;
}

void launch(const char *kernel, dim3 grid, dim3 block, size_t sharedBytes, cudaStream_t stream,
            Threads threads) {
  // The limits of every GPU since compute capability 3.0 (sm_90's too).
  uint64_t count = uint64_t(block.x) * block.y * block.z;
  bool valid = block.x >= 1 && block.y >= 1 && block.z >= 1 && block.x <= 1024 && block.y <= 1024 &&
               block.z <= 64 && count <= 1024 && grid.x >= 1 && grid.y >= 1 && grid.z >= 1 &&
               grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535 &&
               sharedBytes <= 48 * 1024;
  cudaError_t error = !valid                 ? cudaErrorInvalidConfiguration
                      : !knownStream(stream) ? cudaErrorInvalidResourceHandle
                                             : cudaSuccess;
  if (error != cudaSuccess) {
    threads.release(threads.closure);
    state().lastError = error;
    return;
  }
  if (state().capture) {
    if (resolve(stream) == &state().legacy)
      state().invalidated = true; // as enqueue
    // The graph owns the kernel's arguments until it is destroyed.
    std::shared_ptr<void> arguments(threads.closure, threads.release);
    state().capture->nodes.push_back({[kernel, grid, block, threads, arguments, stream] {
                                        runsKernels(stream);
                                        enqueue(stream, [kernel, grid, block, threads, arguments] {
                                          runGrid(kernel, grid, block, threads);
                                        });
                                      },
                                      /*counted=*/true});
    return;
  }
  runsKernels(stream);
  enqueue(stream, [kernel, grid, block, threads] {
    runGrid(kernel, grid, block, threads);
    threads.release(threads.closure);
  });
}

/// A call a capture cannot hold (one that waits for, or allocates beside,
/// the captured work): on a GPU it fails and invalidates the capture.
bool refusedInCapture() {
  if (!state().capture)
    return false;
  state().invalidated = true;
  return true;
}

} // namespace ppcrt::emu

using namespace ppcrt::emu;

//===----------------------------------------------------------------------===//
// Devices and errors
//===----------------------------------------------------------------------===//

/// As many emulated GPUs as PPCRT_EMULATED_GPUS says (64 by default), so
/// that every rank on a node has one of its own.
static int deviceCount() {
  const char *text = std::getenv("PPCRT_EMULATED_GPUS");
  int count = text ? std::atoi(text) : 64;
  return count < 0 ? 0 : count;
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = deviceCount();
  return *count ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int index) {
  if (index < 0 || index >= deviceCount())
    return cudaErrorInvalidDevice;
  state().device = index;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *index) {
  *index = state().device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *props, int index) {
  if (index < 0 || index >= deviceCount())
    return cudaErrorInvalidDevice;
  *props = cudaDeviceProp{};
  std::snprintf(props->name, sizeof(props->name), "ppc CUDA emulator (host)");
  props->totalGlobalMem = kDeviceBytes;
  props->major = 0; // no peak FLOP/s: MFU is not reported
  props->minor = 0;
  props->multiProcessorCount = 1;
  props->maxThreadsPerBlock = 1024;
  props->warpSize = 32;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  runThrough(state().issued);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  *total = kDeviceBytes;
  *free = kDeviceBytes > state().allocatedBytes ? kDeviceBytes - state().allocatedBytes : 0;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  cudaError_t error = state().lastError;
  state().lastError = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() { return state().lastError; }

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidValue:
    return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration:
    return "cudaErrorInvalidConfiguration";
  case cudaErrorInvalidSymbol:
    return "cudaErrorInvalidSymbol";
  case cudaErrorInvalidDevicePointer:
    return "cudaErrorInvalidDevicePointer";
  case cudaErrorInvalidMemcpyDirection:
    return "cudaErrorInvalidMemcpyDirection";
  case cudaErrorNoDevice:
    return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  case cudaErrorInvalidResourceHandle:
    return "cudaErrorInvalidResourceHandle";
  case cudaErrorNotReady:
    return "cudaErrorNotReady";
  case cudaErrorLaunchFailure:
    return "cudaErrorLaunchFailure";
  case cudaErrorStreamCaptureUnsupported:
    return "cudaErrorStreamCaptureUnsupported";
  case cudaErrorStreamCaptureInvalidated:
    return "cudaErrorStreamCaptureInvalidated";
  case cudaErrorStreamCaptureWrongThread:
    return "cudaErrorStreamCaptureWrongThread";
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidSymbol:
    return "invalid device symbol";
  case cudaErrorInvalidDevicePointer:
    return "invalid device pointer";
  case cudaErrorInvalidMemcpyDirection:
    return "invalid copy direction for memcpy";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  case cudaErrorStreamCaptureUnsupported:
    return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureWrongThread:
    return "attempt to terminate a thread-local capture sequence from another thread";
  }
  return "unknown error";
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

cudaError_t cudaMalloc(void **pointer, size_t bytes) {
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  *pointer = allocate(bytes);
  return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *pointer) {
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  if (!pointer)
    return cudaSuccess;
  runThrough(state().issued); // cudaFree waits for the device
  return release(pointer);
}

cudaError_t cudaMallocAsync(void **pointer, size_t bytes, cudaStream_t stream) {
  if (!knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  *pointer = allocate(bytes);
  return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeAsync(void *pointer, cudaStream_t stream) {
  if (!knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (!pointer)
    return cudaSuccess;
  if (!state().allocations.count(reinterpret_cast<uintptr_t>(pointer)))
    return cudaErrorInvalidDevicePointer;
  enqueue(stream, [pointer] { release(pointer); });
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **pointer, size_t bytes) {
  *pointer = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!*pointer)
    return cudaErrorMemoryAllocation;
  std::memset(*pointer, 0xff, bytes);
  state().pinned[reinterpret_cast<uintptr_t>(*pointer)] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void *pointer) {
  if (!pointer)
    return cudaSuccess;
  runThrough(state().issued); // as cudaFree, it waits for the device
  auto it = state().pinned.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == state().pinned.end())
    return cudaErrorInvalidValue;
  state().pinned.erase(it);
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind) {
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  if (!validCopy(to, bytes, from, bytes, kind))
    return cudaErrorInvalidValue;
  waitForBlockingStreams();
  std::memmove(to, from, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *to, const void *from, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (!validCopy(to, bytes, from, bytes, kind))
    return cudaErrorInvalidValue;
  // A copy from or to pageable host memory is staged by the host, which a
  // capture cannot hold (on a GPU: cudaErrorStreamCaptureUnsupported).
  bool pageable = (kind == cudaMemcpyHostToDevice && !isPinnedRange(from, bytes)) ||
                  (kind == cudaMemcpyDeviceToHost && !isPinnedRange(to, bytes));
  if (pageable && refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  enqueue(stream, [=] { std::memmove(to, from, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void *to, size_t toPitch, const void *from, size_t fromPitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  if (!knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (width > toPitch || width > fromPitch)
    return cudaErrorInvalidValue;
  size_t toSpan = height ? toPitch * (height - 1) + width : 0;
  size_t fromSpan = height ? fromPitch * (height - 1) + width : 0;
  if (!validCopy(to, toSpan, from, fromSpan, kind))
    return cudaErrorInvalidValue;
  enqueue(stream, [=] {
    for (size_t row = 0; row < height; ++row)
      std::memmove(static_cast<char *>(to) + row * toPitch,
                   static_cast<const char *>(from) + row * fromPitch, width);
  });
  return cudaSuccess;
}

cudaError_t cudaMemset(void *pointer, int value, size_t bytes) {
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  if (!isDeviceRange(pointer, bytes))
    return cudaErrorInvalidValue;
  waitForBlockingStreams();
  std::memset(pointer, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes, cudaStream_t stream) {
  if (!knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (!isDeviceRange(pointer, bytes))
    return cudaErrorInvalidValue;
  enqueue(stream, [=] { std::memset(pointer, value, bytes); });
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  *stream = new CUstream_st;
  (*stream)->flags = flags;
  state().streams.push_back(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || !knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  // Work still queued completes first, as on a GPU.
  runThrough(stream->last);
  for (size_t i = 0; i < state().streams.size(); ++i)
    if (state().streams[i] == stream)
      state().streams.erase(state().streams.begin() + i);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  if (!knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  runThrough(resolve(stream)->last);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (!event || !knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (state().capture) {
    state().capture->nodes.push_back({[stream, event] {
                                        uint64_t number = event->number;
                                        enqueue(stream, [number] { runThrough(number); });
                                      },
                                      /*counted=*/false});
    return cudaSuccess;
  }
  uint64_t number = event->number;
  enqueue(stream, [number] { runThrough(number); });
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  cudaError_t status = cudaEventCreate(event);
  (*event)->timing = !(flags & cudaEventDisableTiming);
  return status;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event || !knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (state().capture) {
    state().capture->nodes.push_back(
        {[event, stream] { event->number = resolve(stream)->last; }, /*counted=*/false});
    return cudaSuccess;
  }
  if (event->timing) {
    // The clock is read when the stream gets there, in its order.
    uint64_t record = ++event->record;
    event->seconds = -1;
    enqueue(stream, [event, record] {
      if (event->record == record)
        event->seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
                .count();
    });
  }
  event->number = resolve(stream)->last;
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end || !start->timing || !end->timing)
    return cudaErrorInvalidResourceHandle;
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  runThrough(std::max(start->number, end->number));
  if (start->seconds < 0 || end->seconds < 0)
    return cudaErrorInvalidResourceHandle; // Never recorded.
  *ms = float((end->seconds - start->seconds) * 1e3);
  return cudaSuccess;
}

/// Nothing runs behind the host's back: asking whether an event has
/// happened runs the work it waits for.
cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event)
    return cudaErrorInvalidResourceHandle;
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  runThrough(event->number);
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  return cudaStreamSynchronize(stream);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (!knownStream(stream) || !stream)
    return cudaErrorInvalidResourceHandle; // the legacy stream cannot capture
  if (state().capture)
    return cudaErrorStreamCaptureUnsupported;
  // What the stream was given before runs first, as on a GPU (the capture
  // holds only what follows).
  runThrough(resolve(stream)->last);
  state().capture = std::make_shared<GraphNodes>();
  state().origin = resolve(stream);
  state().invalidated = false;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  if (!state().capture || resolve(stream) != state().origin)
    return cudaErrorStreamCaptureWrongThread;
  std::shared_ptr<GraphNodes> nodes = std::move(state().capture);
  state().capture = nullptr;
  state().origin = nullptr;
  if (state().invalidated) {
    *graph = nullptr;
    return cudaErrorStreamCaptureInvalidated;
  }
  *graph = new CUgraph_st{std::move(nodes)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status) {
  if (!knownStream(stream) || !status)
    return cudaErrorInvalidValue;
  *status = !state().capture || resolve(stream) != state().origin ? cudaStreamCaptureStatusNone
            : state().invalidated ? cudaStreamCaptureStatusInvalidated
                                  : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count) {
  if (!graph || !count || nodes)
    return cudaErrorInvalidValue; // only the count is emulated
  *count = size_t(std::count_if(graph->nodes->nodes.begin(), graph->nodes->nodes.end(),
                                [](const GraphNodes::Node &node) { return node.counted; }));
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long) {
  if (!graph || !exec)
    return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec || !knownStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (refusedInCapture())
    return cudaErrorStreamCaptureUnsupported;
  // The graph starts after the stream's work so far (it is queued there on
  // a GPU; the compute stream runs at once here).
  runThrough(resolve(stream)->last);
  for (const GraphNodes::Node &node : exec->nodes->nodes)
    node.replay();
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
