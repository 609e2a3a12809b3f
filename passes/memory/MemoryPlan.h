//===- MemoryPlan.h - liveness-based static memory plan ---------*- C++ -*-===//
//
// The per-rank program is straight-line code over tensors of static shape, so
// its memory can be planned at compile time: every value is a buffer, live
// from the op that defines it to its last use, and buffers live at the same
// time get disjoint ranges of one arena. The liveness is the reference
// executor's own (ExecutionFrame frees a value when its last use takes it),
// so `MemoryPlan::peakBytes` is exactly what `ExecutionFrame::peakBytes`
// measures when the executor stores floats in their declared type.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_MEMORY_MEMORYPLAN_H
#define PPC_PASSES_MEMORY_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <vector>

namespace ppc {

/// The op attribute that tells `classify` what its results hold.
inline constexpr llvm::StringLiteral kMemoryAttrName = "ppc.memory";
/// What `annotateOffsets` writes: on ops, on the function.
inline constexpr llvm::StringLiteral kOffsetAttrName = "ppc.offset";
inline constexpr llvm::StringLiteral kArgOffsetsAttrName = "ppc.arg_offsets";
inline constexpr llvm::StringLiteral kArenaBytesAttrName = "ppc.arena_bytes";
inline constexpr llvm::StringLiteral kWorkspaceOffsetAttrName = "ppc.workspace_offset";

/// What a buffer holds, for reports. A workspace is memory a kernel uses
/// while it runs and no value holds (StorageHooks::workspaceBytes).
enum class BufferKind {
  Parameter,
  Gradient,
  OptimizerState,
  Activation,
  Workspace,
  Communication,
  Input
};

/// "parameters", "gradients", "optimizer state", "activations",
/// "workspace", "communication", "inputs".
llvm::StringRef bufferKindName(BufferKind kind);

/// The kind of the buffer holding `value`:
/// - a block argument of a function by its argument attribute: `ppc.param`
///   is Parameter, `ppc.state` OptimizerState, `ppc.input` and `ppc.step`
///   (and an argument with none of these) Input;
/// - an op result by the op's string attribute `ppc.memory` when it has one
///   ("parameter", "gradient", "optimizer_state", "activation",
///   "communication" or "input"; passes tag the ops whose results they know);
///   otherwise Gradient for a result the training passes marked as the
///   gradient of a parameter (`ppc.mb_grad`, `ppc.step_grad`: Provenance.h),
///   Communication for the results of collectives
///   (`CollectiveTrait`) and of `ppc.recv`, and Activation for the rest.
BufferKind classify(mlir::Value value);

/// One value of the function, or an op's workspace, and where it lives.
struct Buffer {
  /// Null for a workspace (MemoryPlan::workspaces).
  mlir::Value value;
  /// Elements times the declared element type's bytes (i1: 1 byte).
  int64_t bytes;
  /// Live at ops [begin, end] (indices in the block, the terminator last).
  int64_t begin, end;
  BufferKind kind;
  /// Offset in the arena.
  int64_t offset;
  /// In host memory (ppc::onHost: offload), planned in an arena of its own.
  bool host = false;
};

/// How generated code departs from running every op at its place, each
/// value in a buffer of its own; every hook is optional.
struct StorageHooks {
  /// The value whose buffer holds a value (itself by default): generated
  /// code reads a reshape, or a transpose folded into a GEMM, through its
  /// operand's buffer. Such a value gets no bytes and its holder's offset,
  /// and its uses count as uses of the holder; a holder defined after its
  /// view (a kernel writing into the buffer of a later op's result) lives
  /// from the view's definition on.
  llvm::function_ref<mlir::Value(mlir::Value)> holder;
  /// The op at whose place an op runs (itself by default): a fused group of
  /// elementwise ops runs at its last op, so its operands live until then
  /// and its results begin there.
  llvm::function_ref<mlir::Operation *(mlir::Operation *)> runsAt;
  /// Whether a value is never stored (the intermediates of a fused group,
  /// constants inlined into kernels): it gets no bytes.
  llvm::function_ref<bool(mlir::Value)> unstored;
  /// The op until which an op's operands stay in use (itself by default):
  /// on GPUs a collective runs beside the ops after it, reading its operand
  /// until the program waits for it, before the first use of its result.
  llvm::function_ref<mlir::Operation *(mlir::Operation *)> readsUntil;
  /// The bytes of memory an op's kernel uses while it runs, beside its
  /// operands and results (0 by default): a buffer live at the op alone,
  /// of kind Workspace (CUDA attention's backward: its dq sums,
  /// runtime/ppcrt/AttentionGrad.h).
  llvm::function_ref<int64_t(mlir::Operation *)> workspaceBytes;
};

struct MemoryPlan {
  /// The block arguments in order, then each op's results in program order,
  /// then the workspaces.
  std::vector<Buffer> buffers;
  /// The buffer of each op's workspace (an index into `buffers`).
  llvm::DenseMap<mlir::Operation *, unsigned> workspaces;
  /// Ops in the body, the terminator included.
  int64_t numOps = 0;
  /// The liveness peak: the largest sum of the bytes live at one op (exact,
  /// what the executor measures).
  int64_t peakBytes = 0;
  /// The first op index where the peak is reached.
  int64_t peakOp = -1;
  /// The size of the arena the offsets were assigned in (>= peakBytes).
  int64_t arenaBytes = 0;
  /// Bytes of each kind live at the peak.
  std::map<BufferKind, int64_t> atPeak;
  /// Each kind's own maximum over the ops.
  std::map<BufferKind, int64_t> maxByKind;
  /// The same for the values in host memory (offload), which the fields
  /// above leave out: their liveness peak, arena, and bytes by kind at it.
  int64_t hostPeakBytes = 0;
  int64_t hostArenaBytes = 0;
  std::map<BufferKind, int64_t> hostAtPeak;
};

/// Plans the memory of `func`, whose body is one straight-line block (ops
/// are treated generically by their operands and results). Ops are numbered
/// 0..n-1 in the block, the terminator last. A block argument is live from
/// op 0 to its last use (to the end when it has none: the caller holds it;
/// and for parameters and optimizer state, which the executables carry
/// between steps in their arguments' buffers);
/// an op result from its op to its last use (only at its op when it has no
/// use); a value the terminator uses to the end. The bytes live at op k
/// include the operands whose last use is k and all of k's results.
///
/// Offsets: buffers live over the whole function overlap every other one and
/// are stacked at the bottom of the arena; the others are placed above them
/// by decreasing size, each at the lowest offset (a multiple of `alignment`)
/// where it overlaps no placed buffer whose live range meets its own (the
/// greedy heap simulation of TFLite and XLA).
///
/// `hooks` describe how code generation departs from running each op at its
/// place on buffers of its own (see StorageHooks).
///
/// Values in host memory (ppc::onHost, after ppc-offload) are planned the
/// same way in a second arena (`host*` fields); the device fields leave
/// them out.
///
/// Values are sized by boundedTensorBytes (each within kMaxTensorBytes) and
/// summed with overflow checks: a program whose live bytes or arena would
/// not fit in an int64 is an error emitted at `func`.
mlir::FailureOr<MemoryPlan> planMemory(mlir::func::FuncOp func, int64_t alignment = 1,
                                       const StorageHooks &hooks = {});

/// planMemory(func).peakBytes without placing the buffers (liveness alone,
/// linear in the program's size).
mlir::FailureOr<int64_t> peakLiveBytes(mlir::func::FuncOp func);

/// One-screen table: the title line `memory plan: <title>`, one row per kind
/// (bytes at the peak, its own maximum), the peak and its op, the arena and
/// the fragmentation (arena / peak), in KiB/MiB/GiB with the exact bytes.
void printMemoryTable(const MemoryPlan &plan, llvm::StringRef title, llvm::raw_ostream &os);

/// The plan for reports: {"peak_bytes", "arena_bytes", "peak_op", "at_peak":
/// {kind: bytes}, "max_by_kind": {kind: bytes}}, every kind present, keyed by
/// its name with '_' for spaces ("optimizer_state").
llvm::json::Value memoryPlanJson(const MemoryPlan &plan);

/// Records `plan` (made from `func`) in the IR, to read it in IR dumps
/// (code generation takes the offsets from the plan itself):
/// `ppc.offset` (array<i64>, one offset per result) on every op with results,
/// `ppc.workspace_offset` on every op with a workspace, and on the function `ppc.arg_offsets` (one
/// per argument) and `ppc.arena_bytes`.
void annotateOffsets(const MemoryPlan &plan, mlir::func::FuncOp func);

} // namespace ppc

#endif // PPC_PASSES_MEMORY_MEMORYPLAN_H
