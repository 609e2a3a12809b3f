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
// read their elements through (Kernels.cuh's reduceWith).
//
//===----------------------------------------------------------------------===//

#include "codegen/EmitContext.h"
#include "codegen/Emitter.h"
#include "codegen/Fusion.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc::codegen {

/// The register type of `value`'s elements: bf16 is computed in float.
static std::string registerType(Value value, EmitContext &ctx) {
  if (getElementTypeOrSelf(value.getType()).isBF16())
    return "float";
  return ctx.elementType(value);
}

static bool isBf16(Value value) { return getElementTypeOrSelf(value.getType()).isBF16(); }

/// The group's elementwise ops (not its reduction) on registers: `reg` maps
/// the inputs to their register names and receives the results'.
static LogicalResult emitChain(const FusionGroup &group, EmitContext &ctx, llvm::raw_ostream &os,
                               llvm::DenseMap<Value, std::string> &reg,
                               llvm::StringRef indent) {
  unsigned temp = 0;
  for (Operation *op : group.ops) {
    if (op == group.reduction)
      break;
    llvm::SmallVector<std::string> args;
    for (Value operand : op->getOperands()) {
      if (auto splat = splatValue(operand)) {
        std::string literal = cppLiteral(*splat, getElementTypeOrSelf(operand.getType()));
        args.push_back(registerType(operand, ctx) + "(" + literal + ")");
      } else {
        args.push_back(reg.lookup(operand));
      }
    }
    Value result = op->getResult(0);
    std::string type = registerType(result, ctx), expr;
    if (llvm::isa<CastOp>(op)) {
      bool toBool = getElementTypeOrSelf(result.getType()).isInteger(1);
      expr = llvm::formatv("ppcrt::scalar::cast<{0}>({1})", toBool ? "bool" : type, args[0]);
    } else {
      llvm::StringRef fn = scalarFunction(op);
      if (fn.empty())
        return ctx.unsupported(op, "no scalar form for " + op->getName().getStringRef());
      expr = ("ppcrt::scalar::" + fn + "(" + llvm::join(args, ", ") + ")").str();
    }
    if (isBf16(result))
      expr = "ppcrt::cuda::roundBf16(" + expr + ")";
    std::string r = "t" + std::to_string(temp++);
    os << indent << llvm::formatv("const {0} {1} = {0}({2});\n", type, r, expr);
    reg[result] = r;
  }
  return success();
}

/// The comment naming a group's ops.
static void describe(const FusionGroup &group, llvm::raw_ostream &os) {
  os << "\n/// Fused:";
  for (Operation *op : group.ops) {
    std::string node = nodeName(op);
    os << " " << op->getName().stripDialect();
    if (!node.empty())
      os << " '" << node << "'";
    os << (op == group.ops.back() ? "" : ",");
  }
  os << ".\n";
}

/// A group ending in a reduction: a functor computing the reduced value at a
/// flat index of the loop shape (storing the group's other outputs there),
/// handed to Kernels.cuh's reduceWith, which reads every index once.
static LogicalResult emitReductionGroup(const FusionGroup &group, EmitContext &ctx) {
  Operation *reduction = group.reduction;
  auto shape = loopShape(group);
  std::string name = ctx.freshName("fused", group.ops.front());
  LoopNest nest = collapse(shape, group.inputs);
  int64_t depth = nest.sizes.size();
  llvm::raw_ostream &os = ctx.file();
  describe(group, os);
  os << "struct " << name << " {\n";
  for (auto [k, v] : llvm::enumerate(group.inputs))
    os << llvm::formatv("  const {0} *__restrict__ in{1};\n", ctx.elementType(v), k);
  Value result = reduction->getResult(0), reduced = reduction->getOperand(0);
  for (auto [k, v] : llvm::enumerate(group.outputs))
    if (v != result)
      os << llvm::formatv("  {0} *__restrict__ out{1};\n", ctx.elementType(v), k);
  os << llvm::formatv("  __device__ {0} operator()(int64_t flat) const {{\n",
                      registerType(reduced, ctx));
  os << "    int64_t rest = flat;\n";
  for (int64_t l = depth - 1; l >= 0; --l) {
    if (l == 0)
      os << "    const int64_t c0 = rest;\n";
    else
      os << llvm::formatv("    const int64_t c{0} = rest % {1};\n    rest /= {1};\n", l,
                          nest.sizes[l]);
  }
  os << "    (void)rest;\n";
  llvm::DenseMap<Value, std::string> reg;
  for (auto [k, v] : llvm::enumerate(group.inputs)) {
    std::string at;
    for (int64_t l = 0; l < depth; ++l)
      if (nest.inputStrides[k][l])
        at += (at.empty() ? "" : " + ") + ("c" + std::to_string(l)) + " * " +
              std::to_string(nest.inputStrides[k][l]);
    std::string r = "x" + std::to_string(k);
    os << llvm::formatv("    const {0} {1} = {0}(in{2}[{3}]);\n", registerType(v, ctx), r, k,
                        at.empty() ? "0" : at);
    reg[v] = r;
  }
  if (failed(emitChain(group, ctx, os, reg, "    ")))
    return failure();
  for (auto [k, v] : llvm::enumerate(group.outputs))
    if (v != result)
      os << llvm::formatv("    out{0}[flat] = {1}({2});\n", k, ctx.elementType(v),
                          reg.lookup(v));
  os << "    return " << reg.lookup(reduced) << ";\n  }\n};\n";

  // The launch: the reduction's collapsed shape and mask, as emitReduce's.
  llvm::SmallVector<bool> isReduced(shape.size(), false);
  for (int64_t axis : reduction->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef())
    isReduced[axis] = true;
  llvm::SmallVector<int64_t> collapsed;
  llvm::SmallVector<bool> kinds;
  for (auto [size, r] : llvm::zip(shape, isReduced)) {
    if (size == 1)
      continue;
    if (!kinds.empty() && kinds.back() == r) {
      collapsed.back() *= size;
      continue;
    }
    collapsed.push_back(size);
    kinds.push_back(r);
  }
  uint32_t mask = 0;
  for (auto [d, r] : llvm::enumerate(kinds))
    mask |= uint32_t(r) << d;
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
      fusableReduction(reduction), name, llvm::join(members, ", "), out, collapsed.size(),
      collapsed.empty() ? "{}" : braces(collapsed), mask);
  return success();
}

