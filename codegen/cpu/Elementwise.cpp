//===- Elementwise.cpp - fused elementwise kernels for the CPU ------------===//
//
// A fusion group becomes one loop nest over its result shape, collapsed to
// as few dimensions as the operands' broadcasting allows, with each operand
// read at a compile-time-constant stride (0 where it broadcasts) and every
// op one call of ppcrt/Scalar.h on registers. A batch of alike groups is
// one function over a table with a row per group, whose threads share the
// chunks of every group: one parallel region for the optimizer's update of
// every parameter.
//
//===----------------------------------------------------------------------===//

#include "codegen/EmitContext.h"
#include "codegen/Emitter.h"
#include "codegen/FusedKernel.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc::codegen {

/// The axes a group's reduction reduces, as a mask over the loop shape.
static llvm::SmallVector<bool> reducedAxes(const FusionGroup &group) {
  llvm::SmallVector<bool> reduced(loopShape(group).size(), false);
  if (group.reduction)
    for (int64_t axis : group.reduction->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef())
      reduced[axis] = true;
  return reduced;
}

LogicalResult emitCpuFusedGroup(const FusionGroup &group, EmitContext &ctx) {
  auto shape = loopShape(group);
  std::string name = ctx.freshName("fused", group.ops.front());
  // With a reduction, its accumulator's strides over the loop shape (0 on
  // reduced axes) must collapse with the inputs'.
  llvm::SmallVector<llvm::SmallVector<int64_t>> extra;
  llvm::SmallVector<bool> reduced = reducedAxes(group);
  int64_t accSize = 1, reducedCount = 1;
  if (group.reduction) {
    llvm::SmallVector<int64_t> strides(shape.size(), 0);
    for (int64_t d = shape.size() - 1; d >= 0; --d) {
      if (reduced[d]) {
        reducedCount *= shape[d];
        continue;
      }
      strides[d] = shape[d] == 1 ? 0 : accSize;
      accSize *= shape[d];
    }
    extra.push_back(strides);
  }
  LoopNest nest = collapse(shape, group.inputs, extra);
  int64_t total = 1;
  for (int64_t s : nest.sizes)
    total *= s;

  llvm::raw_ostream &os = ctx.file();
  describeGroup(group, os);
  os << "static void " << name << "(";
  llvm::SmallVector<std::string> params;
  for (auto [k, v] : llvm::enumerate(group.inputs))
    params.push_back(llvm::formatv("const {0} *__restrict in{1}", ctx.elementType(v), k));
  for (auto [k, v] : llvm::enumerate(group.outputs))
    params.push_back(llvm::formatv("{0} *__restrict out{1}", ctx.elementType(v), k));
  os << llvm::join(params, ", ") << ") {\n";

  int64_t depth = nest.sizes.size();
  std::string indent = "  ";
  std::string kind, accType;
  if (group.reduction) {
    // Accumulated in the loop's row-major order, as ppcrt::cpu::reduce does,
    // so the result is the unfused one bit for bit (one thread).
    kind = fusableReduction(group.reduction).str();
    std::string element = ctx.elementType(group.reduction->getOperand(0));
    accType = llvm::formatv("ppcrt::cpu::ReduceAccumulator<ppcrt::cpu::ReduceKind::{0}, {1}>", kind,
                            element)
                  .str();
    os << indent << llvm::formatv("using A = {0};\n", accType) << indent
       << llvm::formatv("std::vector<A> acc({0}, ppcrt::cpu::reduceIdentity<ppcrt::cpu::"
                        "ReduceKind::{1}, A>());\n",
                        accSize, kind);
  }
  // A loop is independent when the group has no reduction or the loop's
  // axis is kept (each iteration has accumulators of its own, each still
  // combined in the loop's order: the same bits on any number of threads).
  // The outermost loop, independent, is shared among the threads from 32768
  // elements (a layer norm's row sums, for one); the innermost says so to
  // the vectorizer, since its pointers are __restrict: GCC vectorized no
  // group with several outputs inside an OpenMP region (the aliasing checks
  // it would version the loop on are too many), GELU's among them.
  auto independent = [&](int64_t l) {
    return !group.reduction || nest.inputStrides[group.inputs.size()][l] != 0;
  };
  bool parallel = depth > 0 && total >= 32768 && independent(0);
  // Where the outermost loop is reduced and the innermost kept (a bias's
  // gradient summed over rows, with the elementwise gradient before it),
  // the threads share the innermost loop instead (ppcrt::cpu::threadShare,
  // in multiples of 16 elements: no two threads write one cache line of
  // the accumulators). Each element still adds every row in order, so the
  // bits are those of one thread.
  bool shareInner = depth > 1 && total >= 32768 && !independent(0) && independent(depth - 1) &&
                    nest.sizes[depth - 1] >= 32;
  std::string close;
  if (shareInner) {
    os << indent << "#pragma omp parallel\n"
       << indent << "{\n"
       << indent
       << llvm::formatv("  const std::pair<int64_t, int64_t> share = "
                        "ppcrt::cpu::threadShare({0}, 16);\n",
                        nest.sizes[depth - 1]);
    close = indent + "}\n";
    indent += "  ";
  }
  for (int64_t l = 0; l < depth; ++l) {
    bool simd = l == depth - 1 && independent(l);
    if (parallel && l == 0)
      os << indent << "#pragma omp parallel for" << (simd ? " simd" : "") << "\n";
    else if (simd)
      os << indent << "#pragma omp simd\n";
    if (shareInner && l == depth - 1)
      os << indent
         << llvm::formatv("for (int64_t i{0} = share.first; i{0} < share.second; ++i{0})\n", l);
    else
      os << indent
         << llvm::formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0})\n", l, nest.sizes[l]);
    indent += "  ";
  }
  os << indent << "{\n";
  std::string inner = indent + "  ";
  auto index = [&](llvm::ArrayRef<int64_t> strides) { return indexExpression(strides, "i"); };
  llvm::DenseMap<Value, std::string> reg;
  for (auto [k, v] : llvm::enumerate(group.inputs)) {
    std::string r = "x" + std::to_string(k);
    os << inner
       << llvm::formatv("const {0} {1} = in{2}[{3}];\n", ctx.elementType(v), r, k,
                        index(nest.inputStrides[k]));
    reg[v] = r;
  }
  if (failed(emitChain(group, ctx, os, reg, inner)))
    return failure();
  llvm::SmallVector<int64_t> dense(depth, 1);
  for (int64_t l = depth - 2; l >= 0; --l)
    dense[l] = dense[l + 1] * nest.sizes[l + 1];
  for (auto [k, v] : llvm::enumerate(group.outputs)) {
    if (group.reduction && v == group.reduction->getResult(0)) {
      std::string at = index(nest.inputStrides[group.inputs.size()]);
      os << inner
         << llvm::formatv("acc[{0}] = ppcrt::cpu::reduceCombine<ppcrt::cpu::ReduceKind::{1}, "
                          "A>(acc[{0}], A({2}));\n",
                          at, kind, reg.lookup(group.reduction->getOperand(0)));
      continue;
    }
    os << inner << llvm::formatv("out{0}[{1}] = {2};\n", k, index(dense), reg.lookup(v));
  }
  os << indent << "}\n";
  os << close;
  if (group.reduction) {
    unsigned k = llvm::find(group.outputs, group.reduction->getResult(0)) - group.outputs.begin();
    std::string type = ctx.elementType(group.reduction->getResult(0));
    std::string value = "acc[j]";
    if (kind == "Mean")
      value = llvm::formatv("(std::is_floating_point_v<A> ? A(acc[j] / A({0})) : "
                            "A(int64_t(acc[j]) / {0}))",
                            reducedCount)
                  .str();
    os << llvm::formatv("  for (int64_t j = 0; j < {0}; ++j)\n    out{1}[j] = {2}({3});\n", accSize,
                        k, type, value);
  }
  os << "}\n";

  // The call, at the place of the group's last op.
  llvm::SmallVector<std::string> args;
  for (Value v : group.inputs)
    args.push_back(ctx.ptr(v));
  for (Value v : group.outputs)
    args.push_back(ctx.ptr(v));
  ctx.body() << "  " << name << "(" << llvm::join(args, ", ") << ");\n";
  return success();
}

