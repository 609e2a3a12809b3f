//===- NormSums.h - the sums over its rows a norm gradient computes -------===//
//
// A LayerNorm's or RMSNorm's gradient kernel may also sum, over its rows,
// what it reads and writes: the result's gradient (the norm's bias's
// gradient), that times the normalized input (the scale's), and what it
// writes (the gradient of the bias of the product before the norm). Codegen
// plans them (FusionPlan::normGradSums) and prices them (KernelProfile);
// the kernels (CpuKernels.h, cuda/Kernels.cuh) compute them. What they
// share is here: where the sums go, and how the CUDA kernel splits rows
// into blocks, each adding its rows into partial sums a second launch adds.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_NORMSUMS_H
#define PPC_RUNTIME_PPCRT_NORMSUMS_H

#include <cstdint>

namespace ppcrt {

/// Where a norm gradient writes its sums over the rows, [size] elements
/// each, or null where not wanted: the result's gradient dy, dy times the
/// normalized input, and the rows the kernel writes.
template <typename R, typename P, typename I> struct NormGradSums {
  R *resultGrad;
  P *scaleGrad;
  I *inputGrad;
};

namespace normsums {

/// Columns of each sum a CUDA thread keeps in registers, and the longest
/// rows the kernel takes: 4 columns of each of up to 1,024 threads, whose 64
/// registers a thread hold their 12 sums without spilling (nvcc 13, sm_90:
/// 32 to 62 registers, f64 included), where 8 columns took up to 166
/// registers and halved the blocks an SM holds.
constexpr int64_t kPerThread = 4;
constexpr int64_t kMaxSize = kPerThread * 1024;
/// Slots of partial sums per block: one per kind of sum.
constexpr int64_t kKinds = 3;
/// At most this many blocks (about four on each SM of an H100): fewer
/// blocks write fewer partial sums, more hide more of each row's latency.
constexpr int64_t kMaxBlocks = 512;
/// The bytes of partial sums there is room for (Kernels.cuh's
/// reducePartials).
constexpr int64_t kPartialBytes = int64_t(8) << 20;

/// Threads of a block for rows of `size` elements (with sums or without:
/// the two kernels then compute dx alike).
constexpr int64_t threads(int64_t size) {
  return size <= kPerThread * 256 ? 256 : size <= kPerThread * 512 ? 512 : 1024;
}

/// Rows each block takes, for `outer` rows of `size` elements with partial
/// sums of `accumulatorBytes` each.
constexpr int64_t rowsPerBlock(int64_t outer, int64_t size, int64_t accumulatorBytes) {
  int64_t blocks = kPartialBytes / accumulatorBytes / (kKinds * (size > 0 ? size : 1));
  blocks = blocks < kMaxBlocks ? blocks : kMaxBlocks;
  blocks = blocks > 1 ? blocks : 1;
  int64_t rows = (outer + blocks - 1) / blocks;
  return rows > 1 ? rows : 1;
}

/// The blocks that take them.
constexpr int64_t blocks(int64_t outer, int64_t size, int64_t accumulatorBytes) {
  int64_t rows = rowsPerBlock(outer, size, accumulatorBytes);
  return (outer + rows - 1) / rows;
}

} // namespace normsums
} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_NORMSUMS_H
