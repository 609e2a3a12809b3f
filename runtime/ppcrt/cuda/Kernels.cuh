//===- Kernels.cuh - library kernels generated CUDA code launches -*- CUDA -*-===//
//
// The ops that are not fused elementwise kernels: reductions, softmax, layer
// norm, the loss, attention, and data movement, as templates nvcc
// instantiates in each generated executable (GEMMs are cuBLASLt calls,
// Cuda.h). Every launch goes on the rank's compute stream. Numerics: sums
// over many elements (reduce, the loss) accumulate in double, softmax, layer
// norm and attention in float (double for f64); bf16 values are computed in
// float and rounded once per op. The functions the op emitters call have the
// names and arguments of runtime/ppcrt/CpuKernels.h's (codegen/Ops.cpp writes
// the call for either).
//
// Kernels cannot stop the process; an index out of range sets
// kernelErrorFlag (the first error's id), which the generated
// kernelError() reads after each step.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_CUDA_KERNELS_CUH
#define PPC_RUNTIME_PPCRT_CUDA_KERNELS_CUH

#include "runtime/ppcrt/AttentionGrad.h"
#include "runtime/ppcrt/Lines.h"
#include "runtime/ppcrt/NormSums.h"
#include "runtime/ppcrt/Scalar.h"
#include "runtime/ppcrt/cuda/Cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#ifdef PPCRT_CUDA_EMULATOR
#include <mma.h> // mma.sync (mmaBf16), which GPU builds write as assembly
#endif

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ppcrt::cuda {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;

// kernel<<<grid, block, shared, stream>>>(args), spelt so that the CUDA
// emulator (runtime/ppcrt/cuda/emulator), whose host compiler has no
// launch syntax, can run the same source.
#ifndef PPCRT_CUDA_EMULATOR
#define PPCRT_LAUNCH(kernel, grid, block, shared, stream) kernel<<<grid, block, shared, stream>>>
#endif

// nvcc unrolls the loops over register arrays fully (their indices must be
// constants); the emulator's host compiler need not.
#ifdef __CUDACC__
#define PPCRT_UNROLL _Pragma("unroll")
#else
#define PPCRT_UNROLL
#endif

/// Blocks of kThreads for `n` work items (grid-stride loops cover the rest).
inline unsigned blocksFor(int64_t n, int64_t perThread = 1) {
  int64_t blocks = (n / perThread + kThreads - 1) / kThreads;
  return unsigned(blocks < 1 ? 1 : blocks > 65536 * 8 ? 65536 * 8 : blocks);
}

/// Checks the last launch.
inline void launched(const char *what) { check(cudaGetLastError(), what); }

/// The first error a kernel flagged this step (its id), 0 when none.
__device__ int kernelErrorFlag;

__device__ inline void flagError(int id) { atomicCAS(&kernelErrorFlag, 0, id); }

/// The register type of an element type: bf16 is computed in float.
template <typename T> struct Register {
  using type = T;
};
template <> struct Register<bf16> {
  using type = float;
};
template <typename T> using Reg = typename Register<T>::type;

/// A value computed in float rounded to bf16 and back (one rounding per op).
__device__ __forceinline__ float roundBf16(float x) {
  return __bfloat162float(__float2bfloat16(x));
}

/// V consecutive elements, loaded or stored with one vector access.
template <typename T, int V> struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

__device__ __forceinline__ int64_t stridedIndex(const Dims &d, int64_t i) {
  int64_t at = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    at += (i % d.size[k]) * d.stride[k];
    i /= d.size[k];
  }
  return at;
}

/// What softmax and layer norm compute in: float, double for double.
template <typename T> using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;

/// x as an operand of T's products: rounded to T where T is narrower than
/// its compute type (bf16), else itself. Attention's backward rounds the
/// probabilities and the scores' gradient so before their products, as
/// FlashAttention does (docs/architecture.md, "Mixed precision").
template <typename T, typename C> __device__ inline C asOperand(C x) {
  if constexpr (sizeof(T) < sizeof(C))
    return C(T(x));
  else
    return x;
}

/// Sum (or max) of `value` over the block; every thread gets the result.
template <bool IsMax, typename C> __device__ C blockReduce(C value) {
  __shared__ C partial[32];
  for (int offset = 16; offset > 0; offset /= 2) {
    C other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = IsMax ? (other > value ? other : value) : value + other;
  }
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  value = lane < warps ? partial[lane] : (IsMax ? C(-INFINITY) : C(0));
  for (int offset = 16; offset > 0; offset /= 2) {
    C other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = IsMax ? (other > value ? other : value) : value + other;
  }
  return value;
}

/// The running maximum of a row's elements and the sum of exp(x - max)
/// over them, in one pass (the online softmax's): an element above the
/// maximum rescales the sum to it. A NaN element makes both NaN; an
/// infinite maximum is the row's log_sum_exp whatever the sum.
template <typename C> struct MaxSum {
  C max = C(-INFINITY), sum = 0;
};

template <typename C> __device__ inline MaxSum<C> addElement(MaxSum<C> a, C x) {
  if (isnan(x) || x > a.max) {
    a.sum = a.sum * exp(a.max - x) + C(1);
    a.max = x;
  } else if (x != C(-INFINITY)) {
    a.sum += exp(x - a.max);
  }
  return a;
}

/// Two running sums as one: the same in either order, so that every lane
/// of a butterfly gets the same bits.
template <typename C> __device__ inline MaxSum<C> merge(MaxSum<C> a, MaxSum<C> b) {
  if (isnan(b.max) || b.max > a.max) {
    MaxSum<C> t = a;
    a = b;
    b = t;
  }
  if (b.max != C(-INFINITY))
    a.sum += b.sum * exp(b.max - a.max);
  return a;
}

/// `value` merged over the block; every thread gets the result.
template <typename C> __device__ MaxSum<C> blockMaxSum(MaxSum<C> value) {
  __shared__ C maxes[32], sums[32];
  auto butterfly = [](MaxSum<C> v) {
    for (int offset = 16; offset > 0; offset /= 2) {
      MaxSum<C> other;
      other.max = __shfl_xor_sync(0xffffffffu, v.max, offset);
      other.sum = __shfl_xor_sync(0xffffffffu, v.sum, offset);
      v = merge(v, other);
    }
    return v;
  };
  value = butterfly(value);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();
  if (lane == 0) {
    maxes[warp] = value.max;
    sums[warp] = value.sum;
  }
  __syncthreads();
  value = MaxSum<C>();
  if (lane < warps) {
    value.max = maxes[lane];
    value.sum = sums[lane];
  }
  return butterfly(value);
}

__device__ inline double blockSum(double value) {
  __shared__ double partial[32];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  value = lane < warps ? partial[lane] : 0.0;
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

#define PPCRT_GRID_STRIDE(i, n)                                                                    \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);                        \
       i += int64_t(gridDim.x) * blockDim.x)

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

template <typename T> __global__ void fillKernel(T *out, int64_t n, T value) {
  PPCRT_GRID_STRIDE(i, n) out[i] = value;
}

template <typename T> void fill(T *out, int64_t n, T value) {
  PPCRT_LAUNCH(fillKernel, blocksFor(n), kThreads, 0, stream())(out, n, value);
  launched("fill");
}

/// out (dense, d.size) at i reads in[offset + stridedIndex(d, i)].
template <typename T>
__global__ void stridedCopyKernel(const T *in, T *out, int64_t n, Dims d, int64_t offset) {
  PPCRT_GRID_STRIDE(i, n) out[i] = in[offset + stridedIndex(d, i)];
}

template <typename T> void stridedCopy(const T *in, T *out, const Dims &d, int64_t offset) {
  int64_t n = 1;
  for (int k = 0; k < d.rank; ++k)
    n *= d.size[k];
  PPCRT_LAUNCH(stridedCopyKernel, blocksFor(n), kThreads, 0, stream())(in, out, n, d, offset);
  launched("a strided copy");
}

/// The inverse: in (dense, d.size) at i is written to out[offset + ...].
template <typename T>
__global__ void stridedStoreKernel(const T *in, T *out, int64_t n, Dims d, int64_t offset) {
  PPCRT_GRID_STRIDE(i, n) out[offset + stridedIndex(d, i)] = in[i];
}

template <typename T> void stridedStore(const T *in, T *out, const Dims &d, int64_t offset) {
  int64_t n = 1;
  for (int k = 0; k < d.rank; ++k)
    n *= d.size[k];
  PPCRT_LAUNCH(stridedStoreKernel, blocksFor(n), kThreads, 0, stream())(in, out, n, d, offset);
  launched("a strided store");
}

/// Transposes the last two dimensions of [batch, rows, cols] through
/// shared-memory tiles (both sides coalesced).
template <typename T>
__global__ void transposeKernel(const T *in, T *out, int64_t batch, int64_t rows, int64_t cols) {
  __shared__ T tile[32][33];
  int64_t tileCol = blockIdx.x * 32;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z)
    for (int64_t tileRow = blockIdx.y * 32; tileRow < rows; tileRow += int64_t(gridDim.y) * 32) {
      const T *from = in + b * rows * cols;
      T *to = out + b * rows * cols;
      for (int r = threadIdx.y; r < 32; r += blockDim.y) {
        int64_t row = tileRow + r, col = tileCol + threadIdx.x;
        if (row < rows && col < cols)
          tile[r][threadIdx.x] = from[row * cols + col];
      }
      __syncthreads();
      for (int r = threadIdx.y; r < 32; r += blockDim.y) {
        int64_t col = tileCol + r, row = tileRow + threadIdx.x;
        if (row < rows && col < cols)
          to[col * rows + row] = tile[threadIdx.x][r];
      }
      __syncthreads();
    }
}

template <typename T>
void transpose2d(const T *in, T *out, int64_t batch, int64_t rows, int64_t cols) {
  // Columns on x (up to 2^31 - 1 tiles); rows and the batch loop past
  // y's and z's 65535.
  int64_t rowTiles = (rows + 31) / 32;
  dim3 grid(unsigned((cols + 31) / 32), unsigned(rowTiles < 65535 ? rowTiles : 65535),
            unsigned(batch < 1       ? 1
                     : batch < 65535 ? batch
                                     : 65535));
  PPCRT_LAUNCH(transposeKernel, grid, dim3(32, 8), 0, stream())(in, out, batch, rows, cols);
  launched("a transpose");
}

/// Concatenation: input k's pieces of `chunk` bytes, `pitch` bytes apart
/// (`chunk` where it is dense), go at byte `at` of each `row`-byte row of
/// the result.
inline void concatPart(void *out, const void *in, int64_t outer, int64_t row, int64_t at,
                       int64_t chunk, int64_t pitch) {
  check(cudaMemcpy2DAsync(static_cast<char *>(out) + at, row, in, pitch, chunk, outer,
                          cudaMemcpyDeviceToDevice, stream()),
        "a concatenation");
}

inline void copy(void *out, const void *in, size_t bytes) {
  check(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream()), "a copy");
}

/// Row indices[i] of data [outer, n, inner] to row i of out [outer, rows, inner].
template <typename T>
__global__ void gatherKernel(const T *data, const int64_t *indices, T *out, int64_t outer,
                             int64_t n, int64_t inner, int64_t rows, int error) {
  PPCRT_GRID_STRIDE(i, outer * rows * inner) {
    int64_t j = i % inner, r = i / inner % rows, o = i / (inner * rows);
    int64_t row = indices[r];
    if (row < -n || row >= n) {
      flagError(error);
      out[i] = T(0);
      continue;
    }
    row += row < 0 ? n : 0;
    out[i] = data[(o * n + row) * inner + j];
  }
}

template <typename T>
void gather(const T *data, const int64_t *indices, T *out, int64_t outer, int64_t n, int64_t inner,
            int64_t rows, int error) {
  PPCRT_LAUNCH(gatherKernel, blocksFor(outer * rows * inner), kThreads, 0,
               stream())(data, indices, out, outer, n, inner, rows, error);
  launched("a gather");
}

/// out [outer, n, inner] = 0, then row i of updates added to row indices[i].
template <typename T>
__global__ void scatterAddKernel(const T *updates, const int64_t *indices, T *out, int64_t outer,
                                 int64_t n, int64_t inner, int64_t rows, int error) {
  PPCRT_GRID_STRIDE(i, outer * rows * inner) {
    int64_t j = i % inner, r = i / inner % rows, o = i / (inner * rows);
    int64_t row = indices[r];
    if (row < -n || row >= n) {
      flagError(error);
      continue;
    }
    row += row < 0 ? n : 0;
    atomicAdd(out + (o * n + row) * inner + j, updates[i]);
  }
}

template <typename T>
void scatterAdd(const T *updates, const int64_t *indices, T *out, int64_t outer, int64_t n,
                int64_t inner, int64_t rows, int error) {
  check(cudaMemsetAsync(out, 0, outer * n * inner * sizeof(T), stream()), "a scatter_add");
  PPCRT_LAUNCH(scatterAddKernel, blocksFor(outer * rows * inner), kThreads, 0,
               stream())(updates, indices, out, outer, n, inner, rows, error);
  launched("a scatter_add");
}

/// One thread per line (Lines.h), compared in the register type.
template <typename T>
__global__ void argMaxKernel(const T *in, int64_t *out, int64_t outer, int64_t n, int64_t inner,
                             bool largest, bool last) {
  PPCRT_GRID_STRIDE(line, outer * inner) {
    int64_t o = line / inner, j = line % inner;
    out[line] = lines::argMax<Reg<T>>(in + o * n * inner + j, n, inner, largest, last);
  }
}

