//===- Emitter.cpp - the source of a training executable ------------------===//

#include "codegen/Emitter.h"
#include "codegen/EmitContext.h"
#include "codegen/KernelProfile.h"
#include "ir/PpcAttrs.h"
#include "ir/PpcDialect.h"
#include "ir/ShapeRules.h"
#include "passes/Pipelines.h"
#include "runtime/Printable.h"
#include "runtime/ppcrt/AttentionGrad.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdio>

using namespace mlir;

namespace ppc::codegen {

bool undoesItsOperand(TransposeOp transpose) {
  auto inner = transpose.getInput().getDefiningOp<TransposeOp>();
  if (!inner)
    return false;
  ArrayRef<int64_t> outer = transpose.getPerm(), first = inner.getPerm();
  for (auto [d, p] : llvm::enumerate(outer))
    if (first[p] != int64_t(d))
      return false;
  return true;
}

/// Whether `transpose` swaps only the last two dimensions and feeds only
/// GEMMs (and transposes that undo it), which can then read its operand
/// transposed in place.
static bool foldsIntoGemms(TransposeOp transpose) {
  if (!swapsLastTwo(transpose.getPerm()))
    return false;
  Value result = transpose.getResult();
  return !result.use_empty() && llvm::all_of(result.getUsers(), [](Operation *user) {
    auto undo = llvm::dyn_cast<TransposeOp>(user);
    return isa<MatMulOp>(user) || (undo && undoesItsOperand(undo));
  });
}

/// Whether `slice` is the first elements of its operand's buffer: unit
/// steps from 0, every dimension whole but one, and those before it of size
/// 1 (the leading rows of a row-major matrix: the unpadded rows of a
/// gradient computed on a padded vocabulary, ppc-align-gemms).
static bool isLeadingPrefix(SliceOp slice) {
  auto shape = llvm::cast<RankedTensorType>(slice.getInput().getType()).getShape();
  // The first dimension cut short: those before it must be 1, those after whole.
  std::optional<size_t> cut;
  for (auto [d, size] : llvm::enumerate(shape)) {
    if (slice.getStarts()[d] != 0 || slice.getSteps()[d] != 1)
      return false;
    bool whole = slice.getLimits()[d] == size;
    if (cut && !whole)
      return false;
    if (!cut && !whole)
      cut = d;
  }
  for (size_t d = 0; cut && d < *cut; ++d)
    if (shape[d] != 1)
      return false;
  return true;
}

int64_t cudaWorkspaceBytes(Operation *op) {
  auto grad = llvm::dyn_cast<AttentionGradOp>(op);
  if (!grad)
    return 0;
  auto q = llvm::cast<RankedTensorType>(grad.getQ().getType());
  auto k = llvm::cast<RankedTensorType>(grad.getK().getType());
  auto v = llvm::cast<RankedTensorType>(grad.getV().getType());
  if (!q.hasStaticShape() || !k.hasStaticShape() || !v.hasStaticShape() || q.getRank() < 2)
    return 0;
  int64_t rank = q.getRank(), queries = q.getDimSize(rank - 2), headDim = q.getDimSize(rank - 1);
  int64_t keys = k.getDimSize(rank - 2), valueDim = v.getDimSize(rank - 1);
  if (queries <= 0 || headDim <= 0)
    return 0;
  int64_t heads = q.getNumElements() / (queries * headDim);
  if (!ppcrt::attentiongrad::inOneKernel(q.getElementType().isBF16(), grad.getCausal(), heads,
                                         queries, keys, headDim, valueDim))
    return 0;
  return ppcrt::attentiongrad::sumBytes(heads, queries, headDim);
}

/// The layout of `program` with the fusion plan of `options`.
static FailureOr<ProgramLayout> layOut(func::FuncOp program, bool asyncCommunication,
                                       const FusionOptions &options, bool kernelWorkspaces) {
  ProgramLayout layout;
  layout.options = options;
  layout.fusion = planFusion(program, options);
  auto holder = [&](Value v) {
    auto it = layout.holders.find(v);
    return it == layout.holders.end() ? v : it->second;
  };
  layout.strided = planStridedViews(program, layout.fusion);
  for (auto &[value, view] : layout.strided.views)
    layout.holders[value] = view.stored;
  // Whether `v`'s elements lie in row-major order from the start of its
  // buffer: a stored value, or a view of one that keeps that order (a
  // reshape, a transpose undoing a transpose); not a strided view, nor a
  // transpose the GEMMs read transposed.
  auto denseInItsBuffer = [&](Value v) {
    while (!layout.strided.views.count(v)) {
      if (!layout.holders.count(v))
        return true;
      Operation *def = v.getDefiningOp();
      if (llvm::isa_and_nonnull<ReshapeOp, SliceOp>(def)) // (a slice: a prefix view)
        v = def->getOperand(0);
      else if (auto transpose = llvm::dyn_cast_or_null<TransposeOp>(def);
               transpose && undoesItsOperand(transpose))
        v = transpose.getInput().getDefiningOp<TransposeOp>().getInput();
      else
        return false;
    }
    return false;
  };
  for (Operation &op : program.getBody().front()) {
    if (layout.strided.inPlace.count(&op) || layout.fusion.foldedInto.count(&op))
      continue;
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(op))
      layout.holders[reshape.getResult()] = holder(reshape.getInput());
    // A prefix view keeps its operand's whole buffer for as long as the
    // slice is read: only where nothing else reads the operand and the slice
    // is most of it (not one gradient of a flattened all-reduce bucket).
    if (auto slice = llvm::dyn_cast<SliceOp>(op);
        slice && isLeadingPrefix(slice) && slice.getInput().hasOneUse() &&
        2 * numElements(shapeOf(slice.getResult())) >= numElements(shapeOf(slice.getInput())) &&
        denseInItsBuffer(slice.getInput()))
      layout.holders[slice.getResult()] = holder(slice.getInput());
    // An axis-0 concat's first operand (the bf16 copy of an embedding padded
    // to the aligned vocabulary: ppc-align-gemms) written by the op that
    // computes it where the concat puts it, the concat copying the rest; its
    // other readers (the embedding's gather) read it there. Not an operand
    // that a view op computes (whose "view" would then write nothing), nor
    // one under half the concat (a gradient bucket's first gradient, whose
    // bucket would live from it on).
    if (auto concat = llvm::dyn_cast<ConcatOp>(op)) {
      Value first = concat.getInputs().front(), result = concat.getResult();
      Operation *def = first.getDefiningOp();
      if (llvm::all_of(shapeOf(result).take_front(concat.getAxis()),
                       [](int64_t d) { return d == 1; }) &&
          def && !llvm::isa<ConstantOp, ReshapeOp, TransposeOp, SliceOp>(def) &&
          2 * numElements(shapeOf(first)) >= numElements(shapeOf(result)) &&
          !layout.holders.count(first) && !layout.holders.count(result) &&
          !layout.strided.views.count(first) && !layout.strided.views.count(result) &&
          !layout.fusion.unstored(first) && onHost(first) == onHost(result))
        layout.holders[first] = result;
    }
    if (auto transpose = llvm::dyn_cast<TransposeOp>(op)) {
      if (undoesItsOperand(transpose))
        layout.holders[transpose.getResult()] =
            holder(transpose.getInput().getDefiningOp<TransposeOp>().getInput());
      else if (foldsIntoGemms(transpose))
        layout.holders[transpose.getResult()] = holder(transpose.getInput());
    }
  }
  // A view's holder is a buffer, never another view (a strided view may be
  // held by a reshape's result the loop above made a view afterwards).
  for (auto &[value, held] : layout.holders)
    while (layout.holders.count(held) && layout.holders.lookup(held) != held)
      held = layout.holders.lookup(held);
  for (auto &[value, view] : layout.strided.views)
    view.stored = holder(view.stored);
  // function_ref does not own its callee: the lambdas must outlive `hooks`.
  auto runsAt = [&](Operation *op) { return layout.fusion.runsAt(op); };
  auto unstored = [&](Value v) { return layout.fusion.unstored(v); };
  llvm::DenseMap<Operation *, int64_t> order;
  for (Operation &op : program.getBody().front())
    order[&op] = order.size();
  auto readsUntil = [&](Operation *op) -> Operation * {
    if (!op->hasTrait<CommunicatesTrait>())
      return op;
    // The first op that uses the result (through views too, which the
    // holder map makes uses of the holder), where the program waits.
    Operation *first = op->getBlock()->getTerminator();
    llvm::SmallVector<Value> pending{op->getResult(0)};
    while (!pending.empty()) {
      Value v = pending.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (layout.holders.count(user->getNumResults() ? user->getResult(0) : Value()) &&
            holder(user->getResult(0)) == holder(v)) {
          pending.push_back(user->getResult(0));
          continue;
        }
        Operation *at = layout.fusion.runsAt(user);
        if (order.lookup(at) < order.lookup(first))
          first = at;
      }
    }
    return first;
  };
  StorageHooks hooks;
  hooks.holder = holder;
  hooks.runsAt = runsAt;
  hooks.unstored = unstored;
  if (asyncCommunication)
    hooks.readsUntil = readsUntil;
  if (kernelWorkspaces)
    hooks.workspaceBytes = cudaWorkspaceBytes;
  FailureOr<MemoryPlan> memory = planMemory(program, 64, hooks);
  if (failed(memory))
    return failure();
  layout.memory = std::move(*memory);
  return layout;
}

