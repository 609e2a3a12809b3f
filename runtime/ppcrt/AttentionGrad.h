//===- AttentionGrad.h - attention's backward in one CUDA kernel ----------===//
//
// The bf16 tensor-core backward of causal attention runs as one kernel
// (cuda/Kernels.cuh, attentionMmaGradKernel), FlashAttention-2's: a block per
// tile of keys computes the tile's dk and dv and, for each tile of queries
// that sees it, that tile's share of dq, which it adds into float sums in
// the arena. The blocks add their shares in a fixed order (a turn per head
// and tile of queries), so dq is the same bits on every run. Codegen plans
// the sums' bytes (the arena's scratch of the op: codegen/Emitter.cpp) and
// prices the kernel (codegen/KernelProfile.cpp); both ask the rule here.
// Elsewhere (f32, f64, non-causal, heads over 64) the backward is two
// kernels, one for dq and one for dk and dv, each computing the scores and
// their gradient again.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_ATTENTIONGRAD_H
#define PPC_RUNTIME_PPCRT_ATTENTIONGRAD_H

#include <cstdint>

namespace ppcrt::attentiongrad {

/// Rows of a tile of keys and of queries.
constexpr int64_t kRows = 64;
/// Turns the kernel's table holds: one per head and tile of queries (4 MiB
/// of the device's static memory).
constexpr int64_t kMaxTurns = int64_t(1) << 20;

/// Tiles of `rows` rows.
constexpr int64_t tiles(int64_t rows) { return (rows + kRows - 1) / kRows; }

/// Whether attention's backward over `heads` heads of `queries` queries and
/// `keys` keys, with head and value sizes `headDim` and `valueDim`, runs as
/// one kernel on tensor cores (where the GPU has them: compute capability
/// 8.0 on): bf16, causal, sizes up to 64, and a turn for each head and tile
/// of queries (a ticket for each of keys).
constexpr bool inOneKernel(bool bf16, bool causal, int64_t heads, int64_t queries, int64_t keys,
                           int64_t headDim, int64_t valueDim) {
  return bf16 && causal && headDim <= 64 && valueDim <= 64 && heads >= 1 && queries >= 1 &&
         keys >= 1 && heads <= kMaxTurns / tiles(queries) && heads <= kMaxTurns / tiles(keys);
}

/// The bytes of its dq sums: float [heads, queries, headDim].
constexpr int64_t sumBytes(int64_t heads, int64_t queries, int64_t headDim) {
  return heads * queries * headDim * int64_t(sizeof(float));
}

} // namespace ppcrt::attentiongrad

#endif // PPC_RUNTIME_PPCRT_ATTENTIONGRAD_H
