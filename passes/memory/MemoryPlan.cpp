//===- MemoryPlan.cpp - liveness-based static memory plan -----------------===//

#include "passes/memory/MemoryPlan.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/Provenance.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <array>
#include <optional>

using namespace mlir;

namespace ppc {

static constexpr std::array<BufferKind, 7> kAllKinds = {
    BufferKind::Parameter,  BufferKind::Gradient,  BufferKind::OptimizerState,
    BufferKind::Activation, BufferKind::Workspace, BufferKind::Communication,
    BufferKind::Input};

llvm::StringRef bufferKindName(BufferKind kind) {
  switch (kind) {
  case BufferKind::Parameter:
    return "parameters";
  case BufferKind::Gradient:
    return "gradients";
  case BufferKind::OptimizerState:
    return "optimizer state";
  case BufferKind::Activation:
    return "activations";
  case BufferKind::Workspace:
    return "workspace";
  case BufferKind::Communication:
    return "communication";
  case BufferKind::Input:
    return "inputs";
  }
  return "unknown";
}

static std::optional<BufferKind> kindOfTag(llvm::StringRef tag) {
  return llvm::StringSwitch<std::optional<BufferKind>>(tag)
      .Case("parameter", BufferKind::Parameter)
      .Case("gradient", BufferKind::Gradient)
      .Case("optimizer_state", BufferKind::OptimizerState)
      .Case("activation", BufferKind::Activation)
      .Case("communication", BufferKind::Communication)
      .Case("input", BufferKind::Input)
      .Default(std::nullopt);
}

BufferKind classify(Value value) {
  if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
    auto func = llvm::dyn_cast_or_null<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (func && arg.getOwner()->isEntryBlock()) {
      unsigned i = arg.getArgNumber();
      if (func.getArgAttr(i, PpcDialect::kParamAttrName))
        return BufferKind::Parameter;
      if (func.getArgAttr(i, PpcDialect::kStateAttrName))
        return BufferKind::OptimizerState;
    }
    return BufferKind::Input;
  }
  Operation *op = value.getDefiningOp();
  // A copy between host and device memory holds what its operand holds.
  if (auto transfer = llvm::dyn_cast<TransferOp>(op))
    return classify(transfer.getInput());
  if (auto tag = op->getAttrOfType<StringAttr>(kMemoryAttrName))
    if (auto kind = kindOfTag(tag.getValue()))
      return *kind;
  if (gradientOf(value, kMicroBatchGradAttrName) || gradientOf(value, kStepGradAttrName))
    return BufferKind::Gradient;
  if (op->hasTrait<CollectiveTrait>() || llvm::isa<RecvOp>(op))
    return BufferKind::Communication;
  return BufferKind::Activation;
}

/// Adds `bytes` to `total`; false when the sum overflows. Each value is
/// within kMaxTensorBytes, but enough of them live at once could still add
/// up past an int64.
static bool addBytes(int64_t &total, int64_t bytes) {
  std::optional<int64_t> sum = llvm::checkedAdd(total, bytes);
  if (!sum)
    return false;
  total = *sum;
  return true;
}

namespace {

/// The placed buffers by the ops they are live at: a segment tree over op
/// indices whose nodes list the buffers covering their whole range. The
/// buffers meeting a live range [begin, end] are found by visiting the nodes
/// that meet it, O(end - begin + log n) of them, so placing every buffer
/// costs the sum of the live ranges, not the square of the buffer count.
class LiveRangeIndex {
public:
  explicit LiveRangeIndex(int64_t numOps) : size(std::max<int64_t>(numOps, 1)), nodes(4 * size) {}

  void insert(int64_t begin, int64_t end, unsigned id) { insert(1, 0, size - 1, begin, end, id); }

  /// Calls `fn` with every buffer meeting [begin, end], some more than once.
  template <typename Fn> void forEachMeeting(int64_t begin, int64_t end, Fn &&fn) const {
    forEachMeeting(1, 0, size - 1, begin, end, fn);
  }

private:
  void insert(size_t node, int64_t lo, int64_t hi, int64_t begin, int64_t end, unsigned id) {
    if (end < lo || hi < begin)
      return;
    if (begin <= lo && hi <= end) {
      nodes[node].push_back(id);
      return;
    }
    int64_t mid = lo + (hi - lo) / 2;
    insert(2 * node, lo, mid, begin, end, id);
    insert(2 * node + 1, mid + 1, hi, begin, end, id);
  }

