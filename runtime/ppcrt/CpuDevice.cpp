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
extern "C" char *openblas_get_corename(void);

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
    // The GEMMs run on OpenMP's threads (CpuGemm.cpp), OpenBLAS on one.
    openblas_set_num_threads(1);
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
    return "cpu, " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") +
           ", OpenBLAS " + openblas_get_corename();
  }

private:
  int threads = 1;
};

} // namespace

std::unique_ptr<Device> cpuDevice() { return std::make_unique<CpuDevice>(); }

/// The OpenBLAS kernels for this CPU where OpenBLAS fell back to its
/// generic x86-64 ones (Prescott: SSE3) for a CPU it does not know, which
/// 0.3.21 (Debian 12) does for Intel's model 207 (Emerald Rapids): its
/// sgemm ran at 64 GFLOP/s on 2 cores there, 226 with Cooperlake's
/// kernels (issue 19). Null where OpenBLAS chose itself or the CPU has
/// neither AVX-512 nor AVX2 with FMA; the user's OPENBLAS_CORETYPE wins.
const char *openblasCoreForThisCpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (std::getenv("OPENBLAS_CORETYPE") || std::strcmp(openblas_get_corename(), "Prescott") != 0)
    return nullptr;
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512cd");
  if (avx512 && __builtin_cpu_supports("avx512bf16"))
    return "Cooperlake";
  if (avx512)
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return nullptr;
}

int main(int argc, char **argv, const Program &program) {
  // OpenBLAS chooses its kernels when it is loaded, before main: where it
  // did not know this CPU, the process starts again with the right ones.
  // (OpenMP's wait policy is libgomp's default: with the GEMMs on OpenMP's
  // threads nothing else waits for the cores, and the step was 15% slower
  // with OMP_WAIT_POLICY=PASSIVE, which the executable set while OpenBLAS
  // had threads of its own.)
  if (const char *core = openblasCoreForThisCpu()) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
  }
  std::unique_ptr<Device> device = cpuDevice();
  return run(argc, argv, program, *device);
}

} // namespace ppcrt