template <typename T>
void argMax(const T *in, int64_t *out, int64_t outer, int64_t n, int64_t inner, bool largest,
            bool last) {
  PPCRT_LAUNCH(argMaxKernel, blocksFor(outer * inner), kThreads, 0, stream())(in, out, outer, n,
                                                                              inner, largest, last);
  launched("an arg_max");
}

/// One thread per line (Lines.h), compared in the register type (bf16 as
/// float).
template <typename T>
__global__ void topKIndicesKernel(const T *in, int64_t *out, int64_t outer, int64_t n,
                                  int64_t inner, int64_t k, bool largest) {
  PPCRT_GRID_STRIDE(line, outer * inner) {
    int64_t o = line / inner, j = line % inner;
    lines::topKIndices<Reg<T>>(in + o * n * inner + j, out + o * k * inner + j, n, inner, k,
                               largest);
  }
}

template <typename T>
void topKIndices(const T *in, int64_t *out, int64_t outer, int64_t n, int64_t inner, int64_t k,
                 bool largest) {
  PPCRT_LAUNCH(topKIndicesKernel, blocksFor(outer * inner), kThreads, 0,
               stream())(in, out, outer, n, inner, k, largest);
  launched("a top_k_indices");
}

/// One thread per line (Lines.h).
template <typename T>
__global__ void cumsumKernel(const T *in, T *out, int64_t outer, int64_t n, int64_t inner,
                             bool exclusive, bool reverse) {
  PPCRT_GRID_STRIDE(line, outer * inner) {
    int64_t o = line / inner, j = line % inner;
    lines::cumsum(in + o * n * inner + j, out + o * n * inner + j, n, inner, exclusive, reverse);
  }
}

template <typename T>
void cumsum(const T *in, T *out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
            bool reverse) {
  PPCRT_LAUNCH(cumsumKernel, blocksFor(outer * inner), kThreads, 0,
               stream())(in, out, outer, n, inner, exclusive, reverse);
  launched("a cumsum");
}

template <typename T>
__global__ void triluKernel(const T *in, T *out, int64_t total, int64_t rows, int64_t cols,
                            bool upper, int64_t k) {
  PPCRT_GRID_STRIDE(i, total) {
    int64_t row = i / cols % rows, col = i % cols;
    out[i] = (upper ? col - row >= k : col - row <= k) ? in[i] : T(0);
  }
}

template <typename T>
void trilu(const T *in, T *out, int64_t total, int64_t rows, int64_t cols, bool upper, int64_t k) {
  PPCRT_LAUNCH(triluKernel, blocksFor(total), kThreads, 0, stream())(in, out, total, rows, cols,
                                                                     upper, k);
  launched("a trilu");
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

/// What a reduction of T accumulates in, as on CPUs (CpuKernels.h): double
/// for floats; uint64_t for integers (sums and products wrap), int64_t for
/// the max and min of signed ones.
template <typename T>
using Accumulator = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
template <ReduceKind Kind, typename T>
using ReduceAccumulator =
    std::conditional_t<std::is_integral_v<T> && std::is_signed_v<T> &&
                           (Kind == ReduceKind::Max || Kind == ReduceKind::Min),
                       int64_t, Accumulator<T>>;

template <ReduceKind Kind, typename A> __device__ inline A reduceIdentity() {
  if constexpr (Kind == ReduceKind::Sum || Kind == ReduceKind::Mean)
    return A(0);
  else if constexpr (Kind == ReduceKind::Prod)
    return A(1);
  else if constexpr (!std::is_integral_v<A>)
    return Kind == ReduceKind::Max ? A(-INFINITY) : A(INFINITY);
  else if constexpr (Kind == ReduceKind::Max)
    return std::is_signed_v<A> ? A(INT64_MIN) : A(0);
  else
    return std::is_signed_v<A> ? A(INT64_MAX) : ~A(0);
}

/// The mean of `count` accumulated values (integers: signed division).
template <typename A> __device__ inline A meanOf(A sum, int64_t count) {
  if constexpr (std::is_integral_v<A>)
    return A(int64_t(sum) / count);
  else
    return sum / A(count);
}

template <ReduceKind Kind, typename A> __device__ inline A reduceCombine(A x, A y) {
  if constexpr (Kind == ReduceKind::Sum || Kind == ReduceKind::Mean)
    return x + y;
  else if constexpr (Kind == ReduceKind::Prod)
    return x * y;
  else if constexpr (Kind == ReduceKind::Max)
    return (x != x) || x > y ? x : y;
  else
    return (x != x) || x < y ? x : y;
}

/// Partial results of split reductions (reduceWith), 8-byte accumulators:
/// one reduction's worth, as every reduction runs on the compute stream, in
/// order. Static, so not part of the memory plan's arena (8 MiB a process).
constexpr int64_t kReducePartials = int64_t(1) << 20;
__device__ uint64_t reducePartials[kReducePartials];
static_assert(kReducePartials * 8 == normsums::kPartialBytes, "NormSums.h's room");

template <typename A> __device__ inline A *partialsOf() {
  static_assert(sizeof(A) == sizeof(uint64_t), "accumulators are 8 bytes");
  return reinterpret_cast<A *>(reducePartials);
}

/// Joins the block's threads' values `acc` in a fixed tree (so the result
/// does not depend on the schedule) into partial[0], which every thread may
/// read on return. `partial` is the block's shared array of blockDim.x.
template <ReduceKind Kind, typename A> __device__ inline void blockCombine(A *partial, A acc) {
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (int(threadIdx.x) < width)
      partial[threadIdx.x] =
          reduceCombine<Kind, A>(partial[threadIdx.x], partial[threadIdx.x + width]);
    __syncthreads();
  }
}

/// What a reduction writes for its accumulated value.
template <ReduceKind Kind, typename T, typename A>
__device__ inline T reduceResult(A value, int64_t count) {
  if constexpr (Kind == ReduceKind::Mean)
    value = meanOf(value, count);
  return T(Reg<T>(value));
}

/// The reduced dimensions include the innermost, so a block's threads read
/// consecutive elements: block b reduces chunk b % splits of output
/// b / splits (elements [s * chunk, (s + 1) * chunk)) and writes the result,
/// or with several chunks its partial to reducePartials[b].
template <ReduceKind Kind, typename T, typename Source>
__global__ void reduceRowsKernel(Source in, T *out, Dims kept, Dims reduced, int64_t count,
                                 int64_t chunk, int64_t splits) {
  using A = ReduceAccumulator<Kind, T>;
  __shared__ A partial[kThreads];
  int64_t o = blockIdx.x / splits, s = blockIdx.x % splits;
  int64_t base = stridedIndex(kept, o);
  int64_t end = (s + 1) * chunk < count ? (s + 1) * chunk : count;
  A acc = reduceIdentity<Kind, A>();
  for (int64_t r = s * chunk + threadIdx.x; r < end; r += blockDim.x)
    acc = reduceCombine<Kind, A>(acc, A(in(base + stridedIndex(reduced, r))));
  blockCombine<Kind>(partial, acc);
  if (threadIdx.x == 0) {
    if (splits == 1)
      out[o] = reduceResult<Kind, T>(partial[0], count);
    else
      partialsOf<A>()[blockIdx.x] = partial[0];
  }
}

/// The innermost dimension is kept: thread i reduces chunk i / outputs of
/// output i % outputs, so neighbouring threads read neighbouring elements at
/// every step; with several chunks it writes its partial to
/// reducePartials[i].
template <ReduceKind Kind, typename T, typename Source>
__global__ void reduceColumnsKernel(Source in, T *out, Dims kept, Dims reduced, int64_t outputs,
                                    int64_t count, int64_t chunk, int64_t splits) {
  using A = ReduceAccumulator<Kind, T>;
  PPCRT_GRID_STRIDE(i, outputs * splits) {
    int64_t o = i % outputs, s = i / outputs;
    int64_t base = stridedIndex(kept, o);
    int64_t end = (s + 1) * chunk < count ? (s + 1) * chunk : count;
    A acc = reduceIdentity<Kind, A>();
    for (int64_t r = s * chunk; r < end; ++r)
      acc = reduceCombine<Kind, A>(acc, A(in(base + stridedIndex(reduced, r))));
    if (splits == 1)
      out[o] = reduceResult<Kind, T>(acc, count);
    else
      partialsOf<A>()[i] = acc;
  }
}

/// Combines each output's `splits` partials, one block per output: thread t
/// takes chunks t, t + blockDim.x, ... and a fixed tree joins the threads,
/// so the result does not depend on the schedule. Output o's chunk s is at
/// reducePartials[o * outputStride + s * splitStride].
template <ReduceKind Kind, typename T>
__global__ void reduceSplitsKernel(T *out, int64_t outputs, int64_t splits, int64_t outputStride,
                                   int64_t splitStride, int64_t count) {
  using A = ReduceAccumulator<Kind, T>;
  __shared__ A partial[kThreads];
  const A *partials = partialsOf<A>();
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    A acc = reduceIdentity<Kind, A>();
    for (int64_t s = threadIdx.x; s < splits; s += blockDim.x)
      acc = reduceCombine<Kind, A>(acc, partials[o * outputStride + s * splitStride]);
    blockCombine<Kind>(partial, acc);
    if (threadIdx.x == 0)
      out[o] = reduceResult<Kind, T>(partial[0], count);
    __syncthreads();
  }
}

/// The same with one thread per output, chunk 0 first: for many outputs of
/// few chunks each.
template <ReduceKind Kind, typename T>
__global__ void reduceFewSplitsKernel(T *out, int64_t outputs, int64_t splits, int64_t outputStride,
                                      int64_t splitStride, int64_t count) {
  using A = ReduceAccumulator<Kind, T>;
  const A *partials = partialsOf<A>();
  PPCRT_GRID_STRIDE(o, outputs) {
    A acc = reduceIdentity<Kind, A>();
    for (int64_t s = 0; s < splits; ++s)
      acc = reduceCombine<Kind, A>(acc, partials[o * outputStride + s * splitStride]);
    out[o] = reduceResult<Kind, T>(acc, count);
  }
}

/// Launches the kernel that combines reducePartials into `out`.
template <ReduceKind Kind, typename T>
void combineSplits(T *out, int64_t outputs, int64_t splits, int64_t outputStride,
                   int64_t splitStride, int64_t count) {
  if (splits <= 32)
    PPCRT_LAUNCH(reduceFewSplitsKernel<Kind>, blocksFor(outputs), kThreads, 0,
                 stream())(out, outputs, splits, outputStride, splitStride, count);
  else
    PPCRT_LAUNCH(reduceSplitsKernel<Kind>, unsigned(outputs < 65536 * 8 ? outputs : 65536 * 8),
                 kThreads, 0, stream())(out, outputs, splits, outputStride, splitStride, count);
}

/// How many chunks a reduction of `count` elements into each of `outputs`
/// results is cut into: enough for `workers` (blocks or threads) in all,
/// none shorter than `minChunk`, and their partials within reducePartials.
inline int64_t reduceSplits(int64_t outputs, int64_t count, int64_t workers, int64_t minChunk) {
  int64_t splits = (workers + outputs - 1) / outputs;
  int64_t most = (count + minChunk - 1) / minChunk;
  splits = splits < most ? splits : most;
  splits = splits < kReducePartials / outputs ? splits : kReducePartials / outputs;
  return splits < 1 ? 1 : splits;
}

/// Reads element i of a dense tensor (in its register type).
template <typename T> struct Load {
  const T *in;
  __device__ Reg<T> operator()(int64_t i) const { return Reg<T>(in[i]); }
};

/// Reduces the elements `in(i)` gives for the flat (row-major) indices of
/// the collapsed shape `shape` (dimension d reduced when bit d of `mask` is
/// set) into `out` (the kept dimensions, dense). Each index is read exactly
/// once, so a fused group's source may also store its other outputs there.
template <ReduceKind Kind, typename T, typename Source>
void reduceWith(Source in, T *out, int rank, const int64_t (&shape)[kMaxRank], uint32_t mask) {
  Dims kept{0, {}, {}}, reduced{0, {}, {}};
  int64_t stride = 1, outputs = 1, count = 1;
  for (int d = rank - 1; d >= 0; --d) {
    Dims &to = (mask >> d & 1) ? reduced : kept;
    to.size[to.rank] = shape[d];
    to.stride[to.rank] = stride;
    ++to.rank;
    ((mask >> d & 1) ? count : outputs) *= shape[d];
    stride *= shape[d];
  }
  // Collected innermost first; index decoding wants outermost first.
  for (Dims *dims : {&kept, &reduced})
    for (int i = 0, j = dims->rank - 1; i < j; ++i, --j) {
      int64_t s = dims->size[i], t = dims->stride[i];
      dims->size[i] = dims->size[j];
      dims->stride[i] = dims->stride[j];
      dims->size[j] = s;
      dims->stride[j] = t;
    }
  // A few long reductions (a bias's gradient, a norm) are cut into chunks
  // whose partials a second kernel combines, so they fill the GPU: 1024
  // blocks of rows, or 2^18 threads of columns.
  bool innerReduced = rank > 0 && (mask >> (rank - 1) & 1);
  int64_t splits = 1, chunk = count;
  bool split = outputs > 0 && count > 0;
  if (innerReduced && outputs < int64_t(1) << 31) {
    splits = split ? reduceSplits(outputs, count, 1024, 4 * kThreads) : 1;
    chunk = split ? (count + splits - 1) / splits : count;
    splits = split ? (count + chunk - 1) / chunk : 1;
    if (outputs * splits >= int64_t(1) << 31)
      splits = 1, chunk = count;
    PPCRT_LAUNCH(reduceRowsKernel<Kind>, unsigned(outputs * splits), kThreads, 0,
                 stream())(in, out, kept, reduced, count, chunk, splits);
    launched("a reduction");
    if (splits > 1)
      combineSplits<Kind>(out, outputs, splits, splits, int64_t(1), count);
  } else {
    splits = split ? reduceSplits(outputs, count, int64_t(1) << 18, 16) : 1;
    chunk = split ? (count + splits - 1) / splits : count;
    splits = split ? (count + chunk - 1) / chunk : 1;
    PPCRT_LAUNCH(reduceColumnsKernel<Kind>, blocksFor(outputs * splits), kThreads, 0,
                 stream())(in, out, kept, reduced, outputs, count, chunk, splits);
    launched("a reduction");
    if (splits > 1)
      combineSplits<Kind>(out, outputs, splits, int64_t(1), outputs, count);
  }
  launched("a reduction");
}

