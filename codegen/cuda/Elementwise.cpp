//===- Elementwise.cpp - fused elementwise kernels for CUDA ---------------===//
//
// A fusion group becomes one __global__ kernel over its collapsed loop nest
// (Fusion.h's collapse, as on CPUs): a grid-stride loop in which each
// thread takes V consecutive elements of the innermost loop, reads every
// dense input with one vector load (Kernels.cuh's Pack), broadcast inputs
// once, computes the chain in registers (bf16 in float, rounded once per
// op) and writes each output with one vector store. V is 4 when the
// innermost loop is a multiple of 4 (arena buffers are 64-byte aligned, so
// the accesses are too), else 1. The launch names the group's nodes and is
// spelt PPCRT_LAUNCH (Kernels.cuh), so the CUDA emulator runs it too. A
// group ending in a reduction is a functor the library's reduction kernels
// read their elements through (Kernels.cuh's reduceWith). A batch of alike
// groups is one kernel over a table with a row per group, passed by value
// (__grid_constant__, read in place) in launches of at most 4 KB of
// parameters: each block takes 4096 elements of one group, found from the
// rows' first blocks.
//
//===----------------------------------------------------------------------===//

#include "codegen/FusedKernel.h"

#include "ir/PpcOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc::codegen {

/// The loop coordinates c0, c1, ... of the flat element index `flat` in a
/// loop nest of `sizes` (row-major).
static void coordinates(llvm::raw_ostream &os, const std::string &flat,
                        llvm::ArrayRef<int64_t> sizes) {
  os << "    int64_t rest = " << flat << ";\n";
  for (int64_t l = int64_t(sizes.size()) - 1; l >= 0; --l) {
    if (l == 0)
      os << "    const int64_t c0 = rest;\n";
    else
      os << llvm::formatv("    const int64_t c{0} = rest % {1};\n    rest /= {1};\n", l, sizes[l]);
  }
  os << "    (void)rest;\n";
}

/// A group ending in a reduction: a functor computing the reduced value at a
/// flat index of the loop shape (storing the group's other outputs there),
/// handed to Kernels.cuh's reduceWith, which reads every index once.
static LogicalResult emitReductionGroup(const FusionGroup &group, EmitContext &ctx) {
  Operation *reduction = group.reduction;
  auto shape = loopShape(group);
  std::string name = ctx.freshName("fused", group.ops.front());
  LoopNest nest = collapse(shape, group.inputs);
  llvm::raw_ostream &os = ctx.file();
  describeGroup(group, os);
  os << "struct " << name << " {\n";
  for (auto [k, v] : llvm::enumerate(group.inputs))
    os << llvm::formatv("  const {0} *__restrict__ in{1};\n", ctx.elementType(v), k);
  Value result = reduction->getResult(0), reduced = reduction->getOperand(0);
  for (auto [k, v] : llvm::enumerate(group.outputs))
    if (v != result)
      os << llvm::formatv("  {0} *__restrict__ out{1};\n", ctx.elementType(v), k);
  os << llvm::formatv("  __device__ {0} operator()(int64_t flat) const {{\n",
                      registerType(reduced, ctx));
  coordinates(os, "flat", nest.sizes);
  llvm::DenseMap<Value, std::string> reg;
  for (auto [k, v] : llvm::enumerate(group.inputs)) {
    std::string r = "x" + std::to_string(k);
    os << llvm::formatv("    const {0} {1} = {0}(in{2}[{3}]);\n", registerType(v, ctx), r, k,
                        indexExpression(nest.inputStrides[k], "c"));
    reg[v] = r;
  }
  if (failed(emitChain(group, ctx, os, reg, "    ")))
    return failure();
  for (auto [k, v] : llvm::enumerate(group.outputs))
    if (v != result)
      os << llvm::formatv("    out{0}[flat] = {1}({2});\n", k, ctx.elementType(v), reg.lookup(v));
  os << "    return " << reg.lookup(reduced) << ";\n  }\n};\n";

  // The launch: the reduction's collapsed shape and mask, as emitReduce's.
  CollapsedReduction collapsed =
      collapseReduction(shape, reduction->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef());
  llvm::SmallVector<std::string> members;
  for (Value v : group.inputs)
    members.push_back(ctx.ptr(v));
  for (Value v : group.outputs)
    if (v != result)
      members.push_back(ctx.ptr(v));
  std::string out = ctx.ptr(result);
  ctx.body() << llvm::formatv(
      "  ppcrt::cuda::reduceWith<ppcrt::cuda::ReduceKind::{0}>({1}{{{2}}, {3}, {4}, {5}, "
      "{6}u);\n",
      fusableReduction(reduction), name, llvm::join(members, ", "), out, collapsed.sizes.size(),
      collapsed.sizes.empty() ? "{}" : braces(collapsed.sizes), collapsed.mask);
  return success();
}