LogicalResult emitCudaFusedGroup(const FusionGroup &group, EmitContext &ctx) {
  if (group.reduction)
    return emitReductionGroup(group, ctx);
  Operation *last = group.ops.back();
  auto shape = llvm::cast<RankedTensorType>(last->getResult(0).getType()).getShape();
  std::string name = ctx.freshName("fused", group.ops.front());
  LoopNest nest = collapse(shape, group.inputs);
  int64_t depth = nest.sizes.size(), total = 1;
  for (int64_t s : nest.sizes)
    total *= s;
  int vector = depth > 0 && nest.sizes.back() % 4 == 0 ? 4 : 1;

  llvm::raw_ostream &os = ctx.file();
  describe(group, os);
  os << "__global__ void __launch_bounds__(ppcrt::cuda::kThreads) " << name << "(";
  llvm::SmallVector<std::string> params;
  for (auto [k, v] : llvm::enumerate(group.inputs))
    params.push_back(llvm::formatv("const {0} *__restrict__ in{1}", ctx.elementType(v), k));
  for (auto [k, v] : llvm::enumerate(group.outputs))
    params.push_back(llvm::formatv("{0} *__restrict__ out{1}", ctx.elementType(v), k));
  os << llvm::join(params, ", ") << ") {\n";
  os << llvm::formatv("  PPCRT_GRID_STRIDE(i, {0}) {{\n", total / vector);
  // Loop coordinates of element e = i * V (the innermost one a multiple of V).
  os << llvm::formatv("    int64_t rest = i * {0};\n", vector);
  for (int64_t l = depth - 1; l >= 0; --l) {
    if (l == 0)
      os << "    const int64_t c0 = rest;\n";
    else
      os << llvm::formatv("    const int64_t c{0} = rest % {1};\n    rest /= {1};\n", l,
                          nest.sizes[l]);
  }
  os << "    (void)rest;\n";
  auto index = [&](llvm::ArrayRef<int64_t> strides) {
    std::string expr;
    for (int64_t l = 0; l < depth; ++l) {
      if (strides[l] == 0)
        continue;
      expr += (expr.empty() ? "" : " + ") + ("c" + std::to_string(l)) +
              (strides[l] == 1 ? "" : " * " + std::to_string(strides[l]));
    }
    return expr.empty() ? std::string("0") : expr;
  };
  // Inputs: a vector load where the input is dense along the innermost loop,
  // one scalar (used for every lane) where it broadcasts.
  llvm::SmallVector<bool> perLane;
  for (auto [k, v] : llvm::enumerate(group.inputs)) {
    bool dense = depth > 0 && nest.inputStrides[k].back() == 1;
    perLane.push_back(dense && vector > 1);
    if (dense && vector > 1)
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
      os << llvm::formatv("      const {0} {1} = {0}(p{2}.v[lane]);\n", registerType(v, ctx), r,
                          k);
    else
      os << llvm::formatv("      const {0} {1} = s{2};\n", registerType(v, ctx), r, k);
    reg[v] = r;
  }
  if (failed(emitChain(group, ctx, os, reg, "      ")))
    return failure();
  for (auto [k, v] : llvm::enumerate(group.outputs))
    os << llvm::formatv("      q{0}.v[lane] = {1}({2});\n", k, ctx.elementType(v),
                        reg.lookup(v));
  os << "    }\n";
  for (auto [k, v] : llvm::enumerate(group.outputs))
    os << llvm::formatv("    *reinterpret_cast<ppcrt::cuda::Pack<{0}, {1}> *>(out{2} + {3}) = q{2};\n",
                        ctx.elementType(v), vector, k, index(dense));
  os << "  }\n}\n";

  // The launch, at the place of the group's last op.
  llvm::SmallVector<std::string> args;
  for (Value v : group.inputs)
    args.push_back(ctx.ptr(v));
  for (Value v : group.outputs)
    args.push_back(ctx.ptr(v));
  ctx.body() << llvm::formatv(
      "  PPCRT_LAUNCH({0}, ppcrt::cuda::blocksFor({1}), ppcrt::cuda::kThreads, 0, "
      "ppcrt::cuda::stream())({2});\n  ppcrt::cuda::launched({3});\n",
      name, total / vector, llvm::join(args, ", "), quote(name));
  return success();
}

} // namespace ppc::codegen
