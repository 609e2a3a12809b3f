//===- CalibrateCpu.cpp - the CPU device table, measured -------------------===//
//
// ppc-calibrate-cpu: run under mpirun with as many ranks as the executables
// it calibrates for, it measures what the cost model prices, the way the
// CPU target runs it: every rank at once, on its share of the node's cores
// (the executables' default), with the target's own GEMMs (ppcrt::cpu::gemm:
// OpenBLAS on OpenMP's threads) and MPI collectives:
//   - the GEMM rate (f32, square GEMMs of --gemm-size);
//   - the memory bandwidth (a triad a = b + s c over arrays far larger than
//     the caches);
//   - the all-reduce's latency (one float) and bus bandwidth (2 (n-1)/n of
//     the bytes over the time, nccl-tests' convention, as the cost model's
//     bytes per rank are), over all the ranks.
// Each figure is the slowest rank's median over repetitions. It writes the
// cluster file `ppc plan --cluster` and `ppc compile --explain` read: one
// node of n devices (the ranks), peaks and GEMM rates both the measured
// rate (the CPU target computes in f32), memory per rank the node's over n.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/CpuKernels.h"
#include "runtime/ppcrt/Device.h"

#include <mpi.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

int worldRank = 0, worldSize = 1;

[[noreturn]] void fail(const std::string &message) {
  if (worldRank == 0)
    std::fprintf(stderr, "error: %s\n", message.c_str());
  MPI_Finalize();
  std::exit(1);
}

/// The slowest rank's median seconds of `reps` runs of `fn`, all ranks
/// starting each run together.
double slowestMedian(int reps, const std::function<void()> &fn) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  double median = times[reps / 2];
  MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return median;
}

long parseInt(const char *flag, const char *text, long low, long high) {
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (!*text || *end || v < low || v > high)
    fail(std::string(flag) + " '" + text + "': expected an integer from " + std::to_string(low) +
         " to " + std::to_string(high));
  return v;
}

} // namespace

