//===- EmulatorTest.cpp - the CUDA emulator and the cuBLASLt mapping -------===//
//
// What the CUDA emulator promises (runtime/ppcrt/cuda/emulator/README.md):
// barriers and warp shuffles order a block's threads as a GPU does, and a
// block whose threads reach different synchronization points is reported;
// launches outside the GPU's limits fail as CUDA's do; the stream kernels
// run on runs its work at once while other streams run theirs as late as
// the program allows, in issue order; copies check device ranges. Then the
// CUDA runtime's GEMM (Gemm.cpp: row-major products as column-major
// cuBLASLt calls, broadcast batches, transposes) against a direct loop in
// double, and the cuBLASLt checks the emulator makes.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/cuda/Kernels.cuh"

#include "test/unit/cuda/DeviceMemory.h"

#include <cublasLt.h>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using ppc::test::deviceCopy;
using ppc::test::hostCopy;

//===----------------------------------------------------------------------===//
// Threads of a block
//===----------------------------------------------------------------------===//

__global__ void rotateThroughShared(const int *in, int *out) {
  __shared__ int tile[256];
  tile[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x];
}

// Each thread reads its neighbour's value written before the barrier: without
// a barrier that orders the whole block, later threads' slots would be stale.
TEST(CudaEmulator, BarrierOrdersSharedMemoryAcrossTheBlock) {
  std::vector<int> in(3 * 256);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = int(i) * 7;
  int *din = deviceCopy(in), *dout = deviceCopy(std::vector<int>(in.size()));
  PPCRT_LAUNCH(rotateThroughShared, 3, 256, 0, nullptr)(din, dout);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> out = hostCopy(dout, in.size());
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 256; ++t)
      ASSERT_EQ(out[b * 256 + t], in[b * 256 + (t + 1) % 256]) << "block " << b << " thread " << t;
}

__global__ void shuffleEveryMask(int *out) {
  int value = int(threadIdx.x) * 10;
  // Five shuffles in a row reuse the exchange banks; each must see the
  // partner's value from the same shuffle.
  for (int mask = 1; mask < 32; mask *= 2)
    out[threadIdx.x * 5 + __builtin_ctz(mask)] = __shfl_xor_sync(0xffffffffu, value + mask, mask);
}

TEST(CudaEmulator, WarpShuffleXorReadsThePartnerLane) {
  int *dout = deviceCopy(std::vector<int>(64 * 5));
  PPCRT_LAUNCH(shuffleEveryMask, 1, 64, 0, nullptr)(dout);
  std::vector<int> out = hostCopy(dout, 64 * 5);
  for (int t = 0; t < 64; ++t)
    for (int bit = 0; bit < 5; ++bit) {
      int mask = 1 << bit;
      EXPECT_EQ(out[t * 5 + bit], (t ^ mask) * 10 + mask) << "thread " << t << " mask " << mask;
    }
}