  template <typename Fn>
  void forEachMeeting(size_t node, int64_t lo, int64_t hi, int64_t begin, int64_t end,
                      Fn &fn) const {
    if (end < lo || hi < begin)
      return;
    for (unsigned id : nodes[node])
      fn(id);
    if (lo == hi)
      return;
    int64_t mid = lo + (hi - lo) / 2;
    forEachMeeting(2 * node, lo, mid, begin, end, fn);
    forEachMeeting(2 * node + 1, mid + 1, hi, begin, end, fn);
  }

  int64_t size;
  std::vector<std::vector<unsigned>> nodes;
};

} // namespace

/// Gives every buffer of `plan` in one memory (`host` or the device) an
/// offset in that memory's arena and returns its size; none when an offset
/// would overflow an int64.
static std::optional<int64_t> assignOffsets(MemoryPlan &plan, int64_t numOps, int64_t alignment,
                                            bool host) {
  std::vector<Buffer> &buffers = plan.buffers;
  // Bytes are at most kMaxTensorBytes + 1 (boundedTensorBytes): aligning
  // them cannot overflow.
  auto alignedBytes = [&](const Buffer &b) {
    return static_cast<int64_t>(llvm::alignTo(b.bytes, alignment));
  };
  // A buffer live at every op meets every other one: stack those first.
  int64_t base = 0;
  std::vector<unsigned> rest;
  for (auto [id, b] : llvm::enumerate(buffers)) {
    if (b.host != host)
      continue;
    if (b.begin == 0 && b.end == numOps - 1) {
      b.offset = base;
      if (!addBytes(base, alignedBytes(b)))
        return std::nullopt;
    } else {
      rest.push_back(id);
    }
  }
  llvm::stable_sort(rest, [&](unsigned a, unsigned b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].begin < buffers[b].begin;
  });

  int64_t arena = base;
  LiveRangeIndex placed(numOps);
  std::vector<unsigned> seenAt(buffers.size(), ~0u);
  std::vector<unsigned> meeting;
  for (unsigned id : rest) {
    Buffer &b = buffers[id];
    int64_t size = alignedBytes(b);
    if (size == 0) {
      b.offset = base;
      continue;
    }
    meeting.clear();
    placed.forEachMeeting(b.begin, b.end, [&](unsigned other) {
      if (seenAt[other] != id) {
        seenAt[other] = id;
        meeting.push_back(other);
      }
    });
    llvm::sort(meeting,
               [&](unsigned x, unsigned y) { return buffers[x].offset < buffers[y].offset; });
    // First fit: the lowest gap between the meeting buffers that holds it.
    // A placed buffer's end is at most the arena, whose sums were checked.
    int64_t offset = base, end = base;
    if (!addBytes(end, size))
      return std::nullopt;
    for (unsigned other : meeting) {
      const Buffer &o = buffers[other];
      if (o.offset >= end)
        break;
      offset = std::max(offset, o.offset + alignedBytes(o));
      end = offset;
      if (!addBytes(end, size))
        return std::nullopt;
    }
    b.offset = offset;
    arena = std::max(arena, end);
    placed.insert(b.begin, b.end, id);
  }
  return arena;
}