/// Reduces `in` itself (Load).
template <ReduceKind Kind, typename T>
void reduce(const T *in, T *out, int rank, const int64_t (&shape)[kMaxRank], uint32_t mask) {
  reduceWith<Kind>(Load<T>{in}, out, rank, shape, mask);
}

//===----------------------------------------------------------------------===//
// Softmax, layer norm, loss
//===----------------------------------------------------------------------===//

/// softmax (or log_softmax) of the rows of [outer, size], x's row o at
/// o * xStride (of type X, widened: bf16 logits to f32 log-probabilities),
/// y dense: one block per row.
template <bool IsLog, typename X, typename T>
__global__ void softmaxRowsKernel(const X *x, T *y, int64_t size, int64_t xStride) {
  using C = Compute<T>;
  const X *row = x + blockIdx.x * xStride;
  T *to = y + blockIdx.x * size;
  C max = C(-INFINITY);
  for (int64_t k = threadIdx.x; k < size; k += blockDim.x)
    max = ppcrt::scalar::max(C(row[k]), max);
  max = blockReduce<true>(max);
  C sum = 0;
  for (int64_t k = threadIdx.x; k < size; k += blockDim.x)
    sum += exp(C(row[k]) - max);
  sum = blockReduce<false>(sum);
  C logSum = log(sum);
  for (int64_t k = threadIdx.x; k < size; k += blockDim.x) {
    C shifted = C(row[k]) - max;
    to[k] = T(IsLog ? shifted - logSum : exp(shifted) / sum);
  }
}

/// The same over the middle dimension of [outer, size, inner]: one thread
/// per (outer, inner) column.
template <bool IsLog, typename X, typename T>
__global__ void softmaxColumnsKernel(const X *x, T *y, int64_t outer, int64_t size, int64_t inner) {
  using C = Compute<T>;
  PPCRT_GRID_STRIDE(c, outer * inner) {
    int64_t base = (c / inner) * size * inner + c % inner;
    C max = C(-INFINITY);
    for (int64_t k = 0; k < size; ++k)
      max = ppcrt::scalar::max(C(x[base + k * inner]), max);
    C sum = 0;
    for (int64_t k = 0; k < size; ++k)
      sum += exp(C(x[base + k * inner]) - max);
    C logSum = log(sum);
    for (int64_t k = 0; k < size; ++k) {
      C shifted = C(x[base + k * inner]) - max;
      y[base + k * inner] = T(IsLog ? shifted - logSum : exp(shifted) / sum);
    }
  }
}

/// As ppcrt::cpu::softmax: x's outer index o starts at o * xStride, which
/// only rows (inner 1) may set apart from the dense size * inner.
template <bool IsLog, typename X, typename T>
void softmax(const X *x, T *y, int64_t outer, int64_t size, int64_t inner, int64_t xStride) {
  if (inner == 1)
    PPCRT_LAUNCH(softmaxRowsKernel<IsLog>, unsigned(outer), kThreads, 0, stream())(x, y, size,
                                                                                   xStride);
  else
    PPCRT_LAUNCH(softmaxColumnsKernel<IsLog>, blocksFor(outer * inner), kThreads, 0,
                 stream())(x, y, outer, size, inner);
  launched("a softmax");
}

/// The log_sum_exp of the `size` elements at `row` (of type X, widened),
/// rounded to T, computed by the block together in one pass over the row
/// (MaxSum): every thread gets it. A generated kernel that reads the row's
/// elements after it computes it first (FusionPlan::rowLogSumExpOf), as
/// logSumExpRowsKernel does: the row is read twice there, once here.
template <typename T, typename X> __device__ T rowLogSumExp(const X *row, int64_t size) {
  using C = Compute<T>;
  MaxSum<C> run;
  for (int64_t k = threadIdx.x; k < size; k += blockDim.x)
    run = addElement(run, C(row[k]));
  run = blockMaxSum(run);
  return T(isinf(run.max) ? run.max : run.max + log(run.sum));
}

/// log_sum_exp of the rows of [outer, size] into y [outer], x's row o at
/// o * xStride (of type X, widened): one block per row.
template <typename X, typename T>
__global__ void logSumExpRowsKernel(const X *x, T *y, int64_t size, int64_t xStride) {
  const T value = rowLogSumExp<T>(x + blockIdx.x * xStride, size);
  if (threadIdx.x == 0)
    y[blockIdx.x] = value;
}

/// The same over the middle dimension of [outer, size, inner] into y
/// [outer, inner]: one thread per (outer, inner) column.
template <typename X, typename T>
__global__ void logSumExpColumnsKernel(const X *x, T *y, int64_t outer, int64_t size,
                                       int64_t inner) {
  using C = Compute<T>;
  PPCRT_GRID_STRIDE(c, outer * inner) {
    int64_t base = (c / inner) * size * inner + c % inner;
    C max = C(-INFINITY);
    for (int64_t k = 0; k < size; ++k)
      max = ppcrt::scalar::max(C(x[base + k * inner]), max);
    C sum = 0;
    for (int64_t k = 0; k < size; ++k)
      sum += exp(C(x[base + k * inner]) - max);
    y[c] = T(isinf(max) ? max : max + log(sum));
  }
}

/// As ppcrt::cpu::logSumExp: x's outer index o starts at o * xStride, which
/// only rows (inner 1) may set apart from the dense size * inner.
template <typename X, typename T>
void logSumExp(const X *x, T *y, int64_t outer, int64_t size, int64_t inner, int64_t xStride) {
  if (inner == 1)
    PPCRT_LAUNCH(logSumExpRowsKernel, unsigned(outer), kThreads, 0, stream())(x, y, size, xStride);
  else
    PPCRT_LAUNCH(logSumExpColumnsKernel, blocksFor(outer * inner), kThreads, 0,
                 stream())(x, y, outer, size, inner);
  launched("a log_sum_exp");
}

/// ppc.rotary: one thread per pair (i, i + size / 2) of a row, in C.
template <typename T>
__global__ void rotaryKernel(const T *x, const T *cos, const T *sin, T *y,
                             lines::RotaryShape shape) {
  using C = Compute<T>;
  int64_t half = shape.size / 2;
  PPCRT_GRID_STRIDE(p, shape.batch * shape.rows * half) {
    int64_t i = p % half, row = p / half, n = row / shape.rows, r = row % shape.rows;
    const T *in = x + shape.x.at(n, r), *c = cos + shape.cos.at(n, r),
            *s = sin + shape.sin.at(n, r);
    C a = C(in[i]), b = C(in[i + half]), ca = C(c[i]), cb = C(c[i + half]), sa = C(s[i]),
      sb = C(s[i + half]);
    T *out = y + shape.y.at(n, r);
    out[i] = T(shape.transposed ? a * ca + b * sb : a * ca - b * sa);
    out[i + half] = T(shape.transposed ? b * cb - a * sa : b * cb + a * sb);
  }
}

/// As ppcrt::cpu::rotary.
template <typename T>
void rotary(const T *x, const T *cos, const T *sin, T *y, lines::RotaryShape shape) {
  PPCRT_LAUNCH(rotaryKernel, blocksFor(shape.batch * shape.rows * (shape.size / 2)), kThreads, 0,
               stream())(x, cos, sin, y, shape);
  launched("a rotary embedding");
}

/// A row's mean and rstd = 1 / sqrt(var + epsilon) (biased variance), in C,
/// over the block (every thread calls it and gets both): the layer norms'.
/// Uncentered (RMSNorm's), the mean is 0 and var the mean square.
template <bool Centered, typename T, typename C>
__device__ void rowStatistics(const T *row, int64_t size, double epsilon, C &mean, C &rstd) {
  mean = 0;
  if constexpr (Centered) {
    C sum = 0;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
      sum += C(row[i]);
    mean = blockReduce<false>(sum) / C(size);
  }
  C squares = 0;
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
    C d = C(row[i]) - mean;
    squares += d * d;
  }
  rstd = C(1) / sqrt(blockReduce<false>(squares) / C(size) + C(epsilon));
}

/// Layer normalization (RMS normalization unless Centered) of the rows of
/// [outer, size], one block per row.
template <bool Centered, typename T>
__global__ void layerNormKernel(const T *x, const T *scale, int64_t scaleStride, const T *bias,
                                int64_t biasStride, T *y, int64_t size, double epsilon) {
  using C = Compute<T>;
  const T *row = x + blockIdx.x * size;
  C mean, rstd;
  rowStatistics<Centered>(row, size, epsilon, mean, rstd);
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
    C v = (C(row[i]) - mean) * rstd * C(scale[i * scaleStride]);
    if (bias)
      v += C(bias[i * biasStride]);
    y[blockIdx.x * size + i] = T(v);
  }
}

/// As ppcrt::cpu::layerNorm.
template <typename T, bool Centered = true>
void layerNorm(const T *x, const T *scale, int64_t scaleStride, const T *bias, int64_t biasStride,
               T *y, int64_t outer, int64_t size, double epsilon) {
  PPCRT_LAUNCH(layerNormKernel<Centered>, unsigned(outer), kThreads, 0,
               stream())(x, scale, scaleStride, bias, biasStride, y, size, epsilon);
  launched(Centered ? "a layer norm" : "an RMS norm");
}

/// A row's statistics and the means its input gradient subtracts, of the
/// block's threads together (thread t reading columns t, t + blockDim.x, ...).
template <typename C> struct NormGradRow {
  C m, r, meanDxhat, meanProjection;
  /// The input gradient at a column of `x` with dxhat = dy * scale, rounded
  /// to T, plus `addend[at]` (unless null) as the fused add rounds it.
  template <typename T> __device__ T written(T x, C dxhat, const T *addend, int64_t at) const {
    T value = T(r * (dxhat - meanDxhat - (C(x) - m) * r * meanProjection));
    return addend ? T(Reg<T>(Reg<T>(value) + Reg<T>(addend[at]))) : value;
  }
};

template <bool Centered, typename T, typename C = Compute<T>>
__device__ NormGradRow<C> normGradRow(const T *row, const T *g, const T *scale, int64_t scaleStride,
                                      int64_t size, double epsilon) {
  NormGradRow<C> n;
  rowStatistics<Centered>(row, size, epsilon, n.m, n.r);
  C sumDxhat = 0, sumProjection = 0;
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
    C dxhat = C(g[i]) * C(scale[i * scaleStride]);
    sumDxhat += dxhat;
    sumProjection += dxhat * (C(row[i]) - n.m) * n.r;
  }
  n.meanDxhat = 0;
  if constexpr (Centered)
    n.meanDxhat = blockReduce<false>(sumDxhat) / C(size);
  n.meanProjection = blockReduce<false>(sumProjection) / C(size);
  return n;
}

/// The input's gradient of layerNorm over the rows of [outer, size] given
/// the result's (dy), and each row's mean (unless null) and rstd, plus
/// addend (unless null) as the fused elementwise add computes it: one block
/// per row.
template <bool Centered, typename T, typename S>
__global__ void __launch_bounds__(1024)
    layerNormGradKernel(const T *x, const T *scale, int64_t scaleStride, const T *dy, T *dx,
                        const T *addend, S *mean, S *rstd, int64_t size, double epsilon) {
  using C = Compute<T>;
  const T *row = x + blockIdx.x * size, *g = dy + blockIdx.x * size;
  const NormGradRow<C> n = normGradRow<Centered>(row, g, scale, scaleStride, size, epsilon);
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
    int64_t at = blockIdx.x * size + i;
    dx[at] = n.written(row[i], C(g[i]) * C(scale[i * scaleStride]), addend, at);
  }
  if (threadIdx.x == 0) {
    if (mean)
      mean[blockIdx.x] = S(n.m);
    rstd[blockIdx.x] = S(n.r);
  }
}

/// As ppcrt::cpu::layerNormGrad.
template <typename T, typename S, bool Centered = true>
void layerNormGrad(const T *x, const T *scale, int64_t scaleStride, const T *dy, T *dx,
                   const T *addend, S *mean, S *rstd, int64_t outer, int64_t size, double epsilon) {
  // (As many threads as with sums, so that both compute dx alike.)
  if (outer > 0) // (no rows: no blocks)
    PPCRT_LAUNCH(layerNormGradKernel<Centered>, unsigned(outer), unsigned(normsums::threads(size)),
                 0, stream())(x, scale, scaleStride, dy, dx, addend, mean, rstd, size, epsilon);
  launched(Centered ? "a layer norm's gradient" : "an RMS norm's gradient");
}