// Two warps per block, each multiplying its own tiles with mma.sync: a
// row-major 16x16 A, B's 8 columns of 16 and a row-major 16x8 accumulator
// from memory, each lane taking the elements PTX gives it (groupID g =
// lane / 4, t = lane % 4: A's (g, 2t + i % 2) and (g + 8, ...), then 8
// columns on; B's (2t + i % 2, g), then 8 rows on; C's (g + 8 (i / 2),
// 2t + i % 2)), twice over (d = a b + c, then a b + d).
__global__ void multiplyTiles(const ppcrt::cuda::bf16 *a, const ppcrt::cuda::bf16 *b,
                              const float *c, float *d) {
  using ppcrt::cuda::bf16Pair;
  const size_t tile = size_t(blockIdx.x) * 2 + threadIdx.x / 32;
  const ppcrt::cuda::bf16 *ta = a + tile * 256, *tb = b + tile * 128;
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  uint32_t fa[4], fb[2];
  for (int w = 0; w < 4; ++w) {
    const int r = g + 8 * (w % 2), k = 2 * t + 8 * (w / 2);
    fa[w] = bf16Pair(ta[r * 16 + k], ta[r * 16 + k + 1]);
  }
  for (int w = 0; w < 2; ++w) {
    const int k = 2 * t + 8 * w;
    fb[w] = bf16Pair(tb[g * 16 + k], tb[g * 16 + k + 1]);
  }
  float acc[4];
  for (int e = 0; e < 4; ++e)
    acc[e] = c[tile * 128 + (g + 8 * (e / 2)) * 8 + 2 * t + e % 2];
  ppcrt::cuda::mmaBf16(acc, fa, fb);
  ppcrt::cuda::mmaBf16(acc, fa, fb);
  for (int e = 0; e < 4; ++e)
    d[tile * 128 + (g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = acc[e];
}

// Every tile is its own product, bit for bit the k-ordered float sum (the
// products of bf16 values are exact in float).
TEST(CudaEmulator, MmaProductsAreEachTilesOwnInKOrder) {
  constexpr int kTiles = 2 * 50;
  std::vector<ppcrt::cuda::bf16> a(kTiles * 256), b(kTiles * 128);
  std::vector<float> c(kTiles * 128);
  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(-2, 2);
  for (auto &x : a)
    x = ppcrt::cuda::bf16(uniform(random));
  for (auto &x : b)
    x = ppcrt::cuda::bf16(uniform(random));
  for (float &x : c)
    x = uniform(random);
  auto *da = deviceCopy(a), *db = deviceCopy(b);
  float *dc = deviceCopy(c), *dd = deviceCopy(std::vector<float>(c.size()));
  PPCRT_LAUNCH(multiplyTiles, kTiles / 2, 64, 0, nullptr)(da, db, dc, dd);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<float> d = hostCopy(dd, c.size());
  for (int tile = 0; tile < kTiles; ++tile)
    for (int r = 0; r < 16; ++r)
      for (int n = 0; n < 8; ++n) {
        float want = c[tile * 128 + r * 8 + n];
        for (int pass = 0; pass < 2; ++pass)
          for (int k = 0; k < 16; ++k)
            want += float(a[tile * 256 + r * 16 + k]) * float(b[tile * 128 + n * 16 + k]);
        ASSERT_EQ(d[tile * 128 + r * 8 + n], want)
            << "tile " << tile << " row " << r << " column " << n;
      }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dd);
}

__global__ void divergentBarrier(int *out) {
  if (threadIdx.x < 32)
    __syncthreads();
  else
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

// Half the block waits at a barrier, half at a shuffle: a GPU would hang.
TEST(CudaEmulatorDeathTest, DivergentSynchronizationIsReported) {
  // OpenBLAS has threads: the child re-runs the test rather than fork alone.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int *dout = deviceCopy(std::vector<int>(64));
  EXPECT_DEATH(PPCRT_LAUNCH(divergentBarrier, 1, 64, 0, nullptr)(dout),
               "kernel divergentBarrier, block \\(0, 0, 0\\): thread \\(0, 0, 0\\) waits at "
               "__syncthreads\\(\\) #1 while thread \\(32, 0, 0\\) waits at a warp shuffle #1");
}

__global__ void countLaunches(int *counter) { atomicAdd(counter, 1); }

TEST(CudaEmulator, LaunchesOutsideTheGpuLimitsFailWithoutRunning) {
  int *counter = deviceCopy(std::vector<int>{0});
  PPCRT_LAUNCH(countLaunches, 2, dim3(4, 2), 0, nullptr)(counter);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(hostCopy(counter, 1)[0], 16);
  for (auto [grid, block] :
       {std::pair<dim3, dim3>{1, 1025}, {dim3(1, 65536), 32}, {1, dim3(1, 1, 65)}, {0, 32}}) {
    PPCRT_LAUNCH(countLaunches, grid, block, 0, nullptr)(counter);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "reading the error resets it";
  EXPECT_EQ(hostCopy(counter, 1)[0], 16);
}

//===----------------------------------------------------------------------===//
// Streams, events and memory
//===----------------------------------------------------------------------===//

__global__ void writeValue(float *out, float value) { out[threadIdx.x] = value; }

// A copy on a communication stream has not happened until something waits
// for it, and then it reads what the data is by then: a program that reads
// before waiting, or writes the source before the wait, gets other numbers.
TEST(CudaEmulator, CommunicationStreamsRunWhenWaitedFor) {
  cudaStream_t compute, comm;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), cudaSuccess);
  float *from = deviceCopy(std::vector<float>(4, 1.0f));
  float *to = deviceCopy(std::vector<float>(4, 0.0f));
  cudaEvent_t ready, done;
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  PPCRT_LAUNCH(writeValue, 1, 4, 0, compute)(from, 2.0f);
  cudaEventRecord(ready, compute);
  cudaStreamWaitEvent(comm, ready, 0);
  ASSERT_EQ(cudaMemcpyAsync(to, from, 16, cudaMemcpyDeviceToDevice, comm), cudaSuccess);
  cudaEventRecord(done, comm);
  EXPECT_EQ(hostCopy(to, 4)[0], 0.0f) << "the copy ran before anything waited for it";
  PPCRT_LAUNCH(writeValue, 1, 4, 0, compute)(from, 3.0f);
  cudaStreamWaitEvent(compute, done, 0);
  EXPECT_EQ(hostCopy(to, 4)[0], 3.0f) << "the copy did not run at the wait";
  cudaEventDestroy(ready);
  cudaEventDestroy(done);
  cudaStreamDestroy(comm);
  cudaStreamDestroy(compute);
}

__global__ void spin(float *out, int iterations) {
  float x = out[threadIdx.x];
  for (int i = 0; i < iterations; ++i)
    x = x * 0.999f + 1.0f;
  out[threadIdx.x] = x;
}

// Timing events (--profile) read the clock when their stream reaches them:
// the time between two is that of the work between, in stream order; events
// without timing, or never recorded, have no time to give.
TEST(CudaEmulator, TimingEventsMeasureTheWorkBetweenThem) {
  cudaStream_t compute;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  float *data = deviceCopy(std::vector<float>(32, 0.0f));
  cudaEvent_t start, middle, end, untimed, unrecorded;
  for (cudaEvent_t *event : {&start, &middle, &end, &unrecorded})
    ASSERT_EQ(cudaEventCreate(event), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  PPCRT_LAUNCH(spin, 1, 32, 0, compute)(data, 1);
  ASSERT_EQ(cudaEventRecord(start, compute), cudaSuccess);
  PPCRT_LAUNCH(spin, 1, 32, 0, compute)(data, 1 << 20);
  ASSERT_EQ(cudaEventRecord(middle, compute), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, compute), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, compute), cudaSuccess);
  float spinning = -1, after = -1;
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&spinning, start, middle), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&after, middle, end), cudaSuccess);
  EXPECT_GT(spinning, 0.0f) << "a million iterations on every lane took no time";
  EXPECT_GE(after, 0.0f);
  EXPECT_GT(spinning, after) << "nothing ran between the last two events";
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, unrecorded), cudaErrorInvalidResourceHandle);
  for (cudaEvent_t event : {start, middle, end, untimed, unrecorded})
    cudaEventDestroy(event);
  cudaStreamDestroy(compute);
}

