//===- cuda_runtime.h - the CUDA kernel language, emulated -------*- C++ -*-===//
//
// What CUDA C++ adds to C++, for kernels compiled by the host compiler
// (runtime/ppcrt/cuda/emulator/README.md):
//
// - qualifiers: __global__ and __device__ functions are host functions,
//   __device__ variables host variables, and a __shared__ variable is a
//   static one: the threads of a block share it, and blocks run one after
//   the other;
// - threadIdx, blockIdx, blockDim, gridDim: set for the thread that runs;
// - __syncthreads(), __syncwarp() and the warp shuffles: each thread of a block is a
//   fiber that runs until it reaches one of them; the block goes on when all
//   its live threads have (a thread reaching another synchronization point
//   than the rest of its block is reported, as it would hang a GPU);
// - atomics: plain read-modify-writes, since no two threads run at once;
//   fences and the loads and stores past L1 (__ldcg, __stcg) plain too;
// - launches: PPCRT_LAUNCH(kernel, grid, block, shared, stream)(args...),
//   the kernel<<<grid, block, shared, stream>>>(args...) of CUDA sources
//   (Kernels.cuh defines it so for nvcc), checked against the launch limits
//   of current GPUs (cudaGetLastError reports them) and queued on the stream.
//
//===----------------------------------------------------------------------===//

#ifndef PPCRT_EMULATOR_CUDA_RUNTIME_H
#define PPCRT_EMULATOR_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <string>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static
#define __launch_bounds__(...)
#define __grid_constant__

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

/// The thread running now (set by the emulator before it runs a thread).
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
constexpr int warpSize = 32;

namespace ppcrt::emu {

/// What a thread of a block stopped at.
enum class Sync { Barrier, Shuffle, Warp, Mma };

/// Suspends the running thread at a synchronization point until every live
/// thread of its block has reached one.
void synchronize(Sync kind);

/// The running thread's exchange slot for the next warp shuffle
/// (kShuffleSlotBytes, 8-byte aligned) and the slot of thread `source` of
/// its block after the shuffle, or the 32 slots of its warp in lane order
/// (kShuffleSlotBytes apart: a warp-wide exchange, as mma.sync's).
constexpr size_t kShuffleSlotBytes = 64;
void *shuffleSlot();
const void *shuffledSlot(unsigned source);
const void *warpShuffledSlots();

/// A kernel's threads: `run(closure)` runs one (threadIdx and blockIdx
/// set), `release(closure)` frees the closure once the grid has run.
struct Threads {
  void (*run)(void *closure);
  void (*release)(void *closure);
  void *closure;
};

/// Whether [pointer, pointer + bytes) meets page-locked host memory
/// (cudaMallocHost).
bool isPinnedRange(const void *pointer, size_t bytes);
[[noreturn]] void emulatorError(const std::string &message);

/// A kernel argument: a pointer into page-locked host memory (the host's
/// arena of --offload) is an error of the generated code, which runs only
/// the host's ops there. (A GPU could read it, over PCIe, at every access.)
template <typename T> void checkLaunchArgument(const char *kernel, const T &argument) {
  if constexpr (std::is_pointer_v<T>)
    if (argument && isPinnedRange(argument, 1))
      emulatorError(std::string("kernel ") + kernel +
                    " was passed a pointer into host memory (cudaMallocHost)");
}

/// Runs `threads` once per thread of every block of `grid`, on `stream`.
/// A launch outside the limits of the GPU sets cudaGetLastError() instead.
void launch(const char *kernel, dim3 grid, dim3 block, size_t sharedBytes, cudaStream_t stream,
            Threads threads);

/// Launches `thread`, a closure holding the kernel's arguments: evaluated
/// once, and copied by every thread, as CUDA threads get their own
/// parameters. (A closure per launch, without std::function: generated
/// sources have hundreds of launches, and the host compiler's time goes
/// into what each instantiates.)
template <typename Thread>
void launchThreads(const char *kernel, dim3 grid, dim3 block, size_t sharedBytes,
                   cudaStream_t stream, Thread &&thread) {
  using Closure = std::decay_t<Thread>;
  launch(kernel, grid, block, sharedBytes, stream,
         Threads{[](void *c) { (*static_cast<Closure *>(c))(); },
                 [](void *c) { delete static_cast<Closure *>(c); },
                 new Closure(std::forward<Thread>(thread))});
}

/// Lane `lane ^ laneMask` of the running thread's warp (within `width`).
template <typename T> T shuffleXor(T value, int laneMask, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a shuffle moves 8 bytes");
  std::memcpy(shuffleSlot(), &value, sizeof(T));
  unsigned self = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned lane = self % 32, group = lane / unsigned(width) * unsigned(width);
  unsigned source = self - lane + group + ((lane - group) ^ unsigned(laneMask)) % unsigned(width);
  synchronize(Sync::Shuffle);
  T result;
  std::memcpy(&result, shuffledSlot(source), sizeof(T));
  return result;
}

} // namespace ppcrt::emu

#define PPCRT_LAUNCH(kernel, grid, block, shared, stream)                                          \
  [&](auto... ppcrtArgs) {                                                                         \
    static_assert((sizeof(ppcrtArgs) + ... + 0) <= 4096,                                           \
                  "a kernel's parameters exceed 4 KB, the limit of every GPU");                    \
    (::ppcrt::emu::checkLaunchArgument(#kernel, ppcrtArgs), ...);                                  \
    ::ppcrt::emu::launchThreads(#kernel, grid, block, shared, stream,                              \
                                [ppcrtArgs...] { kernel(ppcrtArgs...); });                         \
  }

inline void __syncthreads() { ppcrt::emu::synchronize(ppcrt::emu::Sync::Barrier); }

/// A warp's barrier. The emulator's threads run one at a time, so it waits
/// for the whole block, as __syncthreads does; the block's threads must all
/// reach it together (kernels that call it keep their warps in step).
inline void __syncwarp(unsigned = 0xffffffffu) { ppcrt::emu::synchronize(ppcrt::emu::Sync::Warp); }

template <typename T> T __shfl_xor_sync(unsigned, T value, int laneMask, int width = 32) {
  return ppcrt::emu::shuffleXor(value, laneMask, width);
}

/// A memory fence: the emulator's threads run one at a time, so every write
/// is seen by every later read.
inline void __threadfence() {}

/// Loads and stores that bypass a GPU's L1 (whose lines are not kept coherent
/// across its multiprocessors): plain ones here.
template <typename T> T __ldcg(const T *address) { return *address; }
template <typename T> void __stcg(T *address, T value) { *address = value; }

// Atomics: no other thread runs between the read and the write.
template <typename T> T atomicAdd(T *address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}
template <typename T> T atomicExch(T *address, T value) {
  T old = *address;
  *address = value;
  return old;
}
template <typename T> T atomicCAS(T *address, T compare, T value) {
  T old = *address;
  if (old == compare)
    *address = value;
  return old;
}
template <typename T> T atomicMax(T *address, T value) {
  T old = *address;
  *address = old < value ? value : old;
  return old;
}
template <typename T> T atomicMin(T *address, T value) {
  T old = *address;
  *address = value < old ? value : old;
  return old;
}

#endif // PPCRT_EMULATOR_CUDA_RUNTIME_H
