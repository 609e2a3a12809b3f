//===- Emulator.h - streams and kernels of the CUDA emulator -----*- C++ -*-===//
//
// How work runs in ppc's CUDA emulator (README.md beside this file). Every
// stream is a queue. The compute stream, the one kernels are launched on,
// runs its work at once; every other stream (the communication streams)
// runs its work as late as the program allows: when the host or another
// stream waits for it, or when later queued work must run. Queued work runs
// in the order it was issued, across streams, so communication happens in
// the same order on every rank, as NCCL requires. A collective the program
// forgot to wait for has not happened when its result is read, and one
// whose input is overwritten before its first wait sends the new values:
// either shows as a wrong loss, not as a race that happens to pass.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_CUDA_EMULATOR_EMULATOR_H
#define PPC_RUNTIME_PPCRT_CUDA_EMULATOR_EMULATOR_H

#include "runtime/ppcrt/cuda/emulator/include/cuda_runtime.h"

#include <functional>
#include <string>

namespace ppcrt::emu {

/// Queues `work` on `stream` (null: the legacy default stream). It runs at
/// once on the compute stream, later on the others (see above).
void enqueue(cudaStream_t stream, std::function<void()> work);

/// Marks `stream` as one kernels run on: from now on its work runs at once.
void runsKernels(cudaStream_t stream);

/// Runs the blocks of a kernel now (Threads.cpp).
void runGrid(const char *kernel, dim3 grid, dim3 block, const Threads &threads);

/// Ends the process with `message` (an error of the emulated program that a
/// GPU would not report: a divergent barrier, a bad shuffle).
[[noreturn]] void emulatorError(const std::string &message);

/// Whether [pointer, pointer + bytes) lies in device memory.
bool isDeviceRange(const void *pointer, size_t bytes);

} // namespace ppcrt::emu

#endif // PPC_RUNTIME_PPCRT_CUDA_EMULATOR_EMULATOR_H