__global__ void addValue(float *out, float value) { out[threadIdx.x] += value; }

// A captured step runs nothing while it is captured; each launch of the graph
// runs its kernels and its forked stream's copy again, in order, reading
// what the memory holds by then (the graph keeps addresses, not values).
TEST(CudaEmulator, GraphsReplayCapturedWorkAcrossStreams) {
  cudaStream_t compute, comm;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), cudaSuccess);
  float *x = deviceCopy(std::vector<float>(4, 1.0f));
  float *copy = deviceCopy(std::vector<float>(4, 0.0f));
  cudaEvent_t fork, join;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
  ASSERT_EQ(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  PPCRT_LAUNCH(addValue, 1, 4, 0, compute)(x, 1.0f);
  cudaEventRecord(fork, compute);
  cudaStreamWaitEvent(comm, fork, 0);
  ASSERT_EQ(cudaMemcpyAsync(copy, x, 16, cudaMemcpyDeviceToDevice, comm), cudaSuccess);
  cudaEventRecord(join, comm);
  cudaStreamWaitEvent(compute, join, 0);
  PPCRT_LAUNCH(addValue, 1, 4, 0, compute)(x, 10.0f);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(compute, &graph), cudaSuccess);
  EXPECT_EQ(hostCopy(x, 4)[0], 1.0f) << "a captured kernel ran";
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 3u); // two kernels and the copy; records and waits are edges
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess); // the executable graph keeps its nodes
  for (float want : {2.0f, 13.0f}) {
    ASSERT_EQ(cudaGraphLaunch(exec, compute), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
    EXPECT_EQ(hostCopy(copy, 4)[3], want);
    EXPECT_EQ(hostCopy(x, 4)[3], want + 10.0f);
  }
  cudaGraphExecDestroy(exec);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(comm);
  cudaStreamDestroy(compute);
}