/// layOutProgram's choice of batches (below), with or without GEMMs that sum
/// their operands (`options.gemmSums`).
static FailureOr<ProgramLayout> layOutBatches(func::FuncOp program, bool asyncCommunication,
                                              FusionOptions options, bool kernelWorkspaces) {
  options.batchOptimizer = true;
  options.batchArgumentGroups = options.batchLargeArgumentGroups = true;
  FailureOr<ProgramLayout> batched = layOut(program, asyncCommunication, options, kernelWorkspaces);
  if (failed(batched) || batched->fusion.batches.empty())
    return batched;
  // A batch keeps its groups' inputs (the gradients) alive until it runs,
  // while their updated values are written: where the optimizer step is
  // the program's peak (small activations, large parameters), that is more
  // memory; an early batch makes its values sooner (a large one, the
  // weights' bf16 copies, all of them from the step's start). The batches
  // stay only where the arena does not grow: all of them, else all but the
  // large early ones, else the optimizer's alone, else the small early ones
  // alone.
  options.batchOptimizer = options.batchArgumentGroups = false;
  options.batchLargeArgumentGroups = false;
  FailureOr<ProgramLayout> apart = layOut(program, asyncCommunication, options, kernelWorkspaces);
  auto grows = [&](const ProgramLayout &layout) {
    return succeeded(apart) && (apart->memory.arenaBytes < layout.memory.arenaBytes ||
                                apart->memory.hostArenaBytes < layout.memory.hostArenaBytes);
  };
  if (!grows(*batched))
    return batched;
  for (auto [optimizer, arguments] : {std::pair{true, true}, {true, false}, {false, true}}) {
    options.batchOptimizer = optimizer;
    options.batchArgumentGroups = arguments;
    FailureOr<ProgramLayout> some = layOut(program, asyncCommunication, options, kernelWorkspaces);
    if (succeeded(some) && !some->fusion.batches.empty() && !grows(*some))
      return some;
  }
  return apart;
}