/// planMemory, with the offsets or without (peakLiveBytes).
static FailureOr<MemoryPlan> planBuffers(func::FuncOp func, int64_t alignment,
                                         const StorageHooks &hooks, bool offsets) {
  MemoryPlan plan;
  if (func.isExternal())
    return plan;
  auto overflow = [&]() -> FailureOr<MemoryPlan> {
    return func.emitError() << "memory plan of @" << func.getSymName()
                            << ": the bytes live at once add up to more than an int64 holds";
  };
  alignment = std::max<int64_t>(alignment, 1);
  Block &body = func.getBody().front();
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t numOps = 0;
  for (Operation &op : body)
    index[&op] = numOps++;
  plan.numOps = numOps;
  auto position = [&](Operation *op) { return index[hooks.runsAt ? hooks.runsAt(op) : op]; };

  llvm::DenseMap<Value, unsigned> bufferOf;
  auto add = [&](Value v, int64_t begin) {
    bufferOf[v] = plan.buffers.size();
    plan.buffers.push_back(
        {v, boundedTensorBytes(v.getType()), begin, begin, classify(v), 0, onHost(v)});
  };
  for (BlockArgument arg : body.getArguments())
    add(arg, 0);
  for (Operation &op : body)
    for (Value result : op.getResults())
      add(result, position(&op));
  // The last use ends a value's life; an unused argument lives throughout,
  // and so does carried state (parameters, optimizer state): the
  // executables keep it in its argument's buffer between steps and copy
  // each updated value there at the step's end, so no other value may have
  // that buffer.
  for (Buffer &b : plan.buffers)
    if (llvm::isa<BlockArgument>(b.value) &&
        (b.value.use_empty() || b.kind == BufferKind::Parameter ||
         b.kind == BufferKind::OptimizerState))
      b.end = numOps - 1;
  auto holder = [&](Value v) { return hooks.holder ? hooks.holder(v) : v; };
  for (Buffer &b : plan.buffers)
    if (holder(b.value) != b.value || (hooks.unstored && hooks.unstored(b.value)))
      b.bytes = 0;
  // A view written before its holder (an attention's output written into
  // the tensor a later transpose makes of it) begins the holder's life.
  for (Buffer &b : plan.buffers)
    if (Value h = holder(b.value); h != b.value && bufferOf.count(h)) {
      Buffer &held = plan.buffers[bufferOf[h]];
      held.begin = std::min(held.begin, b.begin);
    }
  for (Operation &op : body) {
    int64_t until = position(hooks.readsUntil ? hooks.readsUntil(&op) : &op);
    for (Value v : op.getOperands()) {
      auto it = bufferOf.find(holder(v));
      if (it != bufferOf.end())
        plan.buffers[it->second].end = std::max(plan.buffers[it->second].end, until);
    }
  }

  // Workspaces: live at their op alone.
  if (hooks.workspaceBytes)
    for (Operation &op : body)
      if (int64_t bytes = hooks.workspaceBytes(&op); bytes > 0) {
        plan.workspaces[&op] = plan.buffers.size();
        plan.buffers.push_back(
            {Value(), bytes, position(&op), position(&op), BufferKind::Workspace, 0, false});
      }

  // Live bytes per op by kind in each memory: +bytes at begin, -bytes
  // after end.
  constexpr size_t numKinds = kAllKinds.size();
  for (bool host : {false, true}) {
    std::vector<std::array<int64_t, numKinds>> delta(numOps + 1);
    for (auto &d : delta)
      d.fill(0);
    for (const Buffer &b : plan.buffers)
      if (b.host == host && (!addBytes(delta[b.begin][static_cast<size_t>(b.kind)], b.bytes) ||
                             !addBytes(delta[b.end + 1][static_cast<size_t>(b.kind)], -b.bytes)))
        return overflow();
    std::array<int64_t, numKinds> live{}, ownMax{}, atPeak{};
    int64_t peak = 0, peakOp = -1;
    for (int64_t k = 0; k < numOps; ++k) {
      int64_t total = 0;
      for (size_t c = 0; c < numKinds; ++c) {
        if (!addBytes(live[c], delta[k][c]) || !addBytes(total, live[c]))
          return overflow();
        ownMax[c] = std::max(ownMax[c], live[c]);
      }
      if (total > peak || peakOp < 0) {
        peak = total;
        peakOp = k;
        atPeak = live;
      }
    }
    for (BufferKind kind : kAllKinds) {
      (host ? plan.hostAtPeak : plan.atPeak)[kind] = atPeak[static_cast<size_t>(kind)];
      if (!host)
        plan.maxByKind[kind] = ownMax[static_cast<size_t>(kind)];
    }
    (host ? plan.hostPeakBytes : plan.peakBytes) = peak;
    if (!host)
      plan.peakOp = peakOp;
  }

  if (!offsets)
    return plan;
  std::optional<int64_t> arena = assignOffsets(plan, numOps, alignment, /*host=*/false);
  std::optional<int64_t> hostArena = assignOffsets(plan, numOps, alignment, /*host=*/true);
  if (!arena || !hostArena)
    return overflow();
  plan.arenaBytes = *arena;
  plan.hostArenaBytes = *hostArena;
  for (Buffer &b : plan.buffers)
    if (Value h = b.value ? holder(b.value) : Value(); h != b.value)
      b.offset = plan.buffers[bufferOf[h]].offset;
  return plan;
}

FailureOr<MemoryPlan> planMemory(func::FuncOp func, int64_t alignment, const StorageHooks &hooks) {
  return planBuffers(func, alignment, hooks, /*offsets=*/true);
}

FailureOr<int64_t> peakLiveBytes(func::FuncOp func) {
  FailureOr<MemoryPlan> live = planBuffers(func, 1, {}, /*offsets=*/false);
  if (failed(live))
    return failure();
  return live->peakBytes;
}