// What a capture cannot hold fails as on a GPU and invalidates the capture:
// a host wait, an allocation, work on the legacy default stream.
TEST(CudaEmulator, HostWaitsAndAllocationsInvalidateACapture) {
  cudaStream_t compute;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  float *x = deviceCopy(std::vector<float>(4, 1.0f));
  for (int how = 0; how < 3; ++how) {
    ASSERT_EQ(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    PPCRT_LAUNCH(addValue, 1, 4, 0, compute)(x, 1.0f);
    void *memory = nullptr;
    // (Braces: EXPECT_EQ is an if of its own.)
    if (how == 0) {
      EXPECT_EQ(cudaStreamSynchronize(compute), cudaErrorStreamCaptureUnsupported);
    } else if (how == 1) {
      EXPECT_EQ(cudaMalloc(&memory, 16), cudaErrorStreamCaptureUnsupported);
    } else {
      PPCRT_LAUNCH(addValue, 1, 4, 0, nullptr)(x, 1.0f);
    }
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(compute, &graph), cudaErrorStreamCaptureInvalidated) << how;
    EXPECT_EQ(graph, nullptr);
  }
  EXPECT_EQ(hostCopy(x, 4)[0], 1.0f);
  cudaStreamDestroy(compute);
}

// Queued work runs in the order it was issued, whichever stream it is on.
TEST(CudaEmulator, QueuedWorkRunsInIssueOrderAcrossStreams) {
  cudaStream_t first, second;
  cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking);
  unsigned char *buffer = deviceCopy(std::vector<unsigned char>(8, 0));
  unsigned char *seen = deviceCopy(std::vector<unsigned char>(8, 0));
  cudaMemsetAsync(buffer, 1, 8, first);
  cudaMemsetAsync(buffer, 2, 8, second);
  cudaMemcpyAsync(seen, buffer, 8, cudaMemcpyDeviceToDevice, first);
  cudaEvent_t done;
  cudaEventCreate(&done);
  cudaEventRecord(done, first);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(hostCopy(seen, 8)[0], 2);
  cudaEventDestroy(done);
  cudaStreamDestroy(first);
  cudaStreamDestroy(second);
}

TEST(CudaEmulator, DeviceMemoryStartsAsNaNAndCopiesCheckDeviceRanges) {
  float *device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&device), 8 * sizeof(float)), cudaSuccess);
  EXPECT_TRUE(std::isnan(hostCopy(device, 8)[7]));
  std::vector<float> host(16);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 16 * sizeof(float), cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), device + 1, 8 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 8 * sizeof(float), cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(host.data(), 0, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

//===----------------------------------------------------------------------===//
// GEMMs: Gemm.cpp's mapping onto cuBLASLt, and cuBLASLt's checks
//===----------------------------------------------------------------------===//

struct GemmCase {
  bool transA, transB;
  std::vector<int64_t> batch, aStrides, bStrides;
  int64_t m, n, k;
};

/// c[i] = op(a at sum(coord * aStrides)) op(b ...), row-major, in double.
std::vector<double> referenceGemm(const GemmCase &g, const std::vector<float> &a,
                                  const std::vector<float> &b) {
  int64_t count = 1;
  for (int64_t size : g.batch)
    count *= size;
  std::vector<double> c(count * g.m * g.n);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, aAt = 0, bAt = 0;
    for (int d = int(g.batch.size()) - 1; d >= 0; --d) {
      aAt += rest % g.batch[d] * g.aStrides[d];
      bAt += rest % g.batch[d] * g.bStrides[d];
      rest /= g.batch[d];
    }
    const float *x = a.data() + aAt * g.m * g.k, *y = b.data() + bAt * g.k * g.n;
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t col = 0; col < g.n; ++col) {
        double sum = 0;
        for (int64_t l = 0; l < g.k; ++l)
          sum += double(g.transA ? x[l * g.m + r] : x[r * g.k + l]) *
                 double(g.transB ? y[col * g.k + l] : y[l * g.n + col]);
        c[(i * g.m + r) * g.n + col] = sum;
      }
  }
  return c;
}