FailureOr<ProgramLayout> layOutProgram(func::FuncOp program, bool asyncCommunication,
                                       bool gemmEpilogues, bool kernelWorkspaces) {
  FusionOptions options;
  options.gemmEpilogues = options.gemmSums = gemmEpilogues;
  FailureOr<ProgramLayout> chosen =
      layOutBatches(program, asyncCommunication, options, kernelWorkspaces);
  if (failed(chosen) || chosen->fusion.sumsGemm.empty())
    return chosen;
  // A GEMM that writes a sum runs at the sum's place, earlier than its
  // own: its result lives longer. It stays only where the arena does not
  // grow.
  FusionOptions withoutSums = chosen->options;
  withoutSums.gemmSums = false;
  FailureOr<ProgramLayout> without =
      layOut(program, asyncCommunication, withoutSums, kernelWorkspaces);
  if (succeeded(without) && (without->memory.arenaBytes < chosen->memory.arenaBytes ||
                             without->memory.hostArenaBytes < chosen->memory.hostArenaBytes))
    return without;
  return chosen;
}

namespace {

/// One TensorInfo initializer.
FailureOr<std::string> tensorInfo(func::FuncOp fn, unsigned i, bool result, MeshOp mesh,
                                  int64_t offset) {
  Type type = result ? fn.getResultTypes()[i] : fn.getArgumentTypes()[i];
  auto tensor = llvm::cast<RankedTensorType>(type);
  auto dtype = runtimeDType(tensor.getElementType());
  std::string key = programKey(fn, i, result);
  if (failed(dtype) || tensor.getRank() > 8) {
    fn.emitError() << "code generation: '" << printable(key)
                   << "' has a type the runtime cannot hold";
    return failure();
  }
  auto sharding = result ? fn.getResultAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName)
                         : fn.getArgAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName);
  if (sharding && !sharding.getPartialAxes().empty()) {
    fn.emitError() << "code generation: '" << printable(key) << "' is a partial sum between steps";
    return failure();
  }
  llvm::SmallVector<int64_t> shape(tensor.getShape()), global(shape), blocks;
  llvm::SmallVector<std::string> splits;
  for (int64_t d = 0; d < tensor.getRank(); ++d) {
    llvm::SmallVector<StringRef> axes;
    if (sharding)
      for (StringAttr a : sharding.getDimAxes()[d])
        axes.push_back(a.getValue());
    if (!axes.empty())
      global[d] *= *mesh.getGroupSize(axes);
    splits.push_back(quote(llvm::join(axes, ",")));
    blocks.push_back(sharding ? sharding.getBlocks(d) : 1);
  }
  if (shape.empty()) {
    splits.push_back("\"\"");
    shape.push_back(0);
    global.push_back(0);
    blocks.push_back(1);
  }
  bool host = result ? bool(fn.getResultAttr(i, PpcDialect::kPlaceAttrName))
                     : bool(fn.getArgAttr(i, PpcDialect::kPlaceAttrName));
  return llvm::formatv("{{{0}, {1}, {2}, {3}, {4}, {{{5}}, {6}, {7}, {8}}", quote(key), *dtype,
                       tensor.getRank(), braces(shape), braces(global), llvm::join(splits, ", "),
                       braces(blocks), offset, host ? "true" : "false")
      .str();
}