LogicalResult emitCudaFusedGroup(const FusionGroup &group, EmitContext &ctx) {
  if (group.reduction)
    return emitReductionGroup(group, ctx);
  auto shape = loopShape(group);
  std::string name = ctx.freshName("fused", group.ops.front());
  LoopNest nest = collapse(shape, group.inputs);
  int64_t depth = nest.sizes.size(), total = 1;
  for (int64_t s : nest.sizes)
    total *= s;
  int vector = depth > 0 && nest.sizes.back() % 4 == 0 ? 4 : 1;
  // A log_sum_exp of the rows the group reads its result by
  // (FusionPlan::rowLogSumExpOf): a block per row computes it from the
  // row's source (Kernels.cuh's rowLogSumExp), writes it, and holds it in a
  // register for the row's elements.
  auto sum =
      llvm::dyn_cast_or_null<LogSumExpOp>(ctx.fusion().rowLogSumExpOf.lookup(group.ops.back()));
  Value lse = sum ? sum.getResult() : Value();
  int64_t columns = shape.empty() ? 1 : shape.back();
  if (sum && columns % vector)
    vector = 1;

  llvm::raw_ostream &os = ctx.file();
  describeGroup(group, os);
  os << "__global__ void __launch_bounds__(ppcrt::cuda::kThreads) " << name << "(";
  llvm::SmallVector<std::string> params;
  for (auto [k, v] : llvm::enumerate(group.inputs))
    if (v != lse)
      params.push_back(llvm::formatv("const {0} *__restrict__ in{1}", ctx.elementType(v), k));
  for (auto [k, v] : llvm::enumerate(group.outputs))
    params.push_back(llvm::formatv("{0} *__restrict__ out{1}", ctx.elementType(v), k));
  RowSource source;
  if (sum) {
    source = rowSourceOf(ctx.fusion(), sum.getInput());
    params.push_back(llvm::formatv("const {0} *__restrict__ rows", ctx.elementType(source.value)));
    params.push_back(llvm::formatv("{0} *__restrict__ lse", ctx.elementType(lse)));
  }
  os << llvm::join(params, ", ") << ") {\n";
  if (sum) {
    int64_t rows = total / columns;
    os << llvm::formatv("  for (int64_t r = blockIdx.x; r < {0}; r += gridDim.x) {{\n"
                        "    const {1} rowLse = ppcrt::cuda::rowLogSumExp<{1}>(rows + {2} + r * "
                        "{3}, {4});\n"
                        "    if (threadIdx.x == 0)\n      lse[r] = rowLse;\n",
                        rows, ctx.elementType(lse), source.offset, source.rowStride,
                        shapeOf(sum.getInput()).back());
    os << llvm::formatv("  for (int64_t i = r * {0} + threadIdx.x; i < (r + 1) * {0}; "
                        "i += blockDim.x) {{\n",
                        columns / vector);
  } else {
    os << llvm::formatv("  PPCRT_GRID_STRIDE(i, {0}) {{\n", total / vector);
  }
  // Loop coordinates of element e = i * V (the innermost one a multiple of V).
  coordinates(os, "i * " + std::to_string(vector), nest.sizes);
  auto index = [&](llvm::ArrayRef<int64_t> strides) { return indexExpression(strides, "c"); };
  // Inputs: a vector load where the input is dense along the innermost loop,
  // one scalar (used for every lane) where it broadcasts.
  llvm::SmallVector<bool> perLane;
  for (auto [k, v] : llvm::enumerate(group.inputs)) {
    bool dense = depth > 0 && nest.inputStrides[k].back() == 1;
    perLane.push_back(dense && vector > 1 && v != lse);
    if (v == lse)
      os << llvm::formatv("    const {0} s{1} = {0}(rowLse);\n", registerType(v, ctx), k);
    else if (dense && vector > 1)
      os << llvm::formatv("    const ppcrt::cuda::Pack<{0}, {1}> p{2} = "
                          "*reinterpret_cast<const ppcrt::cuda::Pack<{0}, {1}> *>(in{2} + {3});\n",
                          ctx.elementType(v), vector, k, index(nest.inputStrides[k]));
    else
      os << llvm::formatv("    const {0} s{1} = {0}(in{1}[{2}]);\n", registerType(v, ctx), k,
                          index(nest.inputStrides[k]));
  }
  llvm::SmallVector<int64_t> dense(depth, 1);
  for (int64_t l = depth - 2; l >= 0; --l)
    dense[l] = dense[l + 1] * nest.sizes[l + 1];
  for (auto [k, v] : llvm::enumerate(group.outputs))
    os << llvm::formatv("    ppcrt::cuda::Pack<{0}, {1}> q{2};\n", ctx.elementType(v), vector, k);
  os << llvm::formatv("#pragma unroll\n    for (int lane = 0; lane < {0}; ++lane) {{\n", vector);
  llvm::DenseMap<Value, std::string> reg;
  for (auto [k, v] : llvm::enumerate(group.inputs)) {
    std::string r = "x" + std::to_string(k);
    if (perLane[k])
      os << llvm::formatv("      const {0} {1} = {0}(p{2}.v[lane]);\n", registerType(v, ctx), r, k);
    else
      os << llvm::formatv("      const {0} {1} = s{2};\n", registerType(v, ctx), r, k);
    reg[v] = r;
  }
  if (failed(emitChain(group, ctx, os, reg, "      ")))
    return failure();
  for (auto [k, v] : llvm::enumerate(group.outputs))
    os << llvm::formatv("      q{0}.v[lane] = {1}({2});\n", k, ctx.elementType(v), reg.lookup(v));
  os << "    }\n";
  for (auto [k, v] : llvm::enumerate(group.outputs))
    os << llvm::formatv(
        "    *reinterpret_cast<ppcrt::cuda::Pack<{0}, {1}> *>(out{2} + {3}) = q{2};\n",
        ctx.elementType(v), vector, k, index(dense));
  os << (sum ? "  }\n  }\n}\n" : "  }\n}\n");

  // The launch, at the place of the group's last op.
  llvm::SmallVector<std::string> args;
  for (Value v : group.inputs)
    if (v != lse)
      args.push_back(ctx.ptr(v));
  for (Value v : group.outputs)
    args.push_back(ctx.ptr(v));
  std::string blocks = llvm::formatv("ppcrt::cuda::blocksFor({0})", total / vector);
  if (sum) {
    args.push_back(ctx.ptr(source.value));
    args.push_back(ctx.ptr(lse));
    blocks = llvm::formatv("unsigned({0})", std::min<int64_t>(total / columns, INT32_MAX));
  }
  ctx.body() << llvm::formatv("  PPCRT_LAUNCH({0}, {1}, ppcrt::cuda::kThreads, 0, "
                              "ppcrt::cuda::stream())({2});\n  ppcrt::cuda::launched({3});\n",
                              name, blocks, llvm::join(args, ", "), quote(name));
  return success();
}