/// layerNormGradKernel over rows [b r, (b + 1) r) for block b, which also
/// adds, per column, dy, dy xhat and the values it writes (NormSums.h) into
/// registers (thread t of Threads: columns t + k Threads, k < kPerThread)
/// and writes them to reducePartials as [3][gridDim.x][size] of C.
template <bool Centered, int Threads, typename T, typename S, typename R, typename P, typename I>
__global__ void __launch_bounds__(Threads)
    layerNormGradSumsKernel(const T *x, const T *scale, int64_t scaleStride, const T *dy, T *dx,
                            const T *addend, S *mean, S *rstd, int64_t outer, int64_t size,
                            double epsilon, NormGradSums<R, P, I> sums, int64_t rowsPerBlock) {
  using C = Compute<T>;
  constexpr int K = int(normsums::kPerThread);
  C acc[3][K];
  PPCRT_UNROLL
  for (int k = 0; k < K; ++k)
    acc[0][k] = acc[1][k] = acc[2][k] = C(0);
  const int64_t first = blockIdx.x * rowsPerBlock;
  const int64_t last = first + rowsPerBlock < outer ? first + rowsPerBlock : outer;
  for (int64_t o = first; o < last; ++o) {
    const T *row = x + o * size, *g = dy + o * size;
    const NormGradRow<C> n = normGradRow<Centered>(row, g, scale, scaleStride, size, epsilon);
    PPCRT_UNROLL
    for (int k = 0; k < K; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      if (i < size) {
        C gi = C(g[i]), xhat = (C(row[i]) - n.m) * n.r;
        int64_t at = o * size + i;
        T written = n.written(row[i], gi * C(scale[i * scaleStride]), addend, at);
        dx[at] = written;
        acc[0][k] += gi;
        acc[1][k] += gi * xhat;
        acc[2][k] += C(Reg<T>(written));
      }
    }
    if (threadIdx.x == 0) {
      if (mean)
        mean[o] = S(n.m);
      rstd[o] = S(n.r);
    }
  }
  C *partials = reinterpret_cast<C *>(reducePartials);
  const bool wanted[3] = {sums.resultGrad != nullptr, sums.scaleGrad != nullptr,
                          sums.inputGrad != nullptr};
  PPCRT_UNROLL
  for (int kind = 0; kind < 3; ++kind) {
    if (!wanted[kind])
      continue;
    PPCRT_UNROLL
    for (int k = 0; k < K; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      if (i < size)
        partials[(kind * int64_t(gridDim.x) + blockIdx.x) * size + i] = acc[kind][k];
    }
  }
}

/// Adds each column's `blocks` partial sums of layerNormGradSumsKernel in
/// block order, in double, and writes the wanted sums.
template <typename C, typename R, typename P, typename I>
__global__ void normGradSumsCombineKernel(NormGradSums<R, P, I> sums, int64_t blocks,
                                          int64_t size) {
  const C *partials = reinterpret_cast<const C *>(reducePartials);
  PPCRT_GRID_STRIDE(e, 3 * size) {
    const int kind = int(e / size);
    const int64_t i = e % size;
    if ((kind == 0 && !sums.resultGrad) || (kind == 1 && !sums.scaleGrad) ||
        (kind == 2 && !sums.inputGrad))
      continue;
    double total = 0;
    for (int64_t b = 0; b < blocks; ++b)
      total += double(partials[(kind * blocks + b) * size + i]);
    if (kind == 0)
      sums.resultGrad[i] = reduceResult<ReduceKind::Sum, R>(total, blocks);
    else if (kind == 1)
      sums.scaleGrad[i] = reduceResult<ReduceKind::Sum, P>(total, blocks);
    else
      sums.inputGrad[i] = reduceResult<ReduceKind::Sum, I>(total, blocks);
  }
}

/// As ppcrt::cpu::layerNormGrad with sums over the rows (NormSums.h): rows
/// of at most normsums::kMaxSize elements.
template <typename T, typename S, bool Centered = true, typename R, typename P, typename I>
void layerNormGrad(const T *x, const T *scale, int64_t scaleStride, const T *dy, T *dx,
                   const T *addend, S *mean, S *rstd, int64_t outer, int64_t size, double epsilon,
                   NormGradSums<R, P, I> sums) {
  using C = Compute<T>;
  if (size > normsums::kMaxSize)
    check(cudaErrorInvalidValue, "a norm gradient's sums (rows of more than 4,096 elements)");
  const int64_t rows = normsums::rowsPerBlock(outer, size, sizeof(C));
  const int64_t blocks = normsums::blocks(outer, size, sizeof(C));
  // (No rows: no blocks, and sums of zeros.) The threads normsums::threads
  // says, each instantiation bounded to its own count.
  const int64_t threads = normsums::threads(size);
  if (blocks > 0 && threads == 256)
    PPCRT_LAUNCH((layerNormGradSumsKernel<Centered, 256>), unsigned(blocks), 256, 0, stream())(
        x, scale, scaleStride, dy, dx, addend, mean, rstd, outer, size, epsilon, sums, rows);
  else if (blocks > 0 && threads == 512)
    PPCRT_LAUNCH((layerNormGradSumsKernel<Centered, 512>), unsigned(blocks), 512, 0, stream())(
        x, scale, scaleStride, dy, dx, addend, mean, rstd, outer, size, epsilon, sums, rows);
  else if (blocks > 0)
    PPCRT_LAUNCH((layerNormGradSumsKernel<Centered, 1024>), unsigned(blocks), 1024, 0, stream())(
        x, scale, scaleStride, dy, dx, addend, mean, rstd, outer, size, epsilon, sums, rows);
  launched(Centered ? "a layer norm's gradient" : "an RMS norm's gradient");
  PPCRT_LAUNCH(normGradSumsCombineKernel<C>, blocksFor(3 * size), kThreads, 0,
               stream())(sums, blocks, size);
  launched("a norm gradient's sums");
}

enum class LossReduction { None, Sum, Mean };

/// nll_loss of input [batch, classes, inner] at targets [batch, inner], in
/// one block (the loss is one value per token: batch × sequence elements);
/// the input and shift as ppcrt::cpu::nllLoss reads them.
template <typename X, typename T>
__global__ void nllLossKernel(const X *input, int64_t inputStride, const T *shift,
                              const int64_t *target, const T *weight, T *out, int64_t batch,
                              int64_t classes, int64_t inner, LossReduction reduction,
                              bool hasIgnore, int64_t ignoreIndex, int error) {
  double lossSum = 0, weightSum = 0;
  for (int64_t i = threadIdx.x; i < batch * inner; i += blockDim.x) {
    int64_t n = i / inner, j = i % inner, t = target[i];
    if (hasIgnore && t == ignoreIndex) {
      if (reduction == LossReduction::None)
        out[i] = T(0);
      continue;
    }
    if (t < 0 || t >= classes) {
      flagError(error);
      continue;
    }
    double w = weight ? double(Reg<T>(weight[t])) : 1.0;
    double picked = double(Reg<X>(input[n * inputStride + t * inner + j]));
    if (shift)
      picked = double(Reg<T>(T(Reg<T>(picked - double(Reg<T>(shift[i]))))));
    double loss = -picked * w;
    if (reduction == LossReduction::None)
      out[i] = T(Reg<T>(loss));
    lossSum += loss;
    weightSum += w;
  }
  lossSum = blockSum(lossSum);
  weightSum = blockSum(weightSum);
  if (threadIdx.x == 0 && reduction != LossReduction::None)
    out[0] = T(Reg<T>(reduction == LossReduction::Sum ? lossSum : lossSum / weightSum));
}

