//===- FusedKernel.cpp - what the targets' fused kernels share ------------===//

#include "codegen/FusedKernel.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc::codegen {

/// " add 'node', mul 'other'."
static void listOps(const FusionGroup &group, llvm::raw_ostream &os) {
  for (Operation *op : group.ops) {
    std::string node = nodeName(op);
    os << " " << op->getName().stripDialect();
    if (!node.empty())
      os << " '" << node << "'";
    os << (op == group.ops.back() ? "" : ",");
  }
  os << ".\n";
}

void describeGroup(const FusionGroup &group, llvm::raw_ostream &os) {
  os << "\n/// Fused:";
  listOps(group, os);
}

void describeBatch(const GroupBatch &batch, const FusionPlan &plan, llvm::raw_ostream &os) {
  os << "\n/// " << batch.groups.size() << " groups alike, one kernel; the first:";
  listOps(plan.groups[batch.groups.front()], os);
}

int64_t groupElements(const FusionGroup &group) {
  int64_t n = 1;
  for (int64_t size : loopShape(group))
    n *= size;
  return n;
}

void emitBatchRow(const GroupBatch &batch, llvm::StringRef name, llvm::ArrayRef<std::string> extra,
                  EmitContext &ctx) {
  const FusionGroup &first = ctx.fusion().groups[batch.groups.front()];
  llvm::raw_ostream &os = ctx.file();
  os << "struct " << name << "_group {\n";
  for (auto [k, v] : llvm::enumerate(first.inputs))
    if (!batch.shared[k])
      os << llvm::formatv("  const {0} *in{1};\n", ctx.elementType(v), k);
  for (auto [k, v] : llvm::enumerate(first.outputs))
    os << llvm::formatv("  {0} *out{1};\n", ctx.elementType(v), k);
  os << "  int64_t n;\n";
  for (const std::string &field : extra)
    os << "  " << field << ";\n";
  os << "};\n";
}

std::string batchRow(const GroupBatch &batch, const FusionGroup &group,
                     llvm::ArrayRef<std::string> extra, EmitContext &ctx) {
  llvm::SmallVector<std::string> fields;
  for (auto [k, v] : llvm::enumerate(group.inputs))
    if (!batch.shared[k])
      fields.push_back(ctx.ptr(v));
  for (Value v : group.outputs)
    fields.push_back(ctx.ptr(v));
  fields.push_back(std::to_string(groupElements(group)));
  llvm::append_range(fields, extra);
  return "{" + llvm::join(fields, ", ") + "}";
}

std::string batchSharedParams(const GroupBatch &batch, EmitContext &ctx, llvm::StringRef restrict) {
  std::string params;
  const FusionGroup &first = ctx.fusion().groups[batch.groups.front()];
  for (auto [k, v] : llvm::enumerate(first.inputs))
    if (batch.shared[k])
      params += llvm::formatv(", const {0} *{1} in{2}", ctx.elementType(v), restrict, k).str();
  return params;
}

void emitRowLocals(const GroupBatch &batch, EmitContext &ctx, llvm::raw_ostream &os,
                   llvm::StringRef indent, llvm::StringRef restrict, Value skip) {
  const FusionGroup &first = ctx.fusion().groups[batch.groups.front()];
  for (auto [k, v] : llvm::enumerate(first.inputs))
    if (!batch.shared[k])
      os << indent
         << llvm::formatv("const {0} *{1} in{2} = g.in{2};\n", ctx.elementType(v), restrict, k);
  for (auto [k, v] : llvm::enumerate(first.outputs))
    if (v != skip)
      os << indent
         << llvm::formatv("{0} *{1} out{2} = g.out{2};\n", ctx.elementType(v), restrict, k);
}

llvm::SmallVector<std::string> batchSharedArgs(const GroupBatch &batch, EmitContext &ctx) {
  llvm::SmallVector<std::string> args;
  const FusionGroup &first = ctx.fusion().groups[batch.groups.front()];
  for (auto [k, v] : llvm::enumerate(first.inputs))
    if (batch.shared[k])
      args.push_back(ctx.ptr(v));
  return args;
}

int64_t cudaBatchCapacity(const GroupBatch &batch, const FusionPlan &plan) {
  const FusionGroup &first = plan.groups[batch.groups.front()];
  int64_t shared = llvm::count(batch.shared, true);
  // A row: its pointers, n and firstBlock; the table: the rows and count.
  int64_t row = 8 * (int64_t(first.inputs.size()) - shared + first.outputs.size()) + 16;
  return std::max<int64_t>(1, (4096 - 8 * shared - 8) / row);
}

std::string registerType(Value value, EmitContext &ctx) {
  if (getElementTypeOrSelf(value.getType()).isBF16())
    return "float";
  return ctx.elementType(value);
}

LogicalResult emitChain(const FusionGroup &group, EmitContext &ctx, llvm::raw_ostream &os,
                        llvm::DenseMap<Value, std::string> &reg, llvm::StringRef indent) {
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
    if (getElementTypeOrSelf(result.getType()).isBF16())
      expr = (ctx.kernelLibrary() + "::roundBf16(" + expr + ")").str();
    std::string r = "t" + std::to_string(temp++);
    os << indent << llvm::formatv("const {0} {1} = {0}({2});\n", type, r, expr);
    reg[result] = r;
  }
  return success();
}

std::string indexExpression(llvm::ArrayRef<int64_t> strides, llvm::StringRef var) {
  std::string expr;
  for (auto [l, stride] : llvm::enumerate(strides)) {
    if (stride == 0)
      continue;
    expr += (expr.empty() ? "" : " + ") + (var + llvm::Twine(l)).str() +
            (stride == 1 ? "" : " * " + std::to_string(stride));
  }
  return expr.empty() ? std::string("0") : expr;
}

CollapsedReduction collapseReduction(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> axes) {
  llvm::SmallVector<bool> reduced(shape.size(), false);
  for (int64_t axis : axes)
    reduced[axis] = true;
  CollapsedReduction out;
  llvm::SmallVector<bool> kinds;
  for (auto [size, r] : llvm::zip(shape, reduced)) {
    if (size == 1)
      continue;
    if (!kinds.empty() && kinds.back() == r) {
      out.sizes.back() *= size;
      continue;
    }
    out.sizes.push_back(size);
    kinds.push_back(r);
  }
  for (auto [d, r] : llvm::enumerate(kinds))
    out.mask |= uint32_t(r) << d;
  return out;
}

} // namespace ppc::codegen