int main(int argc, char **argv) {
  // OpenBLAS's kernels as the executables get them (runtime/ppcrt/
  // CpuDevice.cpp): started again with them where it did not know the CPU.
  if (const char *core = ppcrt::openblasCoreForThisCpu()) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  std::string output = "-";
  long gemmSize = 512, threads = 0, reps = 7;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        fail(arg + ": expected a value");
      return argv[++i];
    };
    if (arg == "-o")
      output = value();
    else if (arg == "--gemm-size")
      gemmSize = parseInt("--gemm-size", value(), 16, 8192);
    else if (arg == "--threads-per-rank")
      threads = parseInt("--threads-per-rank", value(), 0, 1024);
    else if (arg == "--repetitions")
      reps = parseInt("--repetitions", value(), 1, 1000);
    else if (arg == "--help" || arg == "-h") {
      if (worldRank == 0)
        std::printf(
            "usage: mpirun -np N ppc-calibrate-cpu [-o CLUSTER.json] [--gemm-size S]\n"
            "       [--threads-per-rank T] [--repetitions R]\n\n"
            "Measures the GEMM rate, memory bandwidth and MPI all-reduce of N ranks run as\n"
            "ppc's CPU executables run (each on the node's cores / its ranks, or T threads),\n"
            "and writes them as a cluster file for ppc plan --cluster (- for stdout).\n");
      MPI_Finalize();
      return 0;
    } else
      fail("unknown argument '" + arg + "'; see --help");
  }
  // The threads as the executables choose them (runtime/ppcrt/Executable.cpp).
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank, MPI_INFO_NULL, &node);
  int localRanks = 1;
  MPI_Comm_size(node, &localRanks);
  int cores = int(std::thread::hardware_concurrency());
  int perRank = threads > 0 ? int(threads) : std::max(1, cores / localRanks);
  omp_set_num_threads(perRank);
  openblas_set_num_threads(1);
  int nodes = worldSize / localRanks;
  if (nodes * localRanks != worldSize)
    fail("the ranks are spread unevenly over nodes");

  // GEMM.
  int64_t s = gemmSize;
  std::vector<float> a(s * s, 1.0f), b(s * s, 0.5f), c(s * s);
  // Repeated to last 0.1 s or more: ranks sharing cores take turns over
  // the scheduler's slices, and a shorter run would measure one rank alone.
  auto start = std::chrono::steady_clock::now();
  ppcrt::cpu::gemm(false, false, s, s, s, a.data(), s, b.data(), s, c.data()); // warm
  double once = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int times = int(std::clamp(0.1 / std::max(once, 1e-9), 1.0, 10000.0));
  MPI_Allreduce(MPI_IN_PLACE, &times, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  double gemmSeconds = slowestMedian(int(reps), [&] {
    for (int t = 0; t < times; ++t)
      ppcrt::cpu::gemm(false, false, s, s, s, a.data(), s, b.data(), s, c.data());
  });
  double gemmRate = 2.0 * s * s * s * times / gemmSeconds;

  // Memory bandwidth: three arrays of 64 MiB.
  size_t n = size_t(16) << 20;
  std::vector<float> x(n, 1.0f), y(n, 2.0f), z(n, 0.0f);
  auto triad = [&] {
    for (int t = 0; t < 4; ++t) {
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < n; ++i)
        z[i] = x[i] + 0.5f * y[i];
    }
  };
  triad();
  double triadSeconds = slowestMedian(int(reps), triad);
  double memoryBandwidth = 4 * 3.0 * 4.0 * double(n) / triadSeconds;

  // The all-reduce over every rank: latency (one float), bus bandwidth
  // (16 MiB). One rank has none: its collectives are copies.
  double latency = 0, busBandwidth = memoryBandwidth;
  if (worldSize > 1) {
    float one = 1.0f;
    double few = slowestMedian(int(reps), [&] {
      for (int i = 0; i < 100; ++i)
        MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    latency = few / 100;
    size_t m = size_t(4) << 20;
    std::vector<float> buffer(m, 1.0f);
    double many = slowestMedian(int(reps), [&] {
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), int(m), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    double p = worldSize;
    busBandwidth = 2.0 * (p - 1) / p * 4.0 * double(m) / std::max(many - latency, 1e-9);
  }

  if (worldRank == 0) {
    double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE)) / localRanks;
    char host[256] = "cpu";
    gethostname(host, sizeof(host) - 1);
    char text[4096];
    std::snprintf(
        text, sizeof(text),
        "{\n"
        "  \"name\": \"cpu-%d-ranks\",\n"
        "  \"source\": \"ppc-calibrate-cpu on %s: %d ranks of %d threads (%d cores); GEMM "
        "%ldx%ldx%ld f32 %.3g FLOP/s; triad %.3g B/s; MPI all-reduce of %d ranks: %.3g s "
        "latency, %.3g B/s bus bandwidth\",\n"
        "  \"devices_per_node\": %d,\n"
        "  \"device\": {\"memory_bytes\": %.0f, \"host_memory_bytes\": %.0f,\n"
        "             \"peak_flops_bf16\": %.6g, \"peak_flops_f32\": %.6g,\n"
        "             \"matmul_flops_bf16\": %.6g, \"matmul_flops_f32\": %.6g,\n"
        "             \"memory_bandwidth\": %.6g},\n"
        "  \"intra_node\": {\"bandwidth\": %.6g, \"latency\": %.6g},\n"
        "  \"inter_node\": {\"bandwidth\": %.6g, \"latency\": %.6g},\n"
        "  \"host\": {\"link_bandwidth\": %.6g, \"memory_bandwidth\": %.6g}\n"
        "}\n",
        worldSize, host, worldSize, perRank, cores, long(s), long(s), long(s), gemmRate,
        memoryBandwidth, worldSize, latency, busBandwidth, localRanks, memory, memory, gemmRate,
        gemmRate, gemmRate, gemmRate, memoryBandwidth, busBandwidth, latency, busBandwidth, latency,
        memoryBandwidth, memoryBandwidth);
    if (output == "-") {
      std::fputs(text, stdout);
    } else {
      // Written whole or not at all.
      std::string temporary = output + ".tmp";
      FILE *f = std::fopen(temporary.c_str(), "w");
      if (!f || std::fputs(text, f) < 0 || std::fclose(f) != 0 ||
          std::rename(temporary.c_str(), output.c_str()) != 0) {
        std::remove(temporary.c_str());
        fail("-o '" + output + "': cannot write it (" + std::strerror(errno) + ")");
      }
    }
  }
  MPI_Comm_free(&node);
  MPI_Finalize();
  return 0;
}