template <typename X, typename T>
void nllLoss(const X *input, int64_t inputStride, const T *shift, const int64_t *target,
             const T *weight, T *out, int64_t batch, int64_t classes, int64_t inner,
             LossReduction reduction, bool hasIgnore, int64_t ignoreIndex, int error) {
  PPCRT_LAUNCH(nllLossKernel, 1, 1024, 0, stream())(input, inputStride, shift, target, weight, out,
                                                    batch, classes, inner, reduction, hasIgnore,
                                                    ignoreIndex, error);
  launched("a loss");
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// The scalar FlashAttention-style kernels: a group of threads per query
// (key) row keeps the row's vectors in registers, each thread a slice of
// them, and sums its dot products with warp shuffles; tiles of the keys
// (queries) go through static shared memory, which the rows of a warp read
// together (broadcasts); the softmax is online, so no buffer holds
// queries × keys scores. bf16 runs on tensor cores instead (below, where
// the head and value sizes are at most 128).

/// The largest head and value size the attention kernels take.
constexpr int kAttentionMaxDim = 256;

/// How an attention kernel that keeps `Arrays` vectors of MaxDim elements
/// per row (MaxDim = 64, 128 or 256, the smallest that holds the head and
/// value sizes) lays out its block: each of a row's `group` threads holds
/// `per` elements of each vector (element g + group * t in thread g's slot
/// t), about 128 registers in all; a block has `rows` rows, at most 256
/// threads (so each may have 255 registers); a tile of `tile` rows of two
/// [tile][MaxDim] arrays of T fills up to 32 KiB of shared memory.
template <typename T, int MaxDim, int Arrays> struct AttentionBlock {
  static constexpr int budget = (Arrays == 2 ? 64 : 32) * 4 / int(sizeof(Compute<T>));
  static constexpr int per = budget < MaxDim ? budget : MaxDim;
  static constexpr int group = MaxDim / per;
  static constexpr int rows = 256 / group < 64 ? 256 / group : 64;
  static constexpr int threads = rows * group;
  static constexpr int tileBytes = 2 * MaxDim * int(sizeof(T));
  static constexpr int tile = 32768 / tileBytes < 32 ? 32768 / tileBytes : 32;
};

/// The sum of `value` over the `Group` neighbouring lanes of a row (every
/// lane of a warp takes part; each gets the same sum).
template <int Group, typename C> __device__ inline C attentionRowSum(C value) {
  for (int offset = Group / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// bf16 attention's forward rounds its probabilities to bf16 before their
/// product with v, as FlashAttention's does, but shifts them by the row's
/// running max rounded up to a multiple of ln 2 (K ln 2, K an integer), so
/// that a rising max rescales the sums by a power of two, which commutes with
/// the rounding: o = sum_j round(p_j) v_j / sum_j p_j, p_j = exp(s_j - K ln
/// 2), whatever the tiles (docs/architecture.md, "Mixed precision"; the
/// executor computes the same in double). A max of magnitude 2^20 or more
/// (a mask's lowest value, where every key of a row is masked so) is the
/// shift itself: float cannot hold a multiple of ln 2 near it, and such a row
/// (its scores equal) has p_j = 1 whatever the shift.
constexpr double kLn2 = 0.693147180559945309, kLog2e = 1.442695040888963407;
constexpr float kRoundedShiftLimit = 1048576.0f; // 2^20

/// The shift of a row's probabilities for its running max (above).
struct RoundedShift {
  float steps = -INFINITY; // K, where rounded
  float value = -INFINITY; // the shift: K ln 2, or the max
  bool rounded = false;

  __device__ static RoundedShift of(float max) {
    RoundedShift shift;
    shift.rounded = fabsf(max) < kRoundedShiftLimit; // -inf: not rounded
    shift.steps = shift.rounded ? ceilf(max * float(kLog2e)) : -INFINITY;
    shift.value = shift.rounded ? shift.steps * float(kLn2) : max;
    return shift;
  }
  /// exp(s - shift) for a score s > -inf.
  __device__ float exp(float s) const {
    return rounded ? exp2f(fmaf(s, float(kLog2e), -steps)) : expf(s - value);
  }
  /// exp(shift - to): what sums relative to this shift are times to become
  /// relative to `to` (a power of two between rounded shifts).
  __device__ float rescale(const RoundedShift &to) const {
    if (value == -INFINITY)
      return to.value == -INFINITY ? 1.0f : 0.0f;
    return rounded && to.rounded ? exp2f(steps - to.steps) : expf(value - to.value);
  }
};

/// Copies rows [from, from + rows) of the [*, size] matrix `in` (rows
/// `pitch` apart) into the [*, MaxDim] tile, the block's threads together.
template <int MaxDim, typename T>
__device__ inline void attentionStage(const T *in, int64_t pitch, int64_t from, int rows, int size,
                                      T *tile) {
  for (int e = threadIdx.x; e < rows * size; e += blockDim.x)
    tile[(e / size) * MaxDim + e % size] = in[(from + e / size) * pitch + e % size];
}

/// The forward: block b takes the rows of query tile b % queryTiles of head
/// b / queryTiles through tiles of keys, one key at a time (the running max
/// rescales the row's sums when it grows).
template <int MaxDim, typename T, typename L>
__global__ void __launch_bounds__(256)
    attentionKernel(const T *q, const T *k, const T *v, const T *bias, T *o, L *lse,
                    lines::AttentionShape shape, int64_t queryTiles) {
  using C = Compute<T>;
  using B = AttentionBlock<T, MaxDim, 2>;
  constexpr int Per = B::per, Group = B::group, Tile = B::tile;
  __shared__ T kTile[Tile * MaxDim];
  __shared__ T vTile[Tile * MaxDim];
  const int depth = int(shape.headDim), width = int(shape.valueDim), g = threadIdx.x % Group;
  const C scale = C(shape.scale), none = C(-INFINITY);
  for (int64_t block = blockIdx.x; block < shape.batch * queryTiles; block += gridDim.x) {
    const int64_t n = block / queryTiles, i0 = block % queryTiles * B::rows;
    const int64_t i = i0 + threadIdx.x / Group, row = n * shape.queries + i;
    const bool active = i < shape.queries;
    const int64_t last = i0 + B::rows < shape.queries ? i0 + B::rows : shape.queries;
    const int64_t end = shape.visibleKeys(last - 1), visible = active ? shape.visibleKeys(i) : 0;
    const T *biasRow = bias && active ? bias + shape.biasAt(n, i, 0) : nullptr;
    C qr[Per], acc[Per];
    PPCRT_UNROLL
    for (int t = 0; t < Per; ++t) {
      const int d = g + Group * t;
      qr[t] = active && d < depth ? C(q[shape.q.at(n, i) + d]) : C(0);
      acc[t] = C(0);
    }
    // The row's running max and the sum of exp(s - max) (rounding: exp(s -
    // shift)).
    constexpr bool Rounds = sizeof(T) < sizeof(C);
    C rowMax = none, sum = C(0);
    RoundedShift shift;
    for (int64_t j0 = 0; j0 < end; j0 += Tile) {
      const int cols = int(end - j0 < Tile ? end - j0 : Tile);
      __syncthreads(); // the previous tile is used up
      attentionStage<MaxDim>(k + shape.k.head(n), shape.k.rowStride, j0, cols, depth, kTile);
      attentionStage<MaxDim>(v + shape.v.head(n), shape.v.rowStride, j0, cols, width, vTile);
      __syncthreads();
      for (int c = 0; c < cols; ++c) {
        C dot = C(0);
        PPCRT_UNROLL
        for (int t = 0; t < Per; ++t)
          if (g + Group * t < depth)
            dot += qr[t] * C(kTile[c * MaxDim + g + Group * t]);
        dot = attentionRowSum<Group>(dot);
        if (j0 + c >= visible)
          continue;
        C s = scale * dot + (biasRow ? C(biasRow[(j0 + c) * shape.biasColStride]) : C(0));
        if (s == none)
          continue;
        C p;
        if constexpr (Rounds) {
          if (s > rowMax) {
            const RoundedShift risen = RoundedShift::of(s);
            const C alpha = shift.rescale(risen);
            sum *= alpha;
            PPCRT_UNROLL
            for (int t = 0; t < Per; ++t)
              acc[t] *= alpha;
            rowMax = s;
            shift = risen;
          }
          p = shift.exp(s);
          sum += p;
          p = C(T(p));
        } else {
          if (s > rowMax) {
            C alpha = exp(rowMax - s);
            sum *= alpha;
            PPCRT_UNROLL
            for (int t = 0; t < Per; ++t)
              acc[t] *= alpha;
            rowMax = s;
          }
          p = exp(s - rowMax);
          sum += p;
        }
        PPCRT_UNROLL
        for (int t = 0; t < Per; ++t)
          if (g + Group * t < width)
            acc[t] += p * C(vTile[c * MaxDim + g + Group * t]);
      }
    }
    if (active) {
      if (g == 0)
        lse[row] = L((Rounds ? C(shift.value) : rowMax) + log(sum));
      C inverse = C(1) / sum;
      PPCRT_UNROLL
      for (int t = 0; t < Per; ++t)
        if (g + Group * t < width)
          o[shape.o.at(n, i) + g + Group * t] = T(acc[t] * inverse);
    }
  }
}

/// The gradient of q: block b takes the rows of query tile b % queryTiles
/// of head b / queryTiles through tiles of keys, recomputing each query's
/// P = exp(S - lse) and D = dot(dO, o).
template <int MaxDim, typename T, typename L>
__global__ void __launch_bounds__(256)
    attentionGradQKernel(const T *q, const T *k, const T *v, const T *bias, const T *o,
                         const L *lse, const T *dO, T *dq, lines::AttentionShape shape,
                         int64_t queryTiles) {
  using C = Compute<T>;
  using B = AttentionBlock<T, MaxDim, 3>;
  constexpr int Per = B::per, Group = B::group, Tile = B::tile;
  __shared__ T kTile[Tile * MaxDim];
  __shared__ T vTile[Tile * MaxDim];
  const int depth = int(shape.headDim), width = int(shape.valueDim), g = threadIdx.x % Group;
  const C scale = C(shape.scale);
  for (int64_t block = blockIdx.x; block < shape.batch * queryTiles; block += gridDim.x) {
    const int64_t n = block / queryTiles, i0 = block % queryTiles * B::rows;
    const int64_t i = i0 + threadIdx.x / Group, row = n * shape.queries + i;
    const bool active = i < shape.queries;
    const int64_t last = i0 + B::rows < shape.queries ? i0 + B::rows : shape.queries;
    const int64_t end = shape.visibleKeys(last - 1), visible = active ? shape.visibleKeys(i) : 0;
    const T *biasRow = bias && active ? bias + shape.biasAt(n, i, 0) : nullptr;
    C qr[Per], dOr[Per], acc[Per], rowD = C(0);
    PPCRT_UNROLL
    for (int t = 0; t < Per; ++t) {
      const int d = g + Group * t;
      qr[t] = active && d < depth ? C(q[shape.q.at(n, i) + d]) : C(0);
      dOr[t] = active && d < width ? C(dO[shape.dO.at(n, i) + d]) : C(0);
      if (active && d < width)
        rowD += dOr[t] * C(o[shape.o.at(n, i) + d]);
      acc[t] = C(0);
    }
    rowD = attentionRowSum<Group>(rowD);
    const C rowLse = active ? C(lse[row]) : C(0);
    for (int64_t j0 = 0; j0 < end; j0 += Tile) {
      const int cols = int(end - j0 < Tile ? end - j0 : Tile);
      __syncthreads();
      attentionStage<MaxDim>(k + shape.k.head(n), shape.k.rowStride, j0, cols, depth, kTile);
      attentionStage<MaxDim>(v + shape.v.head(n), shape.v.rowStride, j0, cols, width, vTile);
      __syncthreads();
      for (int c = 0; c < cols; ++c) {
        C dot = C(0), dp = C(0);
        PPCRT_UNROLL
        for (int t = 0; t < Per; ++t) {
          const int d = g + Group * t;
          if (d < depth)
            dot += qr[t] * C(kTile[c * MaxDim + d]);
          if (d < width)
            dp += dOr[t] * C(vTile[c * MaxDim + d]);
        }
        dot = attentionRowSum<Group>(dot);
        dp = attentionRowSum<Group>(dp);
        if (j0 + c >= visible)
          continue;
        C s = scale * dot + (biasRow ? C(biasRow[(j0 + c) * shape.biasColStride]) : C(0));
        C ds = asOperand<T>(exp(s - rowLse) * (dp - rowD));
        PPCRT_UNROLL
        for (int t = 0; t < Per; ++t)
          if (g + Group * t < depth)
            acc[t] += ds * C(kTile[c * MaxDim + g + Group * t]);
      }
    }
    if (active) {
      PPCRT_UNROLL
      for (int t = 0; t < Per; ++t)
        if (g + Group * t < depth)
          dq[shape.dq.at(n, i) + g + Group * t] = T(scale * acc[t]);
    }
  }
}

/// The gradients of k and v: block b takes the rows of key tile b %
/// keyTiles of head b / keyTiles through tiles of the queries that see them
/// (from the block's first key on when causal), each tile's D = dot(dO, o)
/// computed as it is staged.
template <int MaxDim, typename T, typename L>
__global__ void __launch_bounds__(256)
    attentionGradKVKernel(const T *q, const T *k, const T *v, const T *bias, const T *o,
                          const L *lse, const T *dO, T *dk, T *dv, lines::AttentionShape shape,
                          int64_t keyTiles) {
  using C = Compute<T>;
  using B = AttentionBlock<T, MaxDim, 4>;
  constexpr int Per = B::per, Group = B::group, Tile = B::tile;
  __shared__ T qTile[Tile * MaxDim];
  __shared__ T dOTile[Tile * MaxDim];
  __shared__ C lseTile[Tile], dTile[Tile];
  const int depth = int(shape.headDim), width = int(shape.valueDim), g = threadIdx.x % Group;
  const C scale = C(shape.scale);
  for (int64_t block = blockIdx.x; block < shape.batch * keyTiles; block += gridDim.x) {
    const int64_t n = block / keyTiles, j0 = block % keyTiles * B::rows;
    const int64_t j = j0 + threadIdx.x / Group;
    const bool active = j < shape.keys;
    const T *biasColumn = bias && active ? bias + shape.biasAt(n, 0, j) : nullptr;
    C kr[Per], vr[Per], dkAcc[Per], dvAcc[Per];
    PPCRT_UNROLL
    for (int t = 0; t < Per; ++t) {
      const int d = g + Group * t;
      kr[t] = active && d < depth ? C(k[shape.k.at(n, j) + d]) : C(0);
      vr[t] = active && d < width ? C(v[shape.v.at(n, j) + d]) : C(0);
      dkAcc[t] = C(0);
      dvAcc[t] = C(0);
    }
    for (int64_t i0 = shape.causal ? j0 : 0; i0 < shape.queries; i0 += Tile) {
      const int rows = int(shape.queries - i0 < Tile ? shape.queries - i0 : Tile);
      const int64_t first = n * shape.queries + i0;
      __syncthreads();
      attentionStage<MaxDim>(q + shape.q.head(n), shape.q.rowStride, i0, rows, depth, qTile);
      attentionStage<MaxDim>(dO + shape.dO.head(n), shape.dO.rowStride, i0, rows, width, dOTile);
      for (int c = threadIdx.x; c < rows; c += blockDim.x) {
        C rowD = C(0);
        const T *dOr = dO + shape.dO.at(n, i0 + c), *or_ = o + shape.o.at(n, i0 + c);
        for (int e = 0; e < width; ++e)
          rowD += C(dOr[e]) * C(or_[e]);
        dTile[c] = rowD;
        lseTile[c] = C(lse[first + c]);
      }
      __syncthreads();
      for (int c = 0; c < rows; ++c) {
        C dot = C(0), dp = C(0);
        PPCRT_UNROLL
        for (int t = 0; t < Per; ++t) {
          const int d = g + Group * t;
          if (d < depth)
            dot += kr[t] * C(qTile[c * MaxDim + d]);
          if (d < width)
            dp += vr[t] * C(dOTile[c * MaxDim + d]);
        }
        dot = attentionRowSum<Group>(dot);
        dp = attentionRowSum<Group>(dp);
        if (!active || j >= shape.visibleKeys(i0 + c))
          continue;
        C s = scale * dot + (biasColumn ? C(biasColumn[(i0 + c) * shape.biasRowStride]) : C(0));
        const C exact = exp(s - lseTile[c]);
        C p = asOperand<T>(exact), ds = asOperand<T>(exact * (dp - dTile[c]));
        PPCRT_UNROLL
        for (int t = 0; t < Per; ++t) {
          const int d = g + Group * t;
          if (d < depth)
            dkAcc[t] += ds * C(qTile[c * MaxDim + d]);
          if (d < width)
            dvAcc[t] += p * C(dOTile[c * MaxDim + d]);
        }
      }
    }
    if (active) {
      PPCRT_UNROLL
      for (int t = 0; t < Per; ++t) {
        const int d = g + Group * t;
        if (d < depth)
          dk[shape.dk.at(n, j) + d] = T(scale * dkAcc[t]);
        if (d < width)
          dv[shape.dv.at(n, j) + d] = T(dvAcc[t]);
      }
    }
  }
}

/// Blocks for `tiles` tiles of rows (blocks loop past the grid's limit).
inline unsigned attentionBlocks(int64_t tiles) {
  return unsigned(tiles < 1 ? 1 : tiles < 0x7fffffff ? tiles : 0x7fffffff);
}

/// The MaxDim of the kernels that take the shape's head and value sizes;
/// sizes above kAttentionMaxDim end the process (check).
inline int attentionMaxDim(const lines::AttentionShape &shape) {
  int64_t dim = shape.headDim > shape.valueDim ? shape.headDim : shape.valueDim;
  if (dim > kAttentionMaxDim)
    check(cudaErrorInvalidValue, "an attention (head and value sizes above 256 are not supported "
                                 "by the CUDA kernels)");
  return dim <= 64 ? 64 : dim <= 128 ? 128 : 256;
}

template <int MaxDim, typename T, typename L>
void launchAttention(const T *q, const T *k, const T *v, const T *bias, T *o, L *lse,
                     const lines::AttentionShape &shape) {
  using B = AttentionBlock<T, MaxDim, 2>;
  int64_t tiles = (shape.queries + B::rows - 1) / B::rows;
  PPCRT_LAUNCH(attentionKernel<MaxDim>, attentionBlocks(shape.batch * tiles), B::threads, 0,
               stream())(q, k, v, bias, o, lse, shape, tiles);
}

/// Tensor-core attention, bf16: FlashAttention-2's kernels on mma.sync
/// (m16n8k16, bf16 operands into float accumulators). A block of kMmaWarps
/// warps takes 16 rows each (queries; keys in the k/v gradient) through
/// tiles of Cols columns staged in shared memory. A warp keeps its scores,
/// probabilities and accumulators in registers, in the layout PTX gives the
/// fragments (lane 4g + t holds rows g and g + 8 and columns 2t and 2t + 1 of
/// each 8-column tile of a product), so the scores' accumulators become the
/// next product's left operand where they are, and a row's max and sum are
/// those of its quad (lanes 4g .. 4g + 3: two shuffles). The probabilities
/// (or the scores' gradient) enter that product rounded to bf16, as
/// FlashAttention's do; the forward's are shifted by a multiple of ln 2
/// (RoundedShift), so that where the tiles fall does not change their rounding.
/// Until 2026-12-03 the forward took p as the bf16 pair hi + lo (to 2^-16,
/// two products). Head and value sizes are padded
/// to MaxDim (64 or 128) with zeros; tiles have 64 columns at 64 and 32 at
/// 128 (the registers, and shared memory under 48 KiB).
constexpr int kMmaWarps = 4, kMmaRows = 16 * kMmaWarps;
template <int MaxDim> constexpr int mmaCols() { return MaxDim > 64 ? 32 : 64; }

/// The tiles of a kernel in shared memory: row-major [Cols][MaxDim + 8]
/// (the right operand of products over the head) and transposed [MaxDim]
/// [Cols + 8] (of products over the tile's columns). The pitches keep the
/// fragments' 32-bit loads free of bank conflicts and rows 16-byte aligned.
template <int MaxDim> struct MmaTiles {
  static constexpr int cols = mmaCols<MaxDim>(), ld = MaxDim + 8, tld = cols + 8;
  static constexpr int rowMajor = cols * ld, transposed = MaxDim * tld;
};

/// d += a b for one 16 x 8 x 16 product of the warp (PTX's
/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32): a's four and b's
/// two 32-bit registers hold bf16 pairs, the lower column (of a) or row (of
/// b) in the low half.
__device__ inline void mmaBf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef PPCRT_CUDA_EMULATOR
  ppcrt::emu::mmaSync16x8x16(d, a, b, d);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/// The bf16 pair (low, high) as a fragment's register.
__device__ inline uint32_t bf16Pair(bf16 low, bf16 high) {
  return uint32_t(__bfloat16_as_ushort(low)) | uint32_t(__bfloat16_as_ushort(high)) << 16;
}

/// The two bf16 at p (4-byte aligned) as a fragment's register.
__device__ inline uint32_t bf16Word(const bf16 *p) {
#ifdef PPCRT_CUDA_EMULATOR
  uint32_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
#else
  return *reinterpret_cast<const uint32_t *>(p);
#endif
}

/// Rows [from, from + Cols) of the [rows, size] matrix `in` (rows `pitch`
/// apart) into the row-major tile and, where given, the transposed one;
/// zeros past either end. The block together, eight elements per thread
/// (one 16-byte load where the rows allow), a thread per row in turn so that
/// the transposed stores of a warp fall in different banks.
template <int MaxDim>
__device__ inline void mmaStage(const bf16 *in, int64_t pitch, int64_t from, int64_t rows, int size,
                                bf16 *tile, bf16 *transposed) {
  using S = MmaTiles<MaxDim>;
  struct alignas(16) Eight {
    bf16 x[8];
  };
  const bool wide = reinterpret_cast<uintptr_t>(in) % 16 == 0 && pitch % 8 == 0 && size % 8 == 0;
  for (int e = threadIdx.x; e < S::cols * (MaxDim / 8); e += blockDim.x) {
    const int r = e % S::cols, c0 = e / S::cols * 8;
    const bool row = from + r < rows;
    Eight eight;
    if (row && wide && c0 < size) {
      eight = *reinterpret_cast<const Eight *>(in + (from + r) * pitch + c0);
    } else {
      PPCRT_UNROLL
      for (int c = 0; c < 8; ++c)
        eight.x[c] = row && c0 + c < size ? in[(from + r) * pitch + c0 + c] : bf16(0.0f);
    }
    if (tile)
      *reinterpret_cast<Eight *>(tile + r * S::ld + c0) = eight;
    if (transposed) {
      PPCRT_UNROLL
      for (int c = 0; c < 8; ++c)
        transposed[(c0 + c) * S::tld + r] = eight.x[c];
    }
  }
}

/// The warp's 16 rows [first, first + 16) of the [rows, size] matrix `in`
/// (rows `pitch` apart) as MaxDim / 16 left-operand fragments, zeros past
/// either end.
template <int MaxDim>
__device__ inline void mmaRowFragments(const bf16 *in, int64_t pitch, int64_t first, int64_t rows,
                                       int size, uint32_t (&f)[MaxDim / 16][4]) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  auto at = [&](int r, int c) {
    return first + r < rows && c < size ? in[(first + r) * pitch + c] : bf16(0.0f);
  };
  PPCRT_UNROLL
  for (int kc = 0; kc < MaxDim / 16; ++kc) {
    PPCRT_UNROLL
    for (int w = 0; w < 4; ++w) {
      const int r = g + 8 * (w % 2), c = kc * 16 + 2 * t + 8 * (w / 2);
      f[kc][w] = bf16Pair(at(r, c), at(r, c + 1));
    }
  }
}

/// The right operand of columns [n0, n0 + 8) and rows [k0, k0 + 16) of the
/// matrix whose element (k, n) is tile[n * ld + k].
__device__ inline void mmaRightFragment(const bf16 *tile, int ld, int n0, int k0,
                                        uint32_t (&b)[2]) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const bf16 *p = tile + (n0 + g) * ld + k0 + 2 * t;
  b[0] = bf16Word(p);
  b[1] = bf16Word(p + 8);
}