/// A double as C++ source, exactly.
std::string exactText(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

/// Bytes [begin, end) of the device's arena or the host's.
struct Range {
  int64_t begin, end;
  bool host;
  bool overlaps(const Range &other) const {
    return host == other.host && begin < other.end && other.begin < end;
  }
};

/// A communication call or transfer in flight on CUDA: its ticket, what it
/// reads and writes, and whether the compute stream already waits for it
/// (the host may not: a copy to the host is waited for again before the
/// host's ops touch what it writes).
struct InFlight {
  std::string ticket;
  llvm::SmallVector<Range> reads, writes;
  bool deviceWaits = false;
};

bool anyOverlap(ArrayRef<Range> a, ArrayRef<Range> b) {
  return llvm::any_of(a, [&](const Range &x) {
    return llvm::any_of(b, [&](const Range &y) { return x.overlaps(y); });
  });
}

/// Whether the host of a CUDA program runs `ops` (offload), else an error
/// at the first it cannot: it has the CPU target's header kernels
/// (CpuKernels.h, which a CUDA program with host ops includes;
/// libppcrt_cpu's GEMMs are not linked), in f32 and f64.
LogicalResult hostCanRun(llvm::ArrayRef<Operation *> ops, EmitContext &ctx) {
  auto low = [](Type type) {
    Type element = getElementTypeOrSelf(type);
    return element.isBF16() || element.isF16();
  };
  for (Operation *op : ops) {
    if (!isElementwise(op) && fusableReduction(op).empty() && !llvm::isa<AllSliceOp>(op))
      return ctx.unsupported(op, "the host of a CUDA program runs elementwise ops, reductions "
                                 "and all_slice only (--offload moves the optimizer step there)");
    if (llvm::any_of(op->getOperandTypes(), low) || llvm::any_of(op->getResultTypes(), low))
      return ctx.unsupported(op, "the host of a CUDA program computes in f32 and f64 only");
  }
  return success();
}

} // namespace

bool ProgramLayout::isView(Operation *op) const {
  if (strided.inPlace.count(op))
    return true;
  if (!llvm::isa<ReshapeOp, TransposeOp, SliceOp>(op))
    return false;
  return holders.count(op->getResult(0)) != 0;
}

FailureOr<std::vector<ProgramLayout>> layOutPrograms(ModuleOp module, Target target) {
  std::vector<ProgramLayout> layouts;
  for (func::FuncOp program : trainingPrograms(module)) {
    bool cuda = target == Target::Cuda;
    FailureOr<ProgramLayout> layout = layOutProgram(program, cuda, cuda, cuda);
    if (failed(layout))
      return failure();
    layouts.push_back(std::move(*layout));
  }
  return layouts;
}