// Every transpose combination, plain, strided and broadcast batches (a
// weight shared by every batch; batch dims of which only some broadcast).
TEST(CudaEmulator, MatmulMatchesADirectProductForTransposesAndBatches) {
  std::vector<GemmCase> cases = {
      {false, false, {}, {}, {}, 5, 7, 3},
      {true, false, {}, {}, {}, 4, 6, 9},
      {false, true, {}, {}, {}, 8, 3, 5},
      {true, true, {}, {}, {}, 2, 9, 4},
      {false, false, {3}, {1}, {1}, 4, 5, 6},
      {false, true, {4}, {1}, {0}, 3, 8, 5},
      {true, false, {2, 3}, {3, 1}, {0, 1}, 5, 4, 7},
      {false, false, {2, 1, 3}, {3, 0, 1}, {1, 0, 0}, 6, 2, 3},
  };
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (const GemmCase &g : cases) {
    int64_t aCount = 1, bCount = 1;
    for (size_t d = 0; d < g.batch.size(); ++d) {
      aCount += (g.batch[d] - 1) * g.aStrides[d];
      bCount += (g.batch[d] - 1) * g.bStrides[d];
    }
    int64_t count = 1;
    for (int64_t size : g.batch)
      count *= size;
    std::vector<float> a(aCount * g.m * g.k), b(bCount * g.k * g.n);
    for (float &v : a)
      v = uniform(random);
    for (float &v : b)
      v = uniform(random);
    float *da = deviceCopy(a), *db = deviceCopy(b);
    float *dc = deviceCopy(std::vector<float>(count * g.m * g.n));
    ppcrt::cuda::matmul(ppcrt::cuda::GemmType::F32, ppcrt::cuda::GemmType::F32, g.transA, g.transB,
                        int(g.batch.size()), g.batch.data(), g.aStrides.data(), g.bStrides.data(),
                        g.m, g.n, g.k, da, db, dc, nullptr, nullptr, nullptr, nullptr, "test");
    std::vector<float> c = hostCopy(dc, count * g.m * g.n);
    std::vector<double> want = referenceGemm(g, a, b);
    for (size_t i = 0; i < c.size(); ++i)
      ASSERT_NEAR(c[i], want[i], 1e-5)
          << "element " << i << " of the case with m=" << g.m << " n=" << g.n << " k=" << g.k
          << " transA=" << g.transA << " transB=" << g.transB;
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
  }
}

// bf16 operands, bf16 product: f32 accumulation, one rounding at the end.
TEST(CudaEmulator, Bf16MatmulAccumulatesInF32AndRoundsOnce) {
  int64_t m = 3, n = 4, k = 64;
  std::vector<ppcrt::cuda::bf16> a(m * k), b(k * n);
  std::vector<float> aWide(m * k), bWide(k * n);
  std::mt19937 random(3);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (size_t i = 0; i < a.size(); ++i)
    aWide[i] = float(a[i] = ppcrt::cuda::bf16(uniform(random)));
  for (size_t i = 0; i < b.size(); ++i)
    bWide[i] = float(b[i] = ppcrt::cuda::bf16(uniform(random)));
  auto *da = deviceCopy(a), *db = deviceCopy(b);
  auto *dc = deviceCopy(std::vector<ppcrt::cuda::bf16>(m * n));
  ppcrt::cuda::matmul(ppcrt::cuda::GemmType::BF16, ppcrt::cuda::GemmType::BF16, false, false, 0,
                      nullptr, nullptr, nullptr, m, n, k, da, db, dc, nullptr, nullptr, nullptr,
                      nullptr, "test");
  std::vector<ppcrt::cuda::bf16> c = hostCopy(dc, m * n);
  std::vector<double> want = referenceGemm({false, false, {}, {}, {}, m, n, k}, aWide, bWide);
  for (size_t i = 0; i < c.size(); ++i)
    EXPECT_EQ(float(c[i]), float(ppcrt::cuda::bf16(float(want[i])))) << "element " << i;
}