/// s = rows tile^T: the warp's 16 rows (MaxDim / 16 fragments) against the
/// row-major tile's Cols rows, as Cols / 8 accumulators.
template <int MaxDim>
__device__ inline void mmaScores(const uint32_t (&rows)[MaxDim / 16][4], const bf16 *tile,
                                 float (&s)[MmaTiles<MaxDim>::cols / 8][4]) {
  using S = MmaTiles<MaxDim>;
  PPCRT_UNROLL
  for (int nt = 0; nt < S::cols / 8; ++nt) {
    for (float &x : s[nt])
      x = 0.0f;
    PPCRT_UNROLL
    for (int kc = 0; kc < MaxDim / 16; ++kc) {
      uint32_t b[2];
      mmaRightFragment(tile, S::ld, nt * 8, kc * 16, b);
      mmaBf16(s[nt], rows[kc], b);
    }
  }
}

/// acc += p tile: the warp's [16, Cols] p (accumulators of mmaScores'
/// layout) times the transposed tile's [Cols, MaxDim], p rounded to bf16.
template <int MaxDim>
__device__ inline void mmaAccumulate(float (&acc)[MaxDim / 8][4],
                                     const float (&p)[MmaTiles<MaxDim>::cols / 8][4],
                                     const bf16 *transposed) {
  using S = MmaTiles<MaxDim>;
  PPCRT_UNROLL
  for (int kc = 0; kc < S::cols / 16; ++kc) {
    uint32_t a[4];
    PPCRT_UNROLL
    for (int w = 0; w < 4; ++w) {
      const float *pair = &p[2 * kc + w / 2][2 * (w % 2)];
      a[w] = bf16Pair(bf16(pair[0]), bf16(pair[1]));
    }
    PPCRT_UNROLL
    for (int dt = 0; dt < MaxDim / 8; ++dt) {
      uint32_t b[2];
      mmaRightFragment(transposed, S::tld, dt * 8, kc * 16, b);
      mmaBf16(acc[dt], a, b);
    }
  }
}

/// out[row][col] = scale * acc for the warp's rows [first, first + 16) below
/// `rows` and the columns below `size` (rows `pitch` apart in out).
template <int MaxDim>
__device__ inline void mmaStoreRows(const float (&acc)[MaxDim / 8][4], const float (&scale)[2],
                                    bf16 *out, int64_t pitch, int64_t first, int64_t rows,
                                    int size) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  PPCRT_UNROLL
  for (int dt = 0; dt < MaxDim / 8; ++dt) {
    PPCRT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int64_t r = first + g + 8 * (i / 2);
      const int c = dt * 8 + 2 * t + i % 2;
      if (r < rows && c < size)
        out[r * pitch + c] = bf16(scale[i / 2] * acc[dt][i]);
    }
  }
}

/// The max of `value` over the lane's quad (the lanes of a row).
__device__ inline float quadMax(float value) {
  for (int offset = 1; offset < 4; offset *= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = other > value ? other : value;
  }
  return value;
}

/// The sum of `value` over the lane's quad.
__device__ inline float quadSum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  value += __shfl_xor_sync(0xffffffffu, value, 2);
  return value;
}

template <int MaxDim> struct alignas(16) MmaForwardShared {
  bf16 k[MmaTiles<MaxDim>::rowMajor], v[MmaTiles<MaxDim>::transposed];
};

/// Block b takes the kMmaRows queries of tile b % queryTiles of head
/// b / queryTiles through the keys they see, a tile at a time (online
/// softmax: the running max rescales the row's sums and output).
template <int MaxDim>
__global__ void __launch_bounds__(kMmaWarps * 32)
    attentionMmaKernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *bias, bf16 *o,
                       float *lse, lines::AttentionShape shape, int64_t queryTiles) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using S = MmaTiles<MaxDim>;
  __shared__ MmaForwardShared<MaxDim> s;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int depth = int(shape.headDim), width = int(shape.valueDim);
  const float scale = float(shape.scale), none = -INFINITY;
  for (int64_t block = blockIdx.x; block < shape.batch * queryTiles; block += gridDim.x) {
    const int64_t n = block / queryTiles, i0 = block % queryTiles * kMmaRows;
    const int64_t first = i0 + 16 * warp;
    const int64_t last = i0 + kMmaRows < shape.queries ? i0 + kMmaRows : shape.queries;
    const int64_t end = shape.visibleKeys(last - 1);
    int64_t visible[2];
    const bf16 *biasRow[2];
    PPCRT_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int64_t i = first + g + 8 * h;
      visible[h] = i < shape.queries ? shape.visibleKeys(i) : 0;
      biasRow[h] = bias && i < shape.queries ? bias + shape.biasAt(n, i, 0) : nullptr;
    }
    uint32_t qf[MaxDim / 16][4];
    mmaRowFragments<MaxDim>(q + shape.q.head(n), shape.q.rowStride, first, shape.queries, depth,
                            qf);
    float acc[MaxDim / 8][4] = {};
    // Each row's running max and its shift (RoundedShift), and the lane's
    // columns' sum of exp(s - shift).
    float rowMax[2] = {none, none}, sum[2] = {0.0f, 0.0f};
    RoundedShift shift[2];
    for (int64_t j0 = 0; j0 < end; j0 += S::cols) {
      __syncthreads(); // the previous tiles are used up
      mmaStage<MaxDim>(k + shape.k.head(n), shape.k.rowStride, j0, end, depth, s.k, nullptr);
      mmaStage<MaxDim>(v + shape.v.head(n), shape.v.rowStride, j0, end, width, nullptr, s.v);
      __syncthreads();
      float x[S::cols / 8][4];
      mmaScores<MaxDim>(qf, s.k, x);
      float tileMax[2] = {none, none};
      PPCRT_UNROLL
      for (int nt = 0; nt < S::cols / 8; ++nt) {
        PPCRT_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2;
          const int64_t j = j0 + nt * 8 + 2 * t + e % 2;
          x[nt][e] = j < visible[h]
                         ? scale * x[nt][e] +
                               (biasRow[h] ? float(biasRow[h][j * shape.biasColStride]) : 0.0f)
                         : none;
          tileMax[h] = x[nt][e] > tileMax[h] ? x[nt][e] : tileMax[h];
        }
      }
      float alpha[2];
      PPCRT_UNROLL
      for (int h = 0; h < 2; ++h) {
        const float seen = quadMax(tileMax[h]);
        alpha[h] = 1.0f;
        if (seen > rowMax[h]) {
          const RoundedShift risen = RoundedShift::of(seen);
          alpha[h] = shift[h].rescale(risen); // a power of two
          rowMax[h] = seen;
          shift[h] = risen;
        }
        sum[h] *= alpha[h];
      }
      PPCRT_UNROLL
      for (int nt = 0; nt < S::cols / 8; ++nt) {
        PPCRT_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2;
          const float p = x[nt][e] == none ? 0.0f : shift[h].exp(x[nt][e]);
          sum[h] += p;
          x[nt][e] = p;
        }
      }
      PPCRT_UNROLL
      for (int dt = 0; dt < MaxDim / 8; ++dt) {
        PPCRT_UNROLL
        for (int e = 0; e < 4; ++e)
          acc[dt][e] *= alpha[e / 2];
      }
      mmaAccumulate<MaxDim>(acc, x, s.v);
    }
    float inverse[2];
    PPCRT_UNROLL
    for (int h = 0; h < 2; ++h) {
      sum[h] = quadSum(sum[h]);
      inverse[h] = 1.0f / sum[h];
      const int64_t i = first + g + 8 * h;
      if (t == 0 && i < shape.queries)
        lse[n * shape.queries + i] = shift[h].value + log(sum[h]);
    }
    mmaStoreRows<MaxDim>(acc, inverse, o + shape.o.head(n), shape.o.rowStride, first, shape.queries,
                         width);
  }
#endif
}

template <int MaxDim> struct alignas(16) MmaGradQShared {
  bf16 k[MmaTiles<MaxDim>::rowMajor], kt[MmaTiles<MaxDim>::transposed],
      v[MmaTiles<MaxDim>::rowMajor];
};

