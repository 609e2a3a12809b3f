//===- Device.h - where a rank's arena and state live -------------*- C++ -*-===//
//
// ppcrt::run (the executable's command line, data, checkpoints, metrics) is
// the same for every target; a Device says where the arena and the state
// carried between steps live (host memory on CPUs, GPU memory on CUDA) and
// which Rank carries the program's communication (MPI or NCCL).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_DEVICE_H
#define PPC_RUNTIME_PPCRT_DEVICE_H

#include "runtime/ppcrt/Rank.h"

#include <map>
#include <memory>
#include <string>

namespace ppcrt {

class Device {
public:
  virtual ~Device();

  /// Binds this process to its share of the node (after MPI_Init): threads
  /// on CPUs, one GPU per local rank on CUDA. Returns a one-line error, or
  /// "" on success.
  virtual std::string start(int localRank, int localRanks, int threadsPerRank) = 0;
  /// The Rank that carries `program`'s communication (collective over the
  /// world: every rank calls it at the same point).
  virtual std::unique_ptr<Rank> connect(const Program &program, double timeoutSeconds) = 0;

  /// Zero-filled memory of the device (null when it cannot be had).
  virtual void *allocate(size_t bytes) = 0;
  virtual void release(void *memory) = 0;
  /// Zero-filled host memory the device copies to and from at full speed
  /// (pinned on CUDA): the host arena and state of --offload (null when it
  /// cannot be had).
  void *allocateHost(size_t bytes);
  void releaseHost(void *memory);
  /// Bytes allocateHost has handed out and releaseHost not taken back.
  int64_t hostBytesInUse() const { return hostBytes; }
  /// Copies between host and device memory, and within the device. They
  /// are ordered with the programs' work; `download` returns once the data
  /// is on the host.
  virtual void upload(void *device, const void *host, size_t bytes) = 0;
  virtual void download(void *host, const void *device, size_t bytes) = 0;
  virtual void copy(void *to, const void *from, size_t bytes) = 0;

  /// What the progress line and the log say of the device ("cpu, 2
  /// threads", "NVIDIA H100 80GB HBM3").
  virtual std::string describe() const = 0;
  /// Dense peak FLOP/s of the precision the program computes in, for MFU
  /// (0: not reported).
  virtual double peakFlops() const { return 0; }
  /// Bytes of device memory this process has in use (0: not reported).
  virtual int64_t memoryInUse() const { return 0; }
  /// What times a program of `numKernels` kernels for --profile (the
  /// host's clock; CUDA events on GPUs).
  virtual std::unique_ptr<Profiler> profiler(int numKernels);

protected:
  /// What allocateHost and releaseHost get their memory from (plain host
  /// memory by default; page-locked on CUDA).
  virtual void *hostMemory(size_t bytes);
  virtual void freeHostMemory(void *memory);

private:
  std::map<void *, size_t> hostAllocations;
  int64_t hostBytes = 0;
};

/// The host's memory and MPI (libppcrt).
std::unique_ptr<Device> cpuDevice();
/// The OpenBLAS kernels to ask for (OPENBLAS_CORETYPE, before OpenBLAS is
/// loaded: a CPU process starts again with it) where OpenBLAS fell back to
/// its generic ones for a CPU it does not know; null otherwise
/// (CpuDevice.cpp).
const char *openblasCoreForThisCpu();

/// Runs the executable of `program` on `device`: parses DESIGN.md §4's
/// command line, starts MPI, trains. Returns the process exit status.
int run(int argc, char **argv, const Program &program, Device &device);

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_DEVICE_H