// The epilogue: a bias per column (of ours; per row of cuBLASLt's D) added
// to every row of every batch, and an addend (C, beta 1), in f32 with the
// product and rounded once; for transposed and batched (broadcast)
// products, with and without each term.
TEST(CudaEmulator, MatmulAddsABiasAndAnAddendInItsEpilogue) {
  std::vector<GemmCase> cases = {
      {false, false, {}, {}, {}, 5, 7, 3},
      {true, true, {}, {}, {}, 2, 9, 4},
      {false, true, {4}, {1}, {0}, 3, 8, 5},
      {true, false, {2, 3}, {3, 1}, {0, 1}, 5, 4, 7},
  };
  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(-1, 1);
  auto fill = [&](std::vector<float> &v) {
    for (float &x : v)
      x = uniform(random);
  };
  for (const GemmCase &g : cases) {
    int64_t aCount = 1, bCount = 1, count = 1;
    for (size_t d = 0; d < g.batch.size(); ++d) {
      aCount += (g.batch[d] - 1) * g.aStrides[d];
      bCount += (g.batch[d] - 1) * g.bStrides[d];
      count *= g.batch[d];
    }
    std::vector<float> a(aCount * g.m * g.k), b(bCount * g.k * g.n), bias(g.n),
        addend(count * g.m * g.n);
    fill(a), fill(b), fill(bias), fill(addend);
    std::vector<double> product = referenceGemm(g, a, b);
    float *da = deviceCopy(a), *db = deviceCopy(b), *dBias = deviceCopy(bias),
          *dAddend = deviceCopy(addend);
    for (bool withBias : {false, true})
      for (bool withAddend : {false, true}) {
        float *dc = deviceCopy(std::vector<float>(count * g.m * g.n, NAN));
        ppcrt::cuda::matmul(ppcrt::cuda::GemmType::F32, ppcrt::cuda::GemmType::F32, g.transA,
                            g.transB, int(g.batch.size()), g.batch.data(), g.aStrides.data(),
                            g.bStrides.data(), g.m, g.n, g.k, da, db, dc,
                            withBias ? dBias : nullptr, withAddend ? dAddend : nullptr, nullptr,
                            nullptr, "test");
        std::vector<float> c = hostCopy(dc, count * g.m * g.n);
        for (size_t i = 0; i < c.size(); ++i) {
          double want =
              product[i] + (withBias ? bias[i % g.n] : 0.0) + (withAddend ? addend[i] : 0.0);
          ASSERT_NEAR(c[i], want, 1e-5) << "element " << i << " bias " << withBias << " addend "
                                        << withAddend << " m=" << g.m << " n=" << g.n;
        }
        cudaFree(dc);
      }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dBias);
    cudaFree(dAddend);
  }
  // bf16: the sum of product, bias and addend rounded once.
  int64_t m = 3, n = 4, k = 32;
  std::vector<ppcrt::cuda::bf16> a(m * k), b(k * n), bias(n), addend(m * n);
  std::vector<float> aWide(m * k), bWide(k * n);
  for (size_t i = 0; i < a.size(); ++i)
    aWide[i] = float(a[i] = ppcrt::cuda::bf16(uniform(random)));
  for (size_t i = 0; i < b.size(); ++i)
    bWide[i] = float(b[i] = ppcrt::cuda::bf16(uniform(random)));
  for (auto &v : bias)
    v = ppcrt::cuda::bf16(uniform(random));
  for (auto &v : addend)
    v = ppcrt::cuda::bf16(uniform(random));
  auto *da = deviceCopy(a), *db = deviceCopy(b), *dBias = deviceCopy(bias),
       *dAddend = deviceCopy(addend);
  auto *dc = deviceCopy(std::vector<ppcrt::cuda::bf16>(m * n));
  ppcrt::cuda::matmul(ppcrt::cuda::GemmType::BF16, ppcrt::cuda::GemmType::BF16, false, false, 0,
                      nullptr, nullptr, nullptr, m, n, k, da, db, dc, dBias, dAddend, nullptr,
                      nullptr, "test");
  std::vector<ppcrt::cuda::bf16> c = hostCopy(dc, m * n);
  std::vector<double> want = referenceGemm({false, false, {}, {}, {}, m, n, k}, aWide, bWide);
  for (size_t i = 0; i < c.size(); ++i) {
    float sum = float(want[i]) + float(addend[i]) + float(bias[i % n]);
    EXPECT_NEAR(float(c[i]), float(ppcrt::cuda::bf16(sum)), 1e-6) << "element " << i;
  }
}