/// "1.50 MiB (1572864 B)"; below a KiB just "812 B".
static std::string humanBytes(int64_t bytes) {
  static constexpr const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return llvm::formatv("{0} B", bytes).str();
  double scaled = bytes;
  int unit = -1;
  while (scaled >= 1024 && unit < 3) {
    scaled /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:F2} {1} ({2} B)", scaled, units[unit], bytes).str();
}

void printMemoryTable(const MemoryPlan &plan, llvm::StringRef title, llvm::raw_ostream &os) {
  os << "memory plan: " << title << "\n";
  os << llvm::formatv("  {0,-17}{1,-30}{2}\n", "kind", "at peak", "own max");
  for (BufferKind kind : kAllKinds)
    os << llvm::formatv("  {0,-17}{1,-30}{2}\n", bufferKindName(kind),
                        humanBytes(plan.atPeak.count(kind) ? plan.atPeak.at(kind) : 0),
                        humanBytes(plan.maxByKind.count(kind) ? plan.maxByKind.at(kind) : 0));
  os << llvm::formatv("  {0,-17}{1} at op {2} of {3}\n", "peak", humanBytes(plan.peakBytes),
                      plan.peakOp, plan.numOps);
  double fragmentation = plan.peakBytes ? double(plan.arenaBytes) / double(plan.peakBytes) : 1.0;
  os << llvm::formatv("  {0,-17}{1}, fragmentation {2:F3}\n", "arena", humanBytes(plan.arenaBytes),
                      fragmentation);
  if (plan.hostPeakBytes == 0)
    return;
  // Offload: the host's memory, by kind at its own peak.
  llvm::SmallVector<std::string> kinds;
  for (BufferKind kind : kAllKinds)
    if (int64_t bytes = plan.hostAtPeak.count(kind) ? plan.hostAtPeak.at(kind) : 0)
      kinds.push_back(llvm::formatv("{0} {1}", bufferKindName(kind), humanBytes(bytes)).str());
  os << llvm::formatv("  {0,-17}{1} at its peak: {2}; arena {3}\n", "host memory",
                      humanBytes(plan.hostPeakBytes), llvm::join(kinds, ", "),
                      humanBytes(plan.hostArenaBytes));
}

llvm::json::Value memoryPlanJson(const MemoryPlan &plan) {
  auto byKind = [](const std::map<BufferKind, int64_t> &bytes) {
    llvm::json::Object object;
    for (BufferKind kind : kAllKinds) {
      std::string key = bufferKindName(kind).str();
      std::replace(key.begin(), key.end(), ' ', '_');
      auto it = bytes.find(kind);
      object[key] = it == bytes.end() ? 0 : it->second;
    }
    return object;
  };
  return llvm::json::Object{{"peak_bytes", plan.peakBytes},
                            {"arena_bytes", plan.arenaBytes},
                            {"peak_op", plan.peakOp},
                            {"at_peak", byKind(plan.atPeak)},
                            {"max_by_kind", byKind(plan.maxByKind)},
                            {"host_peak_bytes", plan.hostPeakBytes},
                            {"host_arena_bytes", plan.hostArenaBytes},
                            {"host_at_peak", byKind(plan.hostAtPeak)}};
}

void annotateOffsets(const MemoryPlan &plan, func::FuncOp func) {
  Builder builder(func.getContext());
  llvm::SmallVector<int64_t> argOffsets(func.getNumArguments(), 0);
  llvm::DenseMap<Operation *, llvm::SmallVector<int64_t>> resultOffsets;
  for (const Buffer &b : plan.buffers) {
    if (!b.value)
      continue; // a workspace (below)
    if (auto arg = llvm::dyn_cast<BlockArgument>(b.value)) {
      argOffsets[arg.getArgNumber()] = b.offset;
      continue;
    }
    auto result = llvm::cast<OpResult>(b.value);
    auto &offsets = resultOffsets[result.getOwner()];
    offsets.resize(result.getOwner()->getNumResults());
    offsets[result.getResultNumber()] = b.offset;
  }
  for (auto &[op, offsets] : resultOffsets)
    op->setAttr(kOffsetAttrName, builder.getDenseI64ArrayAttr(offsets));
  for (auto &[op, buffer] : plan.workspaces)
    op->setAttr(kWorkspaceOffsetAttrName, builder.getI64IntegerAttr(plan.buffers[buffer].offset));
  func->setAttr(kArgOffsetsAttrName, builder.getDenseI64ArrayAttr(argOffsets));
  func->setAttr(kArenaBytesAttrName, builder.getI64IntegerAttr(plan.arenaBytes));
}

} // namespace ppc