/// A batch's kernel up to its row: the description, the row and table
/// types (`capacity` rows), the signature (the table, `params`, the shared
/// inputs), `preamble`, and the row whose blocks block `blockIdx.x` is
/// among, as `g` (a binary search of the rows' first blocks).
static void emitBatchKernelHead(const GroupBatch &batch, llvm::StringRef name, int64_t capacity,
                                llvm::StringRef params, llvm::StringRef preamble,
                                EmitContext &ctx) {
  llvm::raw_ostream &os = ctx.file();
  describeBatch(batch, ctx.fusion(), os);
  emitBatchRow(batch, name, {"int64_t firstBlock"}, ctx);
  os << llvm::formatv("struct {0}_table {{\n  {0}_group g[{1}];\n  int count;\n};\n", name,
                      capacity);
  os << "__global__ void __launch_bounds__(ppcrt::cuda::kThreads) " << name
     << "(const __grid_constant__ " << name << "_table t" << params
     << batchSharedParams(batch, ctx, "__restrict__") << ") {\n"
     << preamble;
  os << "  int lo = 0, hi = t.count - 1;\n"
     << "  while (lo < hi) {\n"
     << "    const int mid = (lo + hi + 1) / 2;\n"
     << "    if (t.g[mid].firstBlock <= int64_t(blockIdx.x))\n"
     << "      lo = mid;\n"
     << "    else\n"
     << "      hi = mid - 1;\n"
     << "  }\n"
     << "  const " << name << "_group &g = t.g[lo];\n";
}