// The sums over k of op(a)'s rows (BGRADB: cuBLASLt's B is our a) or of
// op(b)'s columns (BGRADA), a bias's gradient, written with the product:
// f32 and bf16 (summed in float, rounded once), the operand transposed or
// not; a batch, and a cuBLASLt without the epilogue
// (PPCRT_EMULATOR_REFUSE_BGRAD), leave them to the caller (false) with the
// product computed.
TEST(CudaEmulator, MatmulWritesTheSumsOfAnOperandOverK) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> uniform(-1, 1);
  int64_t shapes = 0;
  for (bool ofA : {true, false})
    for (bool transposed : {false, true})
      for (bool bf16 : {false, true})
        for (bool refused : {false, true}) {
          SCOPED_TRACE(std::string(ofA ? "a" : "b") + (transposed ? " transposed" : "") +
                       (bf16 ? " bf16" : " f32") + (refused ? " refused" : ""));
          if (refused)
            setenv("PPCRT_EMULATOR_REFUSE_BGRAD", "1", 1);
          // (Each case its own shape: the plans are cached by shape.)
          int64_t m = 3 + shapes++, n = 5, k = 33;
          bool transA = ofA && transposed, transB = !ofA && transposed;
          std::vector<float> a(m * k), b(k * n);
          for (float &v : a)
            v = bf16 ? float(ppcrt::cuda::bf16(uniform(random))) : uniform(random);
          for (float &v : b)
            v = bf16 ? float(ppcrt::cuda::bf16(uniform(random))) : uniform(random);
          std::vector<double> product = referenceGemm({transA, transB, {}, {}, {}, m, n, k}, a, b);
          const int64_t count = ofA ? m : n;
          std::vector<double> sums(count, 0.0);
          for (int64_t j = 0; j < count; ++j)
            for (int64_t kk = 0; kk < k; ++kk)
              sums[j] += ofA ? (transA ? a[kk * m + j] : a[j * k + kk])
                             : (transB ? b[j * k + kk] : b[kk * n + j]);
          auto run = [&](auto zero) {
            using T = decltype(zero);
            std::vector<T> aT(a.begin(), a.end()), bT(b.begin(), b.end());
            T *da = deviceCopy(aT), *db = deviceCopy(bT);
            T *dc = deviceCopy(std::vector<T>(m * n, T(NAN)));
            T *dSums = deviceCopy(std::vector<T>(count, T(NAN)));
            const auto type = bf16 ? ppcrt::cuda::GemmType::BF16 : ppcrt::cuda::GemmType::F32;
            bool wrote = ppcrt::cuda::matmul(type, type, transA, transB, 0, nullptr, nullptr,
                                             nullptr, m, n, k, da, db, dc, nullptr, nullptr,
                                             ofA ? dSums : nullptr, ofA ? nullptr : dSums, "test");
            EXPECT_EQ(wrote, !refused);
            std::vector<T> c = hostCopy(dc, m * n), got = hostCopy(dSums, count);
            for (int64_t i = 0; i < m * n; ++i)
              EXPECT_NEAR(float(c[i]), product[i], bf16 ? 0.02 : 1e-5) << "element " << i;
            for (int64_t j = 0; wrote && j < count; ++j)
              EXPECT_NEAR(float(got[j]), float(T(float(sums[j]))), bf16 ? 1e-6 : 1e-5)
                  << "sum " << j;
            for (int64_t j = 0; !wrote && j < count; ++j)
              EXPECT_TRUE(std::isnan(float(got[j]))) << "sum " << j << " written";
          };
          if (bf16)
            run(ppcrt::cuda::bf16(0.0f));
          else
            run(0.0f);
          unsetenv("PPCRT_EMULATOR_REFUSE_BGRAD");
        }
  // A batch of products: no sums.
  std::vector<float> a(2 * 4 * 3, 1.0f), b(3 * 2, 1.0f);
  const int64_t batch[1] = {2}, aStrides[1] = {1}, bStrides[1] = {0};
  float *dSums = deviceCopy(std::vector<float>(4, NAN));
  EXPECT_FALSE(ppcrt::cuda::matmul(ppcrt::cuda::GemmType::F32, ppcrt::cuda::GemmType::F32, false,
                                   false, 1, batch, aStrides, bStrides, 4, 2, 3, deviceCopy(a),
                                   deviceCopy(b), deviceCopy(std::vector<float>(16)), nullptr,
                                   nullptr, dSums, nullptr, "test"));
  EXPECT_TRUE(std::isnan(hostCopy(dSums, 4)[0]));
}