/// dq = scale sum_j dS_ij k_j, dS = P (dP - D), dP = dO v^T, D = dot(dO, o):
/// the warp's 16 queries, the keys they see in tiles.
template <int MaxDim>
__global__ void __launch_bounds__(kMmaWarps * 32)
    attentionMmaGradQKernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *bias,
                            const bf16 *o, const float *lse, const bf16 *dO, bf16 *dq,
                            lines::AttentionShape shape, int64_t queryTiles) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using S = MmaTiles<MaxDim>;
  __shared__ MmaGradQShared<MaxDim> s;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int depth = int(shape.headDim), width = int(shape.valueDim);
  const float scale = float(shape.scale);
  for (int64_t block = blockIdx.x; block < shape.batch * queryTiles; block += gridDim.x) {
    const int64_t n = block / queryTiles, i0 = block % queryTiles * kMmaRows;
    const int64_t first = i0 + 16 * warp;
    const int64_t last = i0 + kMmaRows < shape.queries ? i0 + kMmaRows : shape.queries;
    const int64_t end = shape.visibleKeys(last - 1);
    int64_t visible[2];
    const bf16 *biasRow[2];
    float rowD[2], rowLse[2];
    PPCRT_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int64_t i = first + g + 8 * h;
      const bool active = i < shape.queries;
      visible[h] = active ? shape.visibleKeys(i) : 0;
      biasRow[h] = bias && active ? bias + shape.biasAt(n, i, 0) : nullptr;
      float d = 0.0f;
      for (int e = t; active && e < width; e += 4)
        d += float(dO[shape.dO.at(n, i) + e]) * float(o[shape.o.at(n, i) + e]);
      rowD[h] = quadSum(d);
      rowLse[h] = active ? lse[n * shape.queries + i] : 0.0f;
    }
    uint32_t qf[MaxDim / 16][4], dOf[MaxDim / 16][4];
    mmaRowFragments<MaxDim>(q + shape.q.head(n), shape.q.rowStride, first, shape.queries, depth,
                            qf);
    mmaRowFragments<MaxDim>(dO + shape.dO.head(n), shape.dO.rowStride, first, shape.queries, width,
                            dOf);
    float acc[MaxDim / 8][4] = {};
    for (int64_t j0 = 0; j0 < end; j0 += S::cols) {
      __syncthreads();
      mmaStage<MaxDim>(k + shape.k.head(n), shape.k.rowStride, j0, end, depth, s.k, s.kt);
      mmaStage<MaxDim>(v + shape.v.head(n), shape.v.rowStride, j0, end, width, s.v, nullptr);
      __syncthreads();
      float x[S::cols / 8][4], dp[S::cols / 8][4];
      mmaScores<MaxDim>(qf, s.k, x);
      mmaScores<MaxDim>(dOf, s.v, dp);
      PPCRT_UNROLL
      for (int nt = 0; nt < S::cols / 8; ++nt) {
        PPCRT_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2;
          const int64_t j = j0 + nt * 8 + 2 * t + e % 2;
          float ds = 0.0f;
          if (j < visible[h]) {
            const float score =
                scale * x[nt][e] + (biasRow[h] ? float(biasRow[h][j * shape.biasColStride]) : 0.0f);
            ds = exp(score - rowLse[h]) * (dp[nt][e] - rowD[h]);
          }
          x[nt][e] = ds;
        }
      }
      mmaAccumulate<MaxDim>(acc, x, s.kt);
    }
    const float scales[2] = {scale, scale};
    mmaStoreRows<MaxDim>(acc, scales, dq + shape.dq.head(n), shape.dq.rowStride, first,
                         shape.queries, depth);
  }
#endif
}

template <int MaxDim> struct alignas(16) MmaGradKVShared {
  bf16 q[MmaTiles<MaxDim>::rowMajor], qt[MmaTiles<MaxDim>::transposed],
      dO[MmaTiles<MaxDim>::rowMajor], dOt[MmaTiles<MaxDim>::transposed];
  float lse[MmaTiles<MaxDim>::cols], d[MmaTiles<MaxDim>::cols];
};

/// The warp's 16 keys of a block of attention's k and v gradients
/// (attentionMmaGradKVKernel, attentionMmaGradKernel): their fragments and
/// bias columns, and the dk and dv they accumulate over tiles of queries.
template <int MaxDim> struct MmaKeyRows {
  using S = MmaTiles<MaxDim>;
  static constexpr int perQuery = kMmaWarps * 32 / S::cols; // threads that sum a query's D
  int64_t n, first, key[2];
  const bf16 *biasColumn[2];
  uint32_t kf[MaxDim / 16][4], vf[MaxDim / 16][4];
  float dkAcc[MaxDim / 8][4] = {}, dvAcc[MaxDim / 8][4] = {};

  /// Keys [j0 + 16 warp, + 16) of head `head`.
  __device__ MmaKeyRows(const bf16 *k, const bf16 *v, const bf16 *bias,
                        const lines::AttentionShape &shape, int64_t head, int64_t j0)
      : n(head), first(j0 + 16 * (threadIdx.x / 32)) {
    const int g = threadIdx.x % 32 / 4;
    PPCRT_UNROLL
    for (int h = 0; h < 2; ++h) {
      key[h] = first + g + 8 * h;
      biasColumn[h] = bias && key[h] < shape.keys ? bias + shape.biasAt(n, 0, key[h]) : nullptr;
    }
    mmaRowFragments<MaxDim>(k + shape.k.head(n), shape.k.rowStride, first, shape.keys,
                            int(shape.headDim), kf);
    mmaRowFragments<MaxDim>(v + shape.v.head(n), shape.v.rowStride, first, shape.keys,
                            int(shape.valueDim), vf);
  }

  /// The tile of queries [i0, i0 + Cols): staged in `s` (q, dO, their
  /// transposes, D and lse; the block together, between barriers), P and dS
  /// of the warp's keys (S^T = k q^T, dP^T = v dO^T), dv += P^T dO and
  /// dk += dS^T q (unscaled); dS left in `ds`.
  __device__ void step(MmaGradKVShared<MaxDim> &s, const bf16 *q, const bf16 *o, const float *lse,
                       const bf16 *dO, const lines::AttentionShape &shape, int64_t i0,
                       float (&ds)[S::cols / 8][4]) {
    const int t = threadIdx.x % 4, depth = int(shape.headDim), width = int(shape.valueDim);
    const float scale = float(shape.scale);
    __syncthreads();
    mmaStage<MaxDim>(q + shape.q.head(n), shape.q.rowStride, i0, shape.queries, depth, s.q, s.qt);
    mmaStage<MaxDim>(dO + shape.dO.head(n), shape.dO.rowStride, i0, shape.queries, width, s.dO,
                     s.dOt);
    { // D and lse of the tile's queries: perQuery threads each
      const int c = threadIdx.x / perQuery, part = threadIdx.x % perQuery;
      const bool valid = i0 + c < shape.queries;
      float rowD = 0.0f;
      const bf16 *dOr = dO + shape.dO.at(n, i0 + c), *or_ = o + shape.o.at(n, i0 + c);
      for (int e = part; valid && e < width; e += perQuery)
        rowD += float(dOr[e]) * float(or_[e]);
      for (int offset = 1; offset < perQuery; offset *= 2)
        rowD += __shfl_xor_sync(0xffffffffu, rowD, offset);
      if (part == 0) {
        s.d[c] = rowD;
        s.lse[c] = valid ? lse[n * shape.queries + i0 + c] : 0.0f;
      }
    }
    __syncthreads();
    float p[S::cols / 8][4];
    mmaScores<MaxDim>(kf, s.q, p);
    mmaScores<MaxDim>(vf, s.dO, ds);
    PPCRT_UNROLL
    for (int nt = 0; nt < S::cols / 8; ++nt) {
      PPCRT_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2, c = nt * 8 + 2 * t + e % 2;
        const int64_t i = i0 + c;
        float pe = 0.0f, dse = 0.0f;
        if (key[h] < shape.keys && i < shape.queries && key[h] < shape.visibleKeys(i)) {
          const float score =
              scale * p[nt][e] +
              (biasColumn[h] ? float(biasColumn[h][i * shape.biasRowStride]) : 0.0f);
          pe = exp(score - s.lse[c]);
          dse = pe * (ds[nt][e] - s.d[c]);
        }
        p[nt][e] = pe;
        ds[nt][e] = dse;
      }
    }
    mmaAccumulate<MaxDim>(dvAcc, p, s.dOt);
    mmaAccumulate<MaxDim>(dkAcc, ds, s.qt);
  }

  /// dk = scale dkAcc and dv = dvAcc, each rounded once.
  __device__ void store(bf16 *dk, bf16 *dv, const lines::AttentionShape &shape) const {
    const float scale = float(shape.scale), scales[2] = {scale, scale}, ones[2] = {1.0f, 1.0f};
    mmaStoreRows<MaxDim>(dkAcc, scales, dk + shape.dk.head(n), shape.dk.rowStride, first,
                         shape.keys, int(shape.headDim));
    mmaStoreRows<MaxDim>(dvAcc, ones, dv + shape.dv.head(n), shape.dv.rowStride, first, shape.keys,
                         int(shape.valueDim));
  }
};

/// dk = scale sum_i dS_ij q_i and dv = sum_i P_ij dO_i: the warp's 16 keys
/// (MmaKeyRows), the queries that see the block's keys in tiles, with their
/// lse and D.
template <int MaxDim>
__global__ void __launch_bounds__(kMmaWarps * 32)
    attentionMmaGradKVKernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *bias,
                             const bf16 *o, const float *lse, const bf16 *dO, bf16 *dk, bf16 *dv,
                             lines::AttentionShape shape, int64_t keyTiles) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using S = MmaTiles<MaxDim>;
  __shared__ MmaGradKVShared<MaxDim> s;
  for (int64_t block = blockIdx.x; block < shape.batch * keyTiles; block += gridDim.x) {
    const int64_t j0 = block % keyTiles * kMmaRows;
    MmaKeyRows<MaxDim> keys(k, v, bias, shape, block / keyTiles, j0);
    for (int64_t i0 = shape.causal ? j0 : 0; i0 < shape.queries; i0 += S::cols) {
      float ds[S::cols / 8][4];
      keys.step(s, q, o, lse, dO, shape, i0, ds);
    }
    keys.store(dk, dv, shape);
  }
#endif
}

/// The turns of attentionMmaGradKernel's blocks (AttentionGrad.h): which
/// block adds its share of dq next, one per head and tile of queries, and
/// the tickets that hand out its tiles of keys. Zero between launches: the
/// last block to add into a tile's sums resets its turn, and the block that
/// takes the launch's last ticket the tickets. One table per process and
/// device: two of these kernels must never run at once (ppc's executables
/// run every kernel of a rank on its one compute stream, each rank its own
/// process), and a launch stopped midway leaves it set (a kernel fault ends
/// the CUDA context, and the process with it).
__device__ unsigned attentionTurns[attentiongrad::kMaxTurns];
__device__ unsigned attentionTickets;

/// Waits until `*turn` is `value` (one thread of the block; the rest wait
/// for it at a barrier), then orders the block's reads after the writes
/// that preceded the turn's store.
__device__ inline void waitForTurn(const unsigned *turn, unsigned value) {
#ifdef PPCRT_CUDA_EMULATOR
  // Blocks run one after another here: a turn not given yet never is.
  if (*turn != value)
    emu::emulatorError("attentionMmaGradKernel: a block waits for turn " + std::to_string(value) +
                       " of a tile of queries at turn " + std::to_string(*turn) +
                       ", which no earlier block gives");
#else
  while (*static_cast<const volatile unsigned *>(turn) != value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(32);
#endif
  }
  __threadfence();
#endif
}

/// The k/v gradient's tiles (q's, once the block's scores are computed, dS
/// as [queries][keys + 8]: the left operand of dq's product), the block's
/// keys transposed, and its ticket.
template <int MaxDim> struct alignas(16) MmaGradShared : MmaGradKVShared<MaxDim> {
  bf16 kt[MmaTiles<MaxDim>::transposed];
  unsigned ticket;
};