/// A batch of groups each reducing all its elements to one (the gradient
/// norm's sums of squares), storing their other outputs: each block
/// accumulates `perBlock` elements of
/// one row into a partial (Kernels.cuh's reducePartials), and a second
/// kernel, a block per row, combines the row's partials in a fixed tree and
/// writes its result. Deterministic: the chunks and trees do not depend on
/// the schedule.
static LogicalResult emitReductionBatch(const GroupBatch &batch, EmitContext &ctx) {
  const FusionPlan &plan = ctx.fusion();
  const FusionGroup &first = plan.groups[batch.groups.front()];
  Operation *reduction = first.reduction;
  std::string name = ctx.freshName("fused", first.ops.front());
  std::string kind = fusableReduction(reduction).str();
  Value reduced = reduction->getOperand(0), result = reduction->getResult(0);
  int64_t capacity = cudaBatchCapacity(batch, plan);
  std::string acc = llvm::formatv("ppcrt::cuda::ReduceAccumulator<ppcrt::cuda::ReduceKind::{0}, "
                                  "{1}>",
                                  kind, ctx.elementType(result))
                        .str();

  llvm::raw_ostream &os = ctx.file();
  emitBatchKernelHead(batch, name, capacity, ", int64_t perBlock",
                      "  using A = " + acc + ";\n  __shared__ A partial[ppcrt::cuda::kThreads];\n",
                      ctx);
  os << "  const int64_t begin = (int64_t(blockIdx.x) - g.firstBlock) * perBlock;\n"
     << "  const int64_t end = g.n < begin + perBlock ? g.n : begin + perBlock;\n";
  emitRowLocals(batch, ctx, os, "  ", "__restrict__", result);
  os << llvm::formatv("  A acc = ppcrt::cuda::reduceIdentity<ppcrt::cuda::ReduceKind::{0}, A>();\n",
                      kind)
     << "  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {\n";
  llvm::DenseMap<Value, std::string> reg;
  for (auto [k, v] : llvm::enumerate(first.inputs)) {
    std::string r = "x" + std::to_string(k);
    os << llvm::formatv("    const {0} {1} = {0}(in{2}[{3}]);\n", registerType(v, ctx), r, k,
                        batch.scalar[k] ? "0" : "e");
    reg[v] = r;
  }
  if (failed(emitChain(first, ctx, os, reg, "    ")))
    return failure();
  for (auto [k, v] : llvm::enumerate(first.outputs))
    if (v != result)
      os << llvm::formatv("    out{0}[e] = {1}({2});\n", k, ctx.elementType(v), reg.lookup(v));
  os << llvm::formatv("    acc = ppcrt::cuda::reduceCombine<ppcrt::cuda::ReduceKind::{0}, A>(acc, "
                      "A({1}));\n",
                      kind, reg.lookup(reduced))
     << "  }\n"
     << llvm::formatv("  ppcrt::cuda::blockCombine<ppcrt::cuda::ReduceKind::{0}>(partial, acc);\n",
                      kind)
     << "  if (threadIdx.x == 0)\n"
     << "    ppcrt::cuda::partialsOf<A>()[blockIdx.x] = partial[0];\n"
     << "}\n";
  // The combine: block r takes row r's partials.
  os << "__global__ void __launch_bounds__(ppcrt::cuda::kThreads) " << name
     << "_combine(const __grid_constant__ " << name << "_table t, int64_t blocks) {\n"
     << "  using A = " << acc << ";\n"
     << "  __shared__ A partial[ppcrt::cuda::kThreads];\n"
     << "  const " << name << "_group &g = t.g[blockIdx.x];\n"
     << "  const int64_t last = int(blockIdx.x) + 1 < t.count ? t.g[blockIdx.x + 1].firstBlock : "
        "blocks;\n"
     << llvm::formatv("  A acc = ppcrt::cuda::reduceIdentity<ppcrt::cuda::ReduceKind::{0}, A>();\n",
                      kind)
     << "  for (int64_t b = g.firstBlock + threadIdx.x; b < last; b += blockDim.x)\n"
     << llvm::formatv("    acc = ppcrt::cuda::reduceCombine<ppcrt::cuda::ReduceKind::{0}, A>(acc, "
                      "ppcrt::cuda::partialsOf<A>()[b]);\n",
                      kind)
     << llvm::formatv("  ppcrt::cuda::blockCombine<ppcrt::cuda::ReduceKind::{0}>(partial, acc);\n",
                      kind)
     << "  if (threadIdx.x == 0)\n"
     << llvm::formatv("    g.out{0}[0] = ppcrt::cuda::reduceResult<ppcrt::cuda::ReduceKind::{1}, "
                      "{2}>(partial[0], g.n);\n",
                      llvm::find(first.outputs, result) - first.outputs.begin(), kind,
                      ctx.elementType(result))
     << "}\n";

  // The launches: `capacity` rows each; a block takes 4096 elements, more
  // where the partials (2^20) would not hold them all.
  llvm::SmallVector<std::string> shared;
  for (std::string &arg : batchSharedArgs(batch, ctx))
    shared.push_back(", " + arg);
  for (size_t from = 0; from < batch.groups.size(); from += capacity) {
    llvm::ArrayRef<unsigned> rowsOf = llvm::ArrayRef(batch.groups).slice(from).take_front(capacity);
    int64_t elements = 0;
    for (unsigned g : rowsOf)
      elements += groupElements(plan.groups[g]);
    int64_t perBlock = 4096;
    while ((elements + perBlock - 1) / perBlock + int64_t(rowsOf.size()) > (int64_t(1) << 19))
      perBlock *= 2;
    llvm::SmallVector<std::string> rows;
    int64_t blocks = 0;
    for (unsigned g : rowsOf) {
      rows.push_back(batchRow(batch, plan.groups[g], {std::to_string(blocks)}, ctx));
      blocks += (groupElements(plan.groups[g]) + perBlock - 1) / perBlock;
    }
    ctx.body() << "  {\n    const " << name << "_table t = {{\n      "
               << llvm::join(rows, ",\n      ") << "}, " << rows.size() << "};\n"
               << llvm::formatv("    PPCRT_LAUNCH({0}, {1}, ppcrt::cuda::kThreads, 0, "
                                "ppcrt::cuda::stream())(t, int64_t({2}){3});\n",
                                name, blocks, perBlock, llvm::join(shared, ""))
               << "    ppcrt::cuda::launched(" << quote(name) << ");\n"
               << llvm::formatv("    PPCRT_LAUNCH({0}_combine, {1}, ppcrt::cuda::kThreads, 0, "
                                "ppcrt::cuda::stream())(t, int64_t({2}));\n",
                                name, rows.size(), blocks)
               << "    ppcrt::cuda::launched(" << quote(name + "_combine") << ");\n  }\n";
  }
  return success();
}

