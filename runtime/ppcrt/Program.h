//===- Program.h - what a generated executable describes to libppcrt -----===//
//
// Generated code is plain C++17 that includes only the headers of
// runtime/ppcrt/. A compiled training executable is a table of rank
// programs (one per pipeline rank; one in all without pipelining), each a
// function over a static arena plus the tensors it takes and returns, and
// `main` hands that table to ppcrt::main, which does the rest: MPI, the
// command line of DESIGN.md §4, data, checkpoints, metrics.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_PROGRAM_H
#define PPC_RUNTIME_PPCRT_PROGRAM_H

#include "runtime/ppcrt/DType.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ppcrt {

/// The largest tensor rank a program tensor may have.
constexpr int kMaxRank = 8;

/// A strided view, as the data-movement kernels of both targets take it:
/// element c (row-major over `size`) is at sum c[d] * stride[d].
struct Dims {
  int rank;
  int64_t size[kMaxRank];
  int64_t stride[kMaxRank];
};

/// The kinds of TensorInfo::key, each followed by the tensor's name
/// ("param:wte.weight"; a state's name is "KIND:PARAM"), and the step
/// counter's key: what passes/Pipelines.h's programKey writes from the
/// step's argument attributes, and what the runtime and the tools read.
inline constexpr std::string_view kParamKey = "param:", kStateKey = "state:", kInputKey = "input:",
                                  kOutputKey = "output:", kHyperKey = "hyper:", kStepKey = "step";
/// The loss's key.
inline constexpr std::string_view kLossKey = "output:loss";

/// A tensor a rank program takes or returns.
struct TensorInfo {
  /// What it is, as `ppc simulate` keys it: "param:NAME",
  /// "state:KIND:NAME", "input:NAME", "output:NAME" or "step".
  const char *key;
  DType dtype;
  int rank;
  /// The rank's local shape and the global one (local times the blocks of
  /// every sharded dimension).
  int64_t shape[kMaxRank];
  int64_t globalShape[kMaxRank];
  /// Per dimension, the mesh axes it is split over, comma separated, major
  /// first ("" when whole); the rank's block is its position in the group
  /// over those axes.
  const char *sharding[kMaxRank];
  /// Per dimension, the blocks it is viewed as before the split (1: split
  /// contiguously; 3 for a fused QKV weight, each rank holding its part of
  /// every block).
  int64_t blocks[kMaxRank];
  /// Where the program reads or leaves it in the arena.
  int64_t offset;
  /// In the host's arena and memory rather than the device's (--offload).
  bool host = false;
};

class Rank;

/// What a rank program runs between two of its profiling marks
/// (Rank::mark): a kernel, a library call (a GEMM), a collective or a
/// message, as `--profile` reports it.
struct KernelInfo {
  /// The kind and shapes, as `ppc compile --profile-plan` groups kernels
  /// ("matmul 8x1024x768, 768x2304"), and the ONNX node it comes from.
  const char *what;
  const char *node;
  /// The compiler's prediction on Program::predictedOn (0: none), and the
  /// FLOPs and bytes it priced.
  double predictedSeconds;
  double flops, bytes;
};

/// One rank program: `run` executes one training step on `arena` (device
/// memory) and `hostArena` (host memory: what --offload put there), which
/// hold the arguments at their offsets when it starts and the results at
/// theirs when it returns.
struct RankProgram {
  const char *name;
  void (*run)(Rank &rank, char *arena, char *hostArena);
  int64_t arenaBytes;
  const TensorInfo *args;
  int numArgs;
  const TensorInfo *results;
  int numResults;
  /// Floating-point operations of one step in GEMMs (2mnk each), for MFU.
  double gemmFlops = 0;
  /// The host arena's size (0 without --offload).
  int64_t hostArenaBytes = 0;
  /// What `run` does between its marks: mark k starts kernels[k], mark
  /// numKernels ends the step.
  const KernelInfo *kernels = nullptr;
  int numKernels = 0;
};

/// A pipeline channel: messages from the rank at coordinate `from` on mesh
/// axis `axis` to the one at `to` (the other coordinates alike). CUDA gives
/// each its own NCCL communicator and stream, so that a send never waits
/// behind a receive, as MPI's buffered sends never do.
struct Channel {
  const char *axis;
  int64_t from, to;
};

/// A hyper-parameter the programs take as an argument ("hyper:lr"), with the
/// value it was compiled with; the executable's flags override it.
struct Hyper {
  const char *name;
  double value;
};

/// The whole executable.
/// Generated code fills it field by field (describeProgram), so members
/// may be added or reordered without touching the emitter's other output.
struct Program {
  /// The ONNX model it was compiled from, and a fingerprint of what a
  /// checkpoint must match (model, mesh, partitioning).
  const char *model;
  const char *fingerprint;
  /// The file with the initial global parameters (safetensors), relative to
  /// the executable's directory unless absolute.
  const char *initialWeights;
  /// The mesh, axes major to minor (DESIGN.md §3: "pp", "dp", "tp").
  int meshRank;
  const char *meshAxes[3];
  int64_t meshShape[3];
  /// The axis sets collectives run over ("dp", "tp", "dp,tp"), in the order
  /// every rank creates its communicators; collectives name them by index.
  const char *const *groups;
  int numGroups;
  /// Programs by pipeline coordinate.
  const RankProgram *programs;
  int numPrograms;
  /// Training shape and data (DESIGN.md §4).
  int64_t globalBatch;
  int64_t seqLen;
  /// "u8", "u16" or "i32".
  const char *dataDtype;
  /// The integer inputs fed token windows, by key: inputs, then labels.
  const char *const *tokenInputs;
  int numTokenInputs;
  /// The compile command's training flags, for logs and --help.
  const char *description;
  /// "cpu" or "cuda", and what GEMMs compute in ("fp32" or "bf16").
  const char *target = "cpu";
  const char *precision = "fp32";
  /// Every (from, to) pair the programs send along (the CUDA runtime's
  /// channels; the CPU runtime sends on the world communicator).
  const Channel *channels = nullptr;
  int numChannels = 0;
  /// The message of an error the program's kernels flagged on the device in
  /// the step that ended (an index out of range), or null; null for the CPU
  /// target, whose kernels record theirs with ppcrt::kernelFailed (Rank.h).
  const char *(*kernelError)() = nullptr;
  /// The hyper-parameters of the step ("lr", "beta1", ...).
  const Hyper *hypers = nullptr;
  int numHypers = 0;
  /// The GPU the kernels' predictions price ("H100 SXM"; null: none).
  const char *predictedOn = nullptr;
  /// Compiled with --untie: every Identity of a float initializer in the
  /// model is an initializer of its own (trained, or frozen at its value).
  bool untie = false;
};

/// The CPU executable: ppcrt::run on the host (Device.h). Returns the
/// process exit status.
int main(int argc, char **argv, const Program &program);

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_PROGRAM_H
