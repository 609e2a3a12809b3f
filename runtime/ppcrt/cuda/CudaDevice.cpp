//===- CudaDevice.cpp - ppcrt::run on one GPU per rank --------------------===//
//
// Each rank takes the GPU of its index among the node's ranks, runs its
// program on one compute stream, and keeps its arena and state in device
// memory; the host copies token windows in and the loss out.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/Device.h"
#include "runtime/ppcrt/cuda/Cuda.h"
#include "runtime/ppcrt/cuda/NcclRank.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace ppcrt::cuda {

static cudaStream_t computeStream = nullptr;

cudaStream_t stream() { return computeStream; }

void check(cudaError_t status, const char *what) {
  if (status == cudaSuccess)
    return;
  std::string message = std::string("CUDA: ") + cudaGetErrorString(status) + " in " + what;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (computeStream && cudaStreamIsCapturing(computeStream, &capture) == cudaSuccess &&
      capture != cudaStreamCaptureStatusNone)
    message += ", while the step was captured as a CUDA graph (--cuda-graphs=false launches "
               "its kernels from the host instead)";
  fatal(message.c_str());
}

void upload(void *device, const void *host, size_t bytes) {
  // Each constant is copied to device memory of its own at its first upload
  // (the first step, run from the host), and from there into the arena at
  // every step: a copy from pageable host memory is staged by the host,
  // which a CUDA graph's capture cannot hold.
  static std::map<const void *, void *> resident;
  void *&copy = resident[host];
  if (!copy) {
    check(cudaMalloc(&copy, std::max<size_t>(bytes, 1)), "copying a constant to the GPU");
    check(cudaMemcpy(copy, host, bytes, cudaMemcpyHostToDevice), "copying a constant to the GPU");
  }
  check(cudaMemcpyAsync(device, copy, bytes, cudaMemcpyDeviceToDevice, computeStream),
        "copying a constant into the arena");
}

namespace {

/// Dense peak FLOP/s of the GPUs ppc targets (MFU's denominator, as llm.c
/// and Megatron count it): bf16 tensor cores for bf16 programs, the fp32
/// units for fp32 ones (their GEMMs are exact fp32, not TF32). 0: unknown.
double peakOf(const cudaDeviceProp &props, bool bf16) {
  bool pcie = std::strstr(props.name, "PCIe") != nullptr;
  if (props.major == 9) // H100 / H200
    return bf16 ? (pcie ? 756e12 : 989e12) : (pcie ? 51e12 : 67e12);
  if (props.major == 8 && props.minor == 0) // A100
    return bf16 ? 312e12 : 19.5e12;
  return 0;
}

/// --profile: a CUDA event recorded on the compute stream at each mark, so
/// that a kernel's time is the stream's between its start and the next
/// one's (with its launch gap when the host falls behind); read once the
/// step's last event has happened.
class EventProfiler final : public Profiler {
public:
  explicit EventProfiler(int numKernels) : events(numKernels + 1), recorded(numKernels + 1) {
    for (cudaEvent_t &event : events)
      check(cudaEventCreate(&event), "creating the profile's CUDA events");
  }
  ~EventProfiler() override {
    for (cudaEvent_t event : events)
      cudaEventDestroy(event);
  }
  void mark(int k) override {
    check(cudaEventRecord(events[k], computeStream), "recording a profile's CUDA event");
    recorded[k] = true;
  }
  void endStep() override {
    std::vector<double> seconds(events.size() - 1, 0.0);
    if (recorded.back())
      check(cudaEventSynchronize(events.back()), "waiting for the profiled step");
    for (size_t k = 0; k + 1 < events.size(); ++k) {
      float ms = 0;
      if (recorded[k] && recorded[k + 1])
        check(cudaEventElapsedTime(&ms, events[k], events[k + 1]),
              "reading a profile's CUDA events");
      seconds[k] = ms * 1e-3;
    }
    std::fill(recorded.begin(), recorded.end(), false);
    add(std::move(seconds));
  }

private:
  std::vector<cudaEvent_t> events;
  std::vector<bool> recorded;
};

class CudaDevice final : public Device {
public:
  explicit CudaDevice(bool bf16) : bf16(bf16) {}
  ~CudaDevice() override {
    if (computeStream)
      cudaStreamDestroy(computeStream);
  }

  std::string start(int localRank, int, int) override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      return "no CUDA GPU is visible to this process (this executable was compiled with "
             "--target cuda; compile with --target cpu to train on CPUs)";
    if (localRank >= count)
      return "rank " + std::to_string(localRank) + " of this node has no GPU of its own (" +
             std::to_string(count) + " visible); start at most " + std::to_string(count) +
             " ranks per node";
    device = localRank;
    check(cudaSetDevice(device), "selecting this rank's GPU");
    check(cudaGetDeviceProperties(&props, device), "reading the GPU's properties");
    check(cudaStreamCreateWithFlags(&computeStream, cudaStreamNonBlocking),
          "creating the compute stream");
    return "";
  }
  std::unique_ptr<Rank> connect(const Program &program, double timeoutSeconds) override {
    return std::make_unique<NcclRank>(program, timeoutSeconds, computeStream);
  }
  void *allocate(size_t bytes) override {
    void *memory = nullptr;
    if (cudaMalloc(&memory, bytes) != cudaSuccess)
      return nullptr;
    // On the compute stream, which does not order itself after the legacy
    // default stream's work.
    check(cudaMemsetAsync(memory, 0, bytes, computeStream), "clearing device memory");
    check(cudaStreamSynchronize(computeStream), "clearing device memory");
    return memory;
  }
  void release(void *memory) override { cudaFree(memory); }
  /// Page-locked, so that copies to and from it run asynchronously at the
  /// link's full rate.
  void *hostMemory(size_t bytes) override {
    void *memory = nullptr;
    return cudaMallocHost(&memory, std::max<size_t>(bytes, 1)) == cudaSuccess ? memory : nullptr;
  }
  void freeHostMemory(void *memory) override { cudaFreeHost(memory); }
  void upload(void *device, const void *host, size_t bytes) override {
    check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, computeStream),
          "copying to the GPU");
    // The host buffer may be reused as soon as this returns.
    check(cudaStreamSynchronize(computeStream), "copying to the GPU");
  }
  void download(void *host, const void *device, size_t bytes) override {
    check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, computeStream),
          "copying from the GPU");
    check(cudaStreamSynchronize(computeStream), "copying from the GPU");
  }
  void copy(void *to, const void *from, size_t bytes) override {
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, computeStream),
          "copying on the GPU");
  }
  std::string describe() const override {
    return std::string(props.name) + " (GPU " + std::to_string(device) + ")";
  }
  double peakFlops() const override { return peakOf(props, bf16); }
  std::unique_ptr<Profiler> profiler(int numKernels) override {
    return std::make_unique<EventProfiler>(numKernels);
  }
  int64_t memoryInUse() const override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess)
      return 0;
    return int64_t(total - free);
  }

private:
  bool bf16;
  int device = 0;
  cudaDeviceProp props{};
};

} // namespace

int main(int argc, char **argv, const Program &program) {
  CudaDevice device(std::strcmp(program.precision, "bf16") == 0);
  return run(argc, argv, program, device);
}

} // namespace ppcrt::cuda