/// Causal attention's backward in one kernel (FlashAttention-2's;
/// AttentionGrad.h): a block takes a tile of kMmaRows keys through the
/// tiles of queries that see it, as attentionMmaGradKVKernel does, and also
/// multiplies each tile's dS (rounded to bf16, in shared memory) by its keys:
/// that tile's share of dq = scale dS k, five products where the two kernels
/// execute seven. The shares of a tile of queries are added in float in
/// dqSums ([batch, queries, headDim]) in a fixed order, the keys' tiles from
/// the diagonal down: the first stores its share, the last (the first tile
/// of keys) writes dq. Tickets give a head's tiles of keys from the last, and
/// each block takes its tiles of queries upward from its diagonal, so the
/// block before it in a tile's order (the next tile of keys) got its ticket
/// earlier and reached the tile a step earlier: a block waits only on blocks
/// that run already, and in turn almost never.
template <int MaxDim>
__global__ void __launch_bounds__(kMmaWarps * 32)
    attentionMmaGradKernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *bias,
                           const bf16 *o, const float *lse, const bf16 *dO, bf16 *dq, bf16 *dk,
                           bf16 *dv, float *dqSums, lines::AttentionShape shape, int64_t keyTiles,
                           int64_t queryTiles) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using S = MmaTiles<MaxDim>;
  static_assert(S::cols == kMmaRows && kMmaRows == attentiongrad::kRows,
                "a tile of queries has the rows of a tile of keys");
  constexpr int dsLd = kMmaRows + 8; // dS's pitch in s.q
  static_assert(S::cols * dsLd <= S::rowMajor, "dS fits where q's tile was");
  __shared__ MmaGradShared<MaxDim> s;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int depth = int(shape.headDim);
  const float scale = float(shape.scale);
  const int64_t total = shape.batch * keyTiles;
  for (;;) {
    __syncthreads(); // the previous tile's operands are used up
    if (threadIdx.x == 0) {
      const unsigned ticket = atomicAdd(&attentionTickets, 1u);
      if (ticket == unsigned(total) + gridDim.x - 1)
        atomicExch(&attentionTickets, 0u); // every block has taken its last ticket
      s.ticket = ticket;
    }
    __syncthreads();
    if (int64_t(s.ticket) >= total)
      break;
    const int64_t n = s.ticket / keyTiles, jt = keyTiles - 1 - s.ticket % keyTiles;
    const int64_t j0 = jt * kMmaRows;
    MmaKeyRows<MaxDim> keys(k, v, bias, shape, n, j0);
    mmaStage<MaxDim>(k + shape.k.head(n), shape.k.rowStride, j0, shape.keys, depth, nullptr, s.kt);
    for (int64_t i0 = j0; i0 < shape.queries; i0 += S::cols) {
      float ds[S::cols / 8][4];
      keys.step(s, q, o, lse, dO, shape, i0, ds);
      __syncthreads(); // every warp's scores have read q's tile
      bf16 *dsTile = s.q;
      PPCRT_UNROLL
      for (int nt = 0; nt < S::cols / 8; ++nt) {
        PPCRT_UNROLL
        for (int e = 0; e < 4; ++e)
          dsTile[(nt * 8 + 2 * t + e % 2) * dsLd + 16 * warp + g + 8 * (e / 2)] = bf16(ds[nt][e]);
      }
      __syncthreads();
      // The tile's share of dq: the warp's 16 queries against the block's keys.
      float dqAcc[MaxDim / 8][4] = {};
      PPCRT_UNROLL
      for (int kc = 0; kc < kMmaRows / 16; ++kc) {
        uint32_t a[4];
        PPCRT_UNROLL
        for (int w = 0; w < 4; ++w)
          a[w] = bf16Word(dsTile + (16 * warp + g + 8 * (w % 2)) * dsLd + kc * 16 + 2 * t +
                          8 * (w / 2));
        PPCRT_UNROLL
        for (int dt = 0; dt < MaxDim / 8; ++dt) {
          uint32_t b[2];
          mmaRightFragment(s.kt, S::tld, dt * 8, kc * 16, b);
          mmaBf16(dqAcc[dt], a, b);
        }
      }
      // Added in turn: the tile's first share is stored, the last written
      // to dq (scaled, rounded once).
      const int64_t queryTile = i0 / kMmaRows;
      unsigned *turn = &attentionTurns[n * queryTiles + queryTile];
      const unsigned position = unsigned((queryTile < keyTiles ? queryTile : keyTiles - 1) - jt);
      if (threadIdx.x == 0)
        waitForTurn(turn, position);
      __syncthreads();
      PPCRT_UNROLL
      for (int dt = 0; dt < MaxDim / 8; ++dt) {
        PPCRT_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int64_t i = i0 + 16 * warp + g + 8 * (e / 2);
          const int c = dt * 8 + 2 * t + e % 2;
          if (i >= shape.queries || c >= depth)
            continue;
          float *sum = dqSums + (n * shape.queries + i) * depth + c;
          const float value = position > 0 ? dqAcc[dt][e] + __ldcg(sum) : dqAcc[dt][e];
          if (jt == 0)
            dq[shape.dq.at(n, i) + c] = bf16(scale * value);
          else
            __stcg(sum, value);
        }
      }
      __threadfence(); // the sums before the turn
      __syncthreads();
      if (threadIdx.x == 0)
        *static_cast<volatile unsigned *>(turn) = jt == 0 ? 0u : position + 1;
    }
    keys.store(dk, dv, shape);
  }
#endif
}

/// Whether the bf16 attention of `shape` runs on tensor cores: head and
/// value sizes up to 128, and a GPU of compute capability 8.0 or later
/// (the emulator runs them always).
inline bool attentionOnTensorCores(const lines::AttentionShape &shape) {
  if (shape.headDim > 128 || shape.valueDim > 128)
    return false;
#ifdef PPCRT_CUDA_EMULATOR
  return true;
#else
  static const bool capable = [] {
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
               cudaSuccess &&
           major >= 8;
  }();
  return capable;
#endif
}

template <int MaxDim>
void launchAttentionTc(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *bias, bf16 *o,
                       float *lse, const lines::AttentionShape &shape) {
  int64_t tiles = (shape.queries + kMmaRows - 1) / kMmaRows;
  PPCRT_LAUNCH(attentionMmaKernel<MaxDim>, attentionBlocks(shape.batch * tiles), kMmaWarps * 32, 0,
               stream())(q, k, v, bias, o, lse, shape, tiles);
}

template <int MaxDim>
void launchAttentionTcGrad(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *bias,
                           const bf16 *o, const float *lse, const bf16 *dO, bf16 *dq, bf16 *dk,
                           bf16 *dv, float *dqSums, const lines::AttentionShape &shape) {
  int64_t queryTiles = (shape.queries + kMmaRows - 1) / kMmaRows;
  int64_t keyTiles = (shape.keys + kMmaRows - 1) / kMmaRows;
  if constexpr (MaxDim == 64)
    if (dqSums && attentiongrad::inOneKernel(true, shape.causal, shape.batch, shape.queries,
                                             shape.keys, shape.headDim, shape.valueDim)) {
      PPCRT_LAUNCH(attentionMmaGradKernel<MaxDim>, attentionBlocks(shape.batch * keyTiles),
                   kMmaWarps * 32, 0, stream())(q, k, v, bias, o, lse, dO, dq, dk, dv, dqSums,
                                                shape, keyTiles, queryTiles);
      return;
    }
  PPCRT_LAUNCH(attentionMmaGradQKernel<MaxDim>, attentionBlocks(shape.batch * queryTiles),
               kMmaWarps * 32, 0, stream())(q, k, v, bias, o, lse, dO, dq, shape, queryTiles);
  launched("an attention gradient");
  PPCRT_LAUNCH(attentionMmaGradKVKernel<MaxDim>, attentionBlocks(shape.batch * keyTiles),
               kMmaWarps * 32, 0, stream())(q, k, v, bias, o, lse, dO, dk, dv, shape, keyTiles);
}

/// Scaled dot-product attention (ppc.attention) over the shape's batch of
/// heads (lines::AttentionShape): o = softmax(scale q k^T + bias) v, each
/// operand's rows where the shape says, and each query's log-sum-exp in lse (L: float for float and
/// bf16, double for double). Computed in float (double for double), o
/// rounded once. Head and value sizes up to kAttentionMaxDim.
template <typename T, typename L>
void attention(const T *q, const T *k, const T *v, const T *bias, T *o, L *lse,
               const lines::AttentionShape &layout) {
  const lines::AttentionShape shape = layout.resolved();
  if constexpr (std::is_same_v<T, bf16>)
    if (attentionOnTensorCores(shape)) {
      if (attentionMaxDim(shape) == 64)
        launchAttentionTc<64>(q, k, v, bias, o, lse, shape);
      else
        launchAttentionTc<128>(q, k, v, bias, o, lse, shape);
      launched("an attention");
      return;
    }
  switch (attentionMaxDim(shape)) {
  case 64:
    launchAttention<64>(q, k, v, bias, o, lse, shape);
    break;
  case 128:
    launchAttention<128>(q, k, v, bias, o, lse, shape);
    break;
  default:
    launchAttention<256>(q, k, v, bias, o, lse, shape);
  }
  launched("an attention");
}

template <int MaxDim, typename T, typename L>
void launchAttentionGrad(const T *q, const T *k, const T *v, const T *bias, const T *o,
                         const L *lse, const T *dO, T *dq, T *dk, T *dv,
                         const lines::AttentionShape &shape) {
  using Q = AttentionBlock<T, MaxDim, 3>;
  using KV = AttentionBlock<T, MaxDim, 4>;
  int64_t queryTiles = (shape.queries + Q::rows - 1) / Q::rows;
  int64_t keyTiles = (shape.keys + KV::rows - 1) / KV::rows;
  PPCRT_LAUNCH(attentionGradQKernel<MaxDim>, attentionBlocks(shape.batch * queryTiles), Q::threads,
               0, stream())(q, k, v, bias, o, lse, dO, dq, shape, queryTiles);
  launched("an attention gradient");
  PPCRT_LAUNCH(attentionGradKVKernel<MaxDim>, attentionBlocks(shape.batch * keyTiles), KV::threads,
               0, stream())(q, k, v, bias, o, lse, dO, dk, dv, shape, keyTiles);
}

/// The gradients of attention (ppc.attention_grad) with respect to q, k and
/// v (written, not accumulated; the bias has none), from the forward's o and
/// lse (FlashAttention's backward): a kernel with a row per query for dq and
/// one with a row per key for dk and dv, each recomputing P = exp(S - lse)
/// and D = dot(dO, o), so that no two rows write one element and nothing
/// holds more than a value per query; or, where AttentionGrad.h's rule says
/// and `dqSums` (float [batch, queries, headDim], the arena's scratch) is
/// given, one kernel that adds dq's shares there in a fixed order
/// (attentionMmaGradKernel). Computed in float (double for double); in
/// bf16, P and dS = P (dP - D) are rounded to bf16 before their products
/// (dv = P^T dO, dq = scale dS k, dk = scale dS^T q), as FlashAttention
/// rounds them, and each gradient once at its store.
template <typename T, typename L>
void attentionGrad(const T *q, const T *k, const T *v, const T *bias, const T *o, const L *lse,
                   const T *dO, T *dq, T *dk, T *dv, const lines::AttentionShape &layout,
                   float *dqSums = nullptr) {
  const lines::AttentionShape shape = layout.resolved();
  if constexpr (std::is_same_v<T, bf16>)
    if (attentionOnTensorCores(shape)) {
      if (attentionMaxDim(shape) == 64)
        launchAttentionTcGrad<64>(q, k, v, bias, o, lse, dO, dq, dk, dv, dqSums, shape);
      else
        launchAttentionTcGrad<128>(q, k, v, bias, o, lse, dO, dq, dk, dv, dqSums, shape);
      launched("an attention gradient");
      return;
    }
  switch (attentionMaxDim(shape)) {
  case 64:
    launchAttentionGrad<64>(q, k, v, bias, o, lse, dO, dq, dk, dv, shape);
    break;
  case 128:
    launchAttentionGrad<128>(q, k, v, bias, o, lse, dO, dq, dk, dv, shape);
    break;
  default:
    launchAttentionGrad<256>(q, k, v, bias, o, lse, dO, dq, dk, dv, shape);
  }
  launched("an attention gradient");
}

//===----------------------------------------------------------------------===//
// Einsum (what no GEMM covers; small operands)
//===----------------------------------------------------------------------===//

/// Labels: the output's first (outermost first), then the contracted ones;
/// strides[t][l] is operand t's step for label l (the output is
/// operand `operands`).
struct EinsumSpec {
  int operands, labels, outLabels;
  int64_t size[16];
  int64_t stride[4][16];
};

template <typename T> struct EinsumOperands {
  const T *in[3];
};

template <typename T>
__global__ void einsumKernel(EinsumOperands<T> ops, T *out, EinsumSpec spec, int64_t outSize,
                             int64_t contracted) {
  using A = Accumulator<T>;
  PPCRT_GRID_STRIDE(o, outSize) {
    int64_t base[3] = {0, 0, 0}, rest = o;
    for (int l = spec.outLabels - 1; l >= 0; --l) {
      int64_t c = rest % spec.size[l];
      rest /= spec.size[l];
      for (int t = 0; t < spec.operands; ++t)
        base[t] += c * spec.stride[t][l];
    }
    A acc = A(0);
    for (int64_t r = 0; r < contracted; ++r) {
      int64_t at[3] = {base[0], base[1], base[2]}, rem = r;
      for (int l = spec.labels - 1; l >= spec.outLabels; --l) {
        int64_t c = rem % spec.size[l];
        rem /= spec.size[l];
        for (int t = 0; t < spec.operands; ++t)
          at[t] += c * spec.stride[t][l];
      }
      A product = A(1);
      for (int t = 0; t < spec.operands; ++t)
        product *= A(Reg<T>(ops.in[t][at[t]]));
      acc += product;
    }
    out[o] = T(Reg<T>(acc));
  }
}

template <typename T>
void einsum(EinsumOperands<T> ops, T *out, const EinsumSpec &spec, int64_t outSize) {
  int64_t contracted = 1;
  for (int l = spec.outLabels; l < spec.labels; ++l)
    contracted *= spec.size[l];
  PPCRT_LAUNCH(einsumKernel, blocksFor(outSize), kThreads, 0, stream())(ops, out, spec, outSize,
                                                                        contracted);
  launched("an einsum");
}

} // namespace ppcrt::cuda

#endif // PPC_RUNTIME_PPCRT_CUDA_KERNELS_CUH