/// Registers x0, x1, ... of the first group's inputs at element `i` (0 for
/// one-element inputs) for a batch's loop body.
static void loadRegisters(const GroupBatch &batch, EmitContext &ctx, llvm::raw_ostream &os,
                          llvm::DenseMap<Value, std::string> &reg) {
  const FusionGroup &first = ctx.fusion().groups[batch.groups.front()];
  for (auto [k, v] : llvm::enumerate(first.inputs)) {
    std::string r = "x" + std::to_string(k);
    os << llvm::formatv("      const {0} {1} = in{2}[{3}];\n", ctx.elementType(v), r, k,
                        batch.scalar[k] ? "0" : "i");
    reg[v] = r;
  }
}

/// A batch's call at the place of its last group: its table of rows, then
/// `name(groups, shared inputs...)`.
static void emitBatchCall(const GroupBatch &batch, llvm::StringRef name, EmitContext &ctx) {
  llvm::SmallVector<std::string> rows, args{"groups"};
  for (unsigned g : batch.groups)
    rows.push_back(batchRow(batch, ctx.fusion().groups[g], {}, ctx));
  llvm::append_range(args, batchSharedArgs(batch, ctx));
  ctx.body() << "  {\n    const " << name << "_group groups[] = {\n      "
             << llvm::join(rows, ",\n      ") << "};\n    " << name << "(" << llvm::join(args, ", ")
             << ");\n  }\n";
}

