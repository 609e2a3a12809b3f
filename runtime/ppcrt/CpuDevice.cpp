//===- CpuDevice.cpp - the CPU target's device and entry point -----------===//
//
// Host memory, OpenMP and OpenBLAS threads, MPI: what a CPU executable runs
// ppcrt::run on. Its own file (and archive, libppcrt_cpu) so that only CPU
// executables link OpenBLAS and OpenMP; CUDA ones have their device in
// cuda/CudaDevice.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/Device.h"
#include "runtime/ppcrt/MpiRank.h"
#include "runtime/ppcrt/Program.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

extern "C" void openblas_set_num_threads(int);

namespace ppcrt {

namespace {

/// Host memory, OpenMP and OpenBLAS threads, MPI.
class CpuDevice final : public Device {
public:
  std::string start(int, int, int threadsPerRank) override {
    threads = threadsPerRank;
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    openblas_set_num_threads(threads);
    return "";
  }
  std::unique_ptr<Rank> connect(const Program &program, double timeoutSeconds) override {
    return std::make_unique<MpiRank>(program, timeoutSeconds);
  }
  void *allocate(size_t bytes) override {
    void *memory = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (memory)
      std::memset(memory, 0, bytes);
    return memory;
  }
  void release(void *memory) override { std::free(memory); }
  void upload(void *device, const void *host, size_t bytes) override {
    std::memcpy(device, host, bytes);
  }
  void download(void *host, const void *device, size_t bytes) override {
    std::memcpy(host, device, bytes);
  }
  void copy(void *to, const void *from, size_t bytes) override { std::memcpy(to, from, bytes); }
  std::string describe() const override {
    return "cpu, " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s");
  }

private:
  int threads = 1;
};

} // namespace

std::unique_ptr<Device> cpuDevice() { return std::make_unique<CpuDevice>(); }

int main(int argc, char **argv, const Program &program) {
  // OpenMP threads that spin after a parallel region take the cores from
  // OpenBLAS's own threads in the GEMM that follows (measured: a 4-layer GPT
  // step took twice as long on 2 cores). libgomp reads its wait policy when
  // it is loaded, before main, so the process starts again with a passive
  // one unless the user chose one.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
  }
  std::unique_ptr<Device> device = cpuDevice();
  return run(argc, argv, program, *device);
}

} // namespace ppcrt