LogicalResult emitSource(ModuleOp module, const ExecutableInfo &info,
                         llvm::ArrayRef<ProgramLayout> layouts, llvm::raw_ostream &os) {
  bool cuda = info.target == Target::Cuda;
  llvm::SmallVector<func::FuncOp> programs = trainingPrograms(module);
  if (programs.empty())
    return module.emitError() << "code generation: the module has no training program";
  assert(layouts.size() == programs.size() && "one layout per training program");
  auto meshes = module.getOps<MeshOp>();
  MeshOp mesh = meshes.empty() ? MeshOp() : *meshes.begin();

  std::string fileText, programText, tableText;
  llvm::raw_string_ostream file(fileText), code(programText), tables(tableText);
  std::vector<std::string> groups;
  EmitContext ctx(file, groups, cuda ? cudaSpelling() : cpuSpelling());
  llvm::SmallVector<std::string> entries, channels;
  // The GPU each kernel's prediction is priced on (--profile's tables).
  std::optional<GpuModel> gpu;
  if (cuda)
    gpu = GpuModel::named(info.predictOn);
  for (auto [p, program] : llvm::enumerate(programs)) {
    const ProgramLayout &layout = layouts[p];
    llvm::DenseMap<Value, int64_t> offsets;
    llvm::DenseMap<Operation *, int64_t> workspaces;
    for (const Buffer &b : layout.memory.buffers)
      if (b.value)
        offsets[b.value] = b.offset;
    for (auto &[op, buffer] : layout.memory.workspaces)
      workspaces[op] = layout.memory.buffers[buffer].offset;
    std::string bodyText;
    llvm::raw_string_ostream body(bodyText);
    ctx.beginProgram(body, layout.holders, offsets, std::move(workspaces), layout.fusion,
                     layout.strided);

    // CUDA: communication runs on its own streams; a kernel that reads what
    // a call in flight writes, or writes what it reads or writes, waits for
    // it first (arena ranges are exact: the plan is static).
    std::vector<InFlight> inFlight;
    auto rangesOf = [&](ValueRange values) {
      llvm::SmallVector<Range> ranges;
      for (Value v : values) {
        // A folded op's result is its kernel's read of the folded operand
        // (and of a folded difference's shift).
        RowSource source = rowSourceOf(layout.fusion, v);
        for (Value read : {source.value, source.shift}) {
          if (!read)
            continue;
          Value h = ctx.holder(read);
          if (layout.fusion.unstored(h) || !offsets.count(h))
            continue;
          auto type = llvm::cast<RankedTensorType>(h.getType());
          int64_t bytes = std::max<int64_t>(
              1, type.getNumElements() * std::max<int64_t>(1, type.getElementTypeBitWidth() / 8));
          ranges.push_back({offsets.lookup(h), offsets.lookup(h) + bytes, onHost(h)});
        }
      }
      return ranges;
    };
    // The device's kernels and copies wait on the compute stream; the
    // host's ops (offload) block the host thread until the call is done.
    auto waitFor = [&](ArrayRef<Range> reads, ArrayRef<Range> writes, bool byHost = false) {
      llvm::erase_if(inFlight, [&](InFlight &call) {
        if ((!byHost && call.deviceWaits) ||
            (!anyOverlap(reads, call.writes) && !anyOverlap(writes, call.writes) &&
             !anyOverlap(writes, call.reads)))
          return false;
        if (byHost) {
          ctx.body() << "  rt.waitOnHost(" << call.ticket << ");\n";
          return true;
        }
        ctx.body() << "  rt.wait(" << call.ticket << ");\n";
        call.deviceWaits = true;
        auto host = [](const Range &r) { return r.host; };
        return !llvm::any_of(call.writes, host) && !llvm::any_of(call.reads, host);
      });
    };

    // --profile: a mark before each kernel, library call and communication
    // call (before the waits it needs, which then count as its time), one
    // at the end, and what each is (KernelInfo).
    llvm::SmallVector<std::string> kernels;
    double predicted = 0;
    auto mark = [&](Operation *op, Operation *named = nullptr) {
      std::optional<KernelEstimate> k = estimateKernel(op, layout, gpu ? &*gpu : nullptr);
      std::string what = k ? k->what : describeOp(op);
      double seconds = k ? k->seconds : 0;
      predicted += seconds;
      ctx.body() << "  rt.mark(" << kernels.size() << ");\n";
      kernels.push_back(llvm::formatv("{{{0}, {1}, {2}, {3}, {4}}", quote(what),
                                      quote(nodeName(named ? named : op)), exactText(seconds),
                                      exactText(k ? k->flops : 0), exactText(k ? k->bytes : 0)));
    };

    double flops = 0;
    for (Operation &op : program.getBody().front()) {
      // (A norm gradient's add and sums run in its kernel, FusionPlan::
      // normGradAdd and normGradSums.)
      // (A log_sum_exp of rows a group reads runs in its kernel, FusionPlan::
      // rowLogSumExpOf.)
      if (llvm::isa<func::ReturnOp>(op) || layout.fusion.inlinedConstants.contains(&op) ||
          layout.fusion.foldedInto.contains(&op) || layout.fusion.normGradOfAdd.contains(&op) ||
          layout.fusion.normGradOfSum.contains(&op) ||
          layout.fusion.rowLogSumExpPlace.contains(&op))
        continue;
      flops += flopsOf(&op); // MFU's numerator
      // A product that writes a sum's result runs at the sum's place.
      if (layout.fusion.sumsOf.contains(&op))
        continue;
      if (Operation *gemm = layout.fusion.sumsGemm.lookup(&op)) {
        if (failed(ctx.target().supports(gemm, ctx)) || failed(ctx.target().supports(&op, ctx)))
          return failure();
        mark(&op, gemm); // named after the product's node
        if (cuda)
          waitFor(rangesOf(gemm->getOperands()),
                  rangesOf(ValueRange{gemm->getResult(0), op.getResult(0)}), /*byHost=*/false);
        if (failed(emitGemm(gemm, ctx, nullptr, &op)))
          return failure();
        continue;
      }
      if (const GemmEpilogue *epilogue = layout.fusion.epilogue(&op)) {
        // The GEMM runs at its last add's place and computes them all.
        if (&op != epilogue->adds.back())
          continue;
        if (failed(ctx.target().supports(epilogue->matmul, ctx)))
          return failure();
        mark(&op, epilogue->matmul); // named after the product's node
        if (cuda)
          waitFor(rangesOf(epilogue->inputs()), rangesOf(epilogue->result()), /*byHost=*/false);
        if (failed(emitGemm(epilogue->matmul, ctx, epilogue)))
          return failure();
        continue;
      }
      if (auto send = llvm::dyn_cast<SendOp>(op))
        channels.push_back(
            llvm::formatv("{{{0}, {1}, {2}}", quote(send.getAxis()), p, send.getPeer()));
      auto group = layout.fusion.groupOf.find(&op);
      if (group != layout.fusion.groupOf.end()) {
        const FusionGroup &fused = layout.fusion.groups[group->second];
        if (&op != fused.ops.back())
          continue;
        if (const GroupBatch *batch = layout.fusion.batch(group->second)) {
          // The batch runs at its last group's place, or an early one at its
          // first's (never the host's).
          if (&op != layout.fusion.place(*batch))
            continue;
          mark(&op);
          if (cuda) {
            llvm::SmallVector<Range> reads, writes;
            for (unsigned g : batch->groups) {
              llvm::append_range(reads, rangesOf(layout.fusion.groups[g].inputs));
              llvm::append_range(writes, rangesOf(layout.fusion.groups[g].outputs));
            }
            waitFor(reads, writes);
          }
          if (failed(ctx.target().fusedBatch(*batch, ctx)))
            return failure();
          continue;
        }
        mark(&op);
        bool byHost = runsOnHost(&op);
        Operation *rowSum = layout.fusion.rowLogSumExpOf.lookup(&op);
        if (cuda) {
          llvm::SmallVector<Value> in(fused.inputs), out(fused.outputs);
          if (rowSum) {
            in.push_back(rowSourceOf(layout.fusion, rowSum->getOperand(0)).value);
            out.push_back(rowSum->getResult(0));
          }
          waitFor(rangesOf(in), rangesOf(out), byHost);
        }
        // CPUs (and the host) compute the log_sum_exp with its own loop first.
        if (rowSum && (!cuda || byHost)) {
          if (cuda && failed(hostCanRun({rowSum}, ctx)))
            return failure();
          const TargetSpelling &device = ctx.spellFor(byHost ? cpuSpelling() : ctx.target());
          LogicalResult emitted = ctx.target().supports(rowSum, ctx);
          if (succeeded(emitted))
            emitted = (*lookupEmitter(rowSum))(rowSum, ctx);
          ctx.spellFor(device);
          if (failed(emitted))
            return failure();
        }
        if (!byHost) {
          if (failed(ctx.target().fusedGroup(fused, ctx)))
            return failure();
          continue;
        }
        // Offload: the host runs the group as the CPU target would.
        if (cuda && failed(hostCanRun(fused.ops, ctx)))
          return failure();
        const TargetSpelling &device = ctx.spellFor(cpuSpelling());
        LogicalResult emitted = ctx.target().fusedGroup(fused, ctx);
        ctx.spellFor(device);
        if (failed(emitted))
          return failure();
        continue;
      }
      // The slices, transposes, reshapes and concats of attention operands
      // read and written in place (StridedViews.h).
      if (layout.strided.inPlace.count(&op))
        continue;
      bool byHost = runsOnHost(&op);
      if (cuda && byHost && failed(hostCanRun({&op}, ctx)))
        return failure();
      const OpEmitter *emitter = lookupEmitter(&op);
      if (!emitter)
        return op.emitError() << "code generation for " << (cuda ? "CUDA" : "the CPU")
                              << " does not support '" << op.getName() << "'";
      // Offload: the host runs it as the CPU target would.
      const TargetSpelling &device = ctx.spellFor(byHost ? cpuSpelling() : ctx.target());
      auto restore = llvm::make_scope_exit([&] { ctx.spellFor(device); });
      if (failed(ctx.target().supports(&op, ctx)))
        return failure();
      if (!layout.isView(&op))
        mark(&op);
      llvm::SmallVector<Range> reads, writes;
      if (cuda && !layout.isView(&op)) {
        llvm::SmallVector<Value> in(op.getOperands()), out(op.getResults());
        if (Value addend = layout.fusion.normGradAddend(&op)) {
          in.push_back(addend);
          out.push_back(layout.fusion.normGradAdd.lookup(&op)->getResult(0));
        }
        for (const NormGradSum &sum : layout.fusion.normGradSums.lookup(&op))
          out.push_back(sum.reduction->getResult(0));
        reads = rangesOf(in);
        writes = rangesOf(out);
        waitFor(reads, writes, byHost);
      }
      if (failed((*emitter)(&op, ctx)))
        return failure();
      std::string ticket = ctx.takeTicket();
      if (!ticket.empty())
        inFlight.push_back({ticket, reads, writes});
    }
    std::string name = program.getSymName().str();
    code << "\n/// @" << name << ": " << layout.memory.numOps << " ops, arena of "
         << layout.memory.arenaBytes << " bytes (peak " << layout.memory.peakBytes << ").\n"
         << "static void run_" << name << "(ppcrt::Rank &rt, char *arena, char *hostArena) {\n"
         << "  (void)rt;\n"
         << "  (void)hostArena;\n"
         << bodyText << "  rt.mark(" << kernels.size() << ");\n"
         << (inFlight.empty() ? "" : "  // The calls still in flight end with the step.\n")
         << "}\n";

    // What the program takes and returns, and where.
    auto returnOp = llvm::cast<func::ReturnOp>(program.getBody().front().getTerminator());
    tables << "\nstatic const ppcrt::TensorInfo args_" << name << "[] = {\n";
    for (unsigned i = 0; i < program.getNumArguments(); ++i) {
      auto entry = tensorInfo(program, i, false, mesh, offsets.lookup(program.getArgument(i)));
      if (failed(entry))
        return failure();
      tables << "    " << *entry << ",\n";
    }
    tables << "};\nstatic const ppcrt::TensorInfo results_" << name << "[] = {\n";
    for (unsigned i = 0; i < program.getNumResults(); ++i) {
      Value v = returnOp.getOperand(i);
      Value h = layout.holders.count(v) ? layout.holders.lookup(v) : v;
      auto entry = tensorInfo(program, i, true, mesh, offsets.lookup(h));
      if (failed(entry))
        return failure();
      tables << "    " << *entry << ",\n";
    }
    tables << "};\n";
    // What runs between the marks; the prediction's total per step.
    tables << "static const ppcrt::KernelInfo kernels_" << name << "[] = {\n";
    for (const std::string &k : kernels)
      tables << "    " << k << ",\n";
    tables << "    {\"\", \"\", 0, 0, 0}};\n";
    if (gpu)
      tables << "// Predicted on one " << gpu->name << ": "
             << llvm::formatv("{0:F3}", predicted * 1e3) << " ms per step.\n";
    entries.push_back(llvm::formatv(
        "{{{0}, run_{1}, {2}, args_{1}, {3}, results_{1}, {4}, {5}, {6}, kernels_{1}, {7}}",
        quote(name), name, layout.memory.arenaBytes, program.getNumArguments(),
        program.getNumResults(), exactText(flops), layout.memory.hostArenaBytes, kernels.size()));
  }

  llvm::SmallVector<std::string> axes, quotedGroups;
  llvm::SmallVector<int64_t> shape;
  if (mesh) {
    for (StringRef a : mesh.getAxisNames())
      axes.push_back(quote(a));
    shape.assign(mesh.getShape().begin(), mesh.getShape().end());
  }
  for (const std::string &g : groups)
    quotedGroups.push_back(quote(g));
  llvm::SmallVector<std::string> tokens;
  for (const std::string &key : info.tokenInputs)
    tokens.push_back(quote(key));
  std::string tokenList = tokens.empty() ? "nullptr" : llvm::join(tokens, ", ");
  while (axes.size() < 3) {
    axes.push_back("nullptr");
    shape.push_back(1);
  }

  // Kernel errors (CUDA): the flag's id names the message.
  std::string errorTable;
  if (cuda) {
    llvm::raw_string_ostream errorsOut(errorTable);
    errorsOut << "\nstatic const char *const kernelErrors[] = {\"\"";
    for (const std::string &message : ctx.kernelErrors())
      errorsOut << ", " << quote(message);
    errorsOut << "};\n"
              << "static const char *kernelError() {\n"
              << "  int flag = 0;\n"
              << "  ppcrt::cuda::check(cudaMemcpyFromSymbol(&flag, ppcrt::cuda::kernelErrorFlag, "
                 "sizeof(flag)), \"reading the kernels' error flag\");\n"
              << "  return flag > 0 && flag < int(sizeof(kernelErrors) / sizeof(*kernelErrors)) "
                 "? kernelErrors[flag] : nullptr;\n"
              << "}\n";
  }
  llvm::SmallVector<std::string> hyperEntries;
  for (const auto &[name, value] : info.hypers) {
    char text[64];
    std::snprintf(text, sizeof(text), "%a", value);
    hyperEntries.push_back("{" + quote(name) + ", " + text + "}");
  }
  std::string hyperList = hyperEntries.empty() ? "{nullptr, 0}" : llvm::join(hyperEntries, ", ");
  std::sort(channels.begin(), channels.end());
  channels.erase(std::unique(channels.begin(), channels.end()), channels.end());

  // Comments hold the model's path printable: a line break in it would end
  // the comment.
  os << "// Generated by ppc from " << printable(info.model) << "; do not edit.\n"
     << "// " << printable(info.description) << "\n\n";
  // A CUDA program whose host runs ops (offload) has the CPU target's
  // header kernels for them.
  bool hostOps = false;
  for (func::FuncOp program : programs)
    program.walk([&](Operation *op) { hostOps |= runsOnHost(op); });
  if (cuda)
    os << "#include \"runtime/ppcrt/cuda/Cuda.h\"\n"
       << "#include \"runtime/ppcrt/cuda/Kernels.cuh\"\n";
  if (!cuda || hostOps)
    os << "#include \"runtime/ppcrt/CpuKernels.h\"\n";
  os << "#include \"runtime/ppcrt/Program.h\"\n"
     << "#include \"runtime/ppcrt/Rank.h\"\n"
     << "#include \"runtime/ppcrt/Scalar.h\"\n\n"
     << "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstring>\n\n"
     << "namespace {\n"
     << fileText << programText << tableText << errorTable
     << "\nstatic const char *const groups[] = {"
     << (quotedGroups.empty() ? "nullptr" : llvm::join(quotedGroups, ", ")) << "};\n"
     << "static const char *const tokenInputs[] = {" << tokenList << "};\n"
     << "static const ppcrt::Hyper hypers[] = {" << hyperList << "};\n"
     << "static const ppcrt::Channel channels[] = {"
     << (channels.empty() ? "{nullptr, 0, 0}" : llvm::join(channels, ", ")) << "};\n"
     << "static const ppcrt::RankProgram programs[] = {\n    " << llvm::join(entries, ",\n    ")
     << "};\n\n"
     // Field by field, so that the generated code does not depend on the
     // order of Program's members.
     << "ppcrt::Program describeProgram() {\n"
     << "  ppcrt::Program p = {};\n"
     << "  p.model = " << quote(info.model) << ";\n"
     << "  p.fingerprint = " << quote(info.fingerprint) << ";\n"
     << "  p.initialWeights = " << quote(info.initialWeights) << ";\n"
     << "  p.meshRank = " << (mesh ? mesh.getShape().size() : 0) << ";\n";
  for (auto [i, axis] : llvm::enumerate(axes))
    os << "  p.meshAxes[" << i << "] = " << axis << ";\n";
  for (auto [i, size] : llvm::enumerate(shape))
    os << "  p.meshShape[" << i << "] = " << size << ";\n";
  os << "  p.groups = groups;\n"
     << "  p.numGroups = " << groups.size() << ";\n"
     << "  p.programs = programs;\n"
     << "  p.numPrograms = " << programs.size() << ";\n"
     << "  p.globalBatch = " << info.globalBatch << ";\n"
     << "  p.seqLen = " << info.seqLen << ";\n"
     << "  p.dataDtype = " << quote(info.dataDtype) << ";\n"
     << "  p.tokenInputs = tokenInputs;\n"
     << "  p.numTokenInputs = " << info.tokenInputs.size() << ";\n"
     << "  p.description = " << quote(info.description) << ";\n"
     << "  p.target = " << (cuda ? "\"cuda\"" : "\"cpu\"") << ";\n"
     << "  p.precision = " << quote(info.precision) << ";\n"
     << "  p.channels = channels;\n"
     << "  p.numChannels = " << channels.size() << ";\n"
     << "  p.kernelError = " << (cuda ? "kernelError" : "nullptr") << ";\n"
     << "  p.hypers = hypers;\n"
     << "  p.numHypers = " << info.hypers.size() << ";\n"
     << "  p.untie = " << (info.untie ? "true" : "false") << ";\n"
     << "  p.predictedOn = " << (gpu ? quote(gpu->name) : std::string("nullptr")) << ";\n"
     << "  return p;\n"
     << "}\n\n"
     << "const ppcrt::Program program = describeProgram();\n"
     << "} // namespace\n\n"
     << "int main(int argc, char **argv) { return ppcrt::" << (cuda ? "cuda::" : "")
     << "main(argc, argv, program); }\n";
  return success();
}

} // namespace ppc::codegen