/// A batch of groups each reducing all its elements to one (the gradient
/// norm's sums of squares), storing their other outputs: a thread per group
/// at a time, each accumulating in the loop's order as the group's own
/// kernel does (the same bits).
static LogicalResult emitReductionBatch(const GroupBatch &batch, EmitContext &ctx) {
  const FusionPlan &plan = ctx.fusion();
  const FusionGroup &first = plan.groups[batch.groups.front()];
  Operation *reduction = first.reduction;
  std::string name = ctx.freshName("fused", first.ops.front());
  std::string kind = fusableReduction(reduction).str();
  Value reduced = reduction->getOperand(0), result = reduction->getResult(0);
  llvm::raw_ostream &os = ctx.file();
  describeBatch(batch, plan, os);
  emitBatchRow(batch, name, {}, ctx);
  os << "static void " << name << "(const " << name << "_group *groups"
     << batchSharedParams(batch, ctx, "__restrict") << ") {\n"
     << llvm::formatv("  using A = ppcrt::cpu::ReduceAccumulator<ppcrt::cpu::ReduceKind::{0}, "
                      "{1}>;\n",
                      kind, ctx.elementType(reduced))
     << "#pragma omp parallel for schedule(dynamic, 1)\n"
     << llvm::formatv("  for (int64_t k = 0; k < {0}; ++k) {{\n", batch.groups.size())
     << "    const " << name << "_group &g = groups[k];\n";
  emitRowLocals(batch, ctx, os, "    ", "__restrict", result);
  os << llvm::formatv("    A acc = ppcrt::cpu::reduceIdentity<ppcrt::cpu::ReduceKind::{0}, A>();\n",
                      kind)
     << "    for (int64_t i = 0; i < g.n; ++i) {\n";
  llvm::DenseMap<Value, std::string> reg;
  loadRegisters(batch, ctx, os, reg);
  if (failed(emitChain(first, ctx, os, reg, "      ")))
    return failure();
  for (auto [k, v] : llvm::enumerate(first.outputs))
    if (v != result)
      os << llvm::formatv("      out{0}[i] = {1};\n", k, reg.lookup(v));
  os << llvm::formatv("      acc = ppcrt::cpu::reduceCombine<ppcrt::cpu::ReduceKind::{0}, A>(acc, "
                      "A({1}));\n",
                      kind, reg.lookup(reduced))
     << "    }\n";
  std::string type = ctx.elementType(result);
  std::string value = kind == "Mean" ? "(std::is_floating_point_v<A> ? A(acc / A(g.n)) : "
                                       "A(int64_t(acc) / g.n))"
                                     : "acc";
  unsigned out = llvm::find(first.outputs, result) - first.outputs.begin();
  os << llvm::formatv("    g.out{0}[0] = {1}({2});\n", out, type, value) << "  }\n}\n";

  emitBatchCall(batch, name, ctx);
  return success();
}

LogicalResult emitCpuFusedBatch(const GroupBatch &batch, EmitContext &ctx) {
  const FusionPlan &plan = ctx.fusion();
  const FusionGroup &first = plan.groups[batch.groups.front()];
  if (first.reduction)
    return emitReductionBatch(batch, ctx);
  std::string name = ctx.freshName("fused", first.ops.front());
  // Chunks of `chunk` elements of each group, numbered through the batch.
  constexpr int64_t chunk = 16384;
  llvm::SmallVector<int64_t> starts{0};
  int64_t elements = 0;
  for (unsigned g : batch.groups) {
    int64_t n = groupElements(plan.groups[g]);
    elements += n;
    starts.push_back(starts.back() + (n + chunk - 1) / chunk);
  }
  int64_t count = batch.groups.size(), chunks = starts.back();

  llvm::raw_ostream &os = ctx.file();
  describeBatch(batch, plan, os);
  emitBatchRow(batch, name, {}, ctx);
  os << "static const int64_t " << name << "_chunks[] = " << braces(starts) << ";\n";
  os << "static void " << name << "(const " << name << "_group *groups"
     << batchSharedParams(batch, ctx, "__restrict") << ") {\n";
  // The same bits on any number of threads: each element is computed alone.
  if (elements >= 32768)
    os << "#pragma omp parallel for\n";
  os << llvm::formatv("  for (int64_t c = 0; c < {0}; ++c) {{\n", chunks)
     << llvm::formatv("    const int64_t k = std::upper_bound({0}_chunks, {0}_chunks + {1}, c) - "
                      "{0}_chunks - 1;\n",
                      name, count + 1)
     << "    const " << name << "_group &g = groups[k];\n"
     << llvm::formatv("    const int64_t begin = (c - {0}_chunks[k]) * {1}, end = "
                      "std::min(g.n, begin + {1});\n",
                      name, chunk);
  emitRowLocals(batch, ctx, os, "    ", "__restrict");
  os << "#pragma omp simd\n    for (int64_t i = begin; i < end; ++i) {\n";
  llvm::DenseMap<Value, std::string> reg;
  loadRegisters(batch, ctx, os, reg);
  if (failed(emitChain(first, ctx, os, reg, "      ")))
    return failure();
  for (auto [k, v] : llvm::enumerate(first.outputs))
    os << llvm::formatv("      out{0}[i] = {1};\n", k, reg.lookup(v));
  os << "    }\n  }\n}\n";

  emitBatchCall(batch, name, ctx);
  return success();
}

} // namespace ppc::codegen