// Epilogues the emulator does not have are refused when set, and the bias
// epilogue without a bias in device memory when the GEMM is called.
TEST(CudaEmulator, CublasLtRefusesUnknownEpiloguesAndAMissingBias) {
  cublasLtHandle_t handle;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  uint32_t relu = 2, bias = CUBLASLT_EPILOGUE_BIAS;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof(relu)),
            CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &bias, sizeof(bias)),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t layout;
  cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, 4);
  cublasLtMatmulPreference_t preference;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, op, layout, layout, layout, layout, preference,
                                           1, &result, &found),
            CUBLAS_STATUS_SUCCESS);
  float *memory = deviceCopy(std::vector<float>(256, 1.0f));
  float *x = memory, *y = memory + 64, *z = memory + 128, *b = memory + 192;
  const float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(handle, op, &one, x, layout, y, layout, &zero, z, layout, z, layout,
                           &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  float host[4] = {1, 2, 3, 4};
  const float *hostBias = host; // not device memory
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &hostBias,
                                           sizeof(hostBias)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmul(handle, op, &one, x, layout, y, layout, &zero, z, layout, z, layout,
                           &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b));
  EXPECT_EQ(cublasLtMatmul(handle, op, &one, x, layout, y, layout, &zero, z, layout, z, layout,
                           &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(hostCopy(z, 16)[5], 5.0f); // 4 (the product of ones) + 1 (the bias)
  cudaFree(memory);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(handle);
}

TEST(CudaEmulator, CublasLtRejectsLayoutsThatDisagreeAndMisalignedPointers) {
  cublasLtHandle_t handle;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  // A 4x3, B 3x5, C 4x5, column-major; then a B whose rows are not A's cols.
  cublasLtMatrixLayout_t a, b, c, wrongB;
  cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 4, 3, 4);
  cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, 3, 5, 3);
  cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, 4, 5, 4);
  cublasLtMatrixLayoutCreate(&wrongB, CUDA_R_32F, 4, 5, 4);
  cublasLtMatmulPreference_t preference;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result;
  int found = -1;
  EXPECT_EQ(
      cublasLtMatmulAlgoGetHeuristic(handle, op, a, wrongB, c, c, preference, 1, &result, &found),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(found, 0);
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, op, a, b, c, c, preference, 1, &result, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  // The algorithm assumes cuBLASLt's default 256-byte alignment.
  float *memory = deviceCopy(std::vector<float>(192, 1.0f));
  float *x = memory, *y = memory + 64, *z = memory + 128; // 256 bytes apart
  const float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(handle, op, &one, x, a, y, b, &zero, z, c, z, c, &result.algo, nullptr,
                           0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmul(handle, op, &one, x + 1, a, y, b, &zero, z, c, z, c, &result.algo,
                           nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(hostCopy(z, 20)[19], 3.0f);
  cudaFree(memory);
  for (cublasLtMatrixLayout_t layout : {a, b, c, wrongB})
    cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(handle);
}

} // namespace