LogicalResult emitCudaFusedBatch(const GroupBatch &batch, EmitContext &ctx) {
  const FusionPlan &plan = ctx.fusion();
  const FusionGroup &first = plan.groups[batch.groups.front()];
  if (first.reduction)
    return emitReductionBatch(batch, ctx);
  std::string name = ctx.freshName("fused", first.ops.front());
  constexpr int64_t perBlock = 4096;
  int vector =
      llvm::all_of(batch.groups, [&](unsigned g) { return groupElements(plan.groups[g]) % 4 == 0; })
          ? 4
          : 1;
  int64_t capacity = cudaBatchCapacity(batch, plan);

  llvm::raw_ostream &os = ctx.file();
  emitBatchKernelHead(batch, name, capacity, "", "", ctx);
  os << llvm::formatv("  const int64_t begin = (int64_t(blockIdx.x) - g.firstBlock) * {0};\n",
                      perBlock)
     << llvm::formatv("  const int64_t end = g.n < begin + {0} ? g.n : begin + {0};\n", perBlock);
  emitRowLocals(batch, ctx, os, "  ", "__restrict__");
  os << llvm::formatv("  for (int64_t e = begin + int64_t(threadIdx.x) * {0}; e < end; e += "
                      "int64_t(blockDim.x) * {0}) {{\n",
                      vector);
  for (auto [k, v] : llvm::enumerate(first.inputs)) {
    if (batch.scalar[k])
      os << llvm::formatv("    const {0} s{1} = {0}(in{1}[0]);\n", registerType(v, ctx), k);
    else
      os << llvm::formatv("    const ppcrt::cuda::Pack<{0}, {1}> p{2} = "
                          "*reinterpret_cast<const ppcrt::cuda::Pack<{0}, {1}> *>(in{2} + e);\n",
                          ctx.elementType(v), vector, k);
  }
  for (auto [k, v] : llvm::enumerate(first.outputs))
    os << llvm::formatv("    ppcrt::cuda::Pack<{0}, {1}> q{2};\n", ctx.elementType(v), vector, k);
  os << llvm::formatv("#pragma unroll\n    for (int lane = 0; lane < {0}; ++lane) {{\n", vector);
  llvm::DenseMap<Value, std::string> reg;
  for (auto [k, v] : llvm::enumerate(first.inputs)) {
    std::string r = "x" + std::to_string(k);
    if (batch.scalar[k])
      os << llvm::formatv("      const {0} {1} = s{2};\n", registerType(v, ctx), r, k);
    else
      os << llvm::formatv("      const {0} {1} = {0}(p{2}.v[lane]);\n", registerType(v, ctx), r, k);
    reg[v] = r;
  }
  if (failed(emitChain(first, ctx, os, reg, "      ")))
    return failure();
  for (auto [k, v] : llvm::enumerate(first.outputs))
    os << llvm::formatv("      q{0}.v[lane] = {1}({2});\n", k, ctx.elementType(v), reg.lookup(v));
  os << "    }\n";
  for (auto [k, v] : llvm::enumerate(first.outputs))
    os << llvm::formatv(
        "    *reinterpret_cast<ppcrt::cuda::Pack<{0}, {1}> *>(out{2} + e) = q{2};\n",
        ctx.elementType(v), vector, k);
  os << "  }\n}\n";

  // The launches, at the place of the batch's last group: `capacity` rows
  // each, every row's blocks numbered from its launch's first.
  llvm::SmallVector<std::string> shared;
  for (std::string &arg : batchSharedArgs(batch, ctx))
    shared.push_back(", " + arg);
  for (size_t from = 0; from < batch.groups.size(); from += capacity) {
    llvm::SmallVector<std::string> rows;
    int64_t blocks = 0;
    for (unsigned g : llvm::ArrayRef(batch.groups).slice(from).take_front(capacity)) {
      rows.push_back(batchRow(batch, plan.groups[g], {std::to_string(blocks)}, ctx));
      blocks += (groupElements(plan.groups[g]) + perBlock - 1) / perBlock;
    }
    ctx.body() << "  {\n    const " << name << "_table t = {{\n      "
               << llvm::join(rows, ",\n      ") << "}, " << rows.size() << "};\n"
               << llvm::formatv("    PPCRT_LAUNCH({0}, {1}, ppcrt::cuda::kThreads, 0, "
                                "ppcrt::cuda::stream())(t{2});\n",
                                name, blocks, llvm::join(shared, ""))
               << "    ppcrt::cuda::launched(" << quote(name) << ");\n  }\n";
  }
  return success();
}

} // namespace ppc::codegen
