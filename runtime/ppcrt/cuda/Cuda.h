//===- Cuda.h - what generated CUDA code calls on the host -------*- C++ -*-===//
//
// The CUDA executable's runtime (libppcrt_cuda): one GPU per rank, a
// compute stream every generated kernel runs on, GEMMs through cuBLASLt,
// and NCCL for communication (NcclRank.h). Plain C++17 with the CUDA
// runtime's header: generated .cu files include it beside Kernels.cuh.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_CUDA_CUDA_H
#define PPC_RUNTIME_PPCRT_CUDA_CUDA_H

#include "runtime/ppcrt/Program.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ppcrt::cuda {

/// The stream the rank's program runs on.
cudaStream_t stream();

/// Ends every rank with `what` and the CUDA error's text unless `status` is
/// cudaSuccess.
void check(cudaError_t status, const char *what);

/// Element types GEMMs take (cuBLASLt's).
enum class GemmType { F32, BF16 };

/// Batched c = op(a) op(b), row-major, with broadcast batch dimensions as
/// ppcrt::cpu::matmul: batch index i (row-major over `batchShape`) reads
/// a at sum(coord * aStrides) matrices and b likewise; c is dense. Inputs
/// of type `inputs`, c of type `output`, accumulation in f32. In the
/// epilogue (cuBLASLt's, rounded once with the product): `bias` (n elements
/// of c's type, or null) is added to every row of every matrix, `addend`
/// (null, or a tensor of c's type and shape: the GEMM's C, beta 1) to c.
/// The sums over k of one operand of one matrix product (no batch), which
/// the GEMM writes as c's type: `aSums`, m elements (op(a)'s rows), or
/// `bSums`, n elements (op(b)'s columns), or neither (null): a bias's
/// gradient, from the product that computes its weight's (cuBLASLt's
/// BGRADB and BGRADA epilogues: its operands are ours swapped). Returns
/// false where it did not write them (cuBLASLt has no algorithm with that
/// epilogue for the call, or a batch): the caller sums them itself.
bool matmul(GemmType inputs, GemmType output, bool transA, bool transB, int batchRank,
            const int64_t *batchShape, const int64_t *aStrides, const int64_t *bStrides, int64_t m,
            int64_t n, int64_t k, const void *a, const void *b, void *c, const void *bias,
            const void *addend, void *aSums, void *bSums, const char *node);

/// A constant (`host`: a static array of the generated program) copied
/// into the arena, on the stream, from a device copy made at its first upload.
void upload(void *device, const void *host, size_t bytes);

/// The CUDA executable: ppcrt::run on this rank's GPU (Device.h). Returns
/// the process exit status.
int main(int argc, char **argv, const Program &program);

} // namespace ppcrt::cuda

#endif // PPC_RUNTIME_PPCRT_CUDA_CUDA_H
