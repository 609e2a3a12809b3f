//===- Elementwise.cpp - fused elementwise kernels for the CPU ------------===//
//
// A fusion group becomes one loop nest over its result shape, collapsed to
// as few dimensions as the operands' broadcasting allows, with each operand
// read at a compile-time-constant stride (0 where it broadcasts) and every
// op one call of ppcrt/Scalar.h on registers.
//
//===----------------------------------------------------------------------===//

#include "codegen/Emitter.h"
#include "codegen/EmitContext.h"
#include "codegen/Fusion.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"


using namespace mlir;

namespace ppc::codegen {

LogicalResult emitCpuFusedGroup(const FusionGroup &group, EmitContext &ctx) {
  Operation *last = group.ops.back();
  auto shape = llvm::cast<RankedTensorType>(last->getResult(0).getType()).getShape();
  std::string name = ctx.freshName("fused", group.ops.front());
  LoopNest nest = collapse(shape, group.inputs);
  int64_t total = 1;
  for (int64_t s : nest.sizes)
    total *= s;

  llvm::raw_ostream &os = ctx.file();
  os << "\n/// Fused:";
  for (Operation *op : group.ops) {
    std::string node = nodeName(op);
    os << " " << op->getName().stripDialect();
    if (!node.empty())
      os << " '" << node << "'";
    os << (op == last ? "" : ",");
  }
  os << ".\nstatic void " << name << "(";
  llvm::SmallVector<std::string> params;
  for (auto [k, v] : llvm::enumerate(group.inputs))
    params.push_back(llvm::formatv("const {0} *__restrict in{1}", ctx.elementType(v), k));
  for (auto [k, v] : llvm::enumerate(group.outputs))
    params.push_back(llvm::formatv("{0} *__restrict out{1}", ctx.elementType(v), k));
  os << llvm::join(params, ", ") << ") {\n";

  int64_t depth = nest.sizes.size();
  std::string indent = "  ";
  if (depth > 0 && total >= 32768)
    os << indent << "#pragma omp parallel for if (" << total << " >= 32768)\n";
  for (int64_t l = 0; l < depth; ++l) {
    os << indent << llvm::formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0})\n", l,
                                  nest.sizes[l]);
    indent += "  ";
  }
  os << indent << "{\n";
  std::string inner = indent + "  ";
  auto index = [&](llvm::ArrayRef<int64_t> strides) {
    std::string expr;
    for (int64_t l = 0; l < depth; ++l) {
      if (strides[l] == 0)
        continue;
      expr += (expr.empty() ? "" : " + ") + ("i" + std::to_string(l)) +
              (strides[l] == 1 ? "" : " * " + std::to_string(strides[l]));
    }
    return expr.empty() ? std::string("0") : expr;
  };
  llvm::DenseMap<Value, std::string> reg;
  for (auto [k, v] : llvm::enumerate(group.inputs)) {
    std::string r = "x" + std::to_string(k);
    os << inner << llvm::formatv("const {0} {1} = in{2}[{3}];\n", ctx.elementType(v), r, k,
                                 index(nest.inputStrides[k]));
    reg[v] = r;
  }
  unsigned temp = 0;
  for (Operation *op : group.ops) {
    llvm::SmallVector<std::string> args;
    for (Value operand : op->getOperands()) {
      if (auto splat = splatValue(operand))
        args.push_back(ctx.elementType(operand) + "(" +
                       cppLiteral(*splat, getElementTypeOrSelf(operand.getType())) + ")");
      else
        args.push_back(reg.lookup(operand));
    }
    Value result = op->getResult(0);
    std::string type = ctx.elementType(result), expr;
    if (llvm::isa<CastOp>(op)) {
      bool toBool = llvm::cast<ShapedType>(result.getType()).getElementType().isInteger(1);
      expr = llvm::formatv("ppcrt::scalar::cast<{0}>({1})", toBool ? "bool" : type, args[0]);
    } else {
      llvm::StringRef fn = scalarFunction(op);
      if (fn.empty())
        return ctx.unsupported(op, "no scalar form for " + op->getName().getStringRef());
      expr = ("ppcrt::scalar::" + fn + "(" + llvm::join(args, ", ") + ")").str();
    }
    std::string r = "t" + std::to_string(temp++);
    os << inner << llvm::formatv("const {0} {1} = {0}({2});\n", type, r, expr);
    reg[result] = r;
  }
  llvm::SmallVector<int64_t> dense(depth, 1);
  for (int64_t l = depth - 2; l >= 0; --l)
    dense[l] = dense[l + 1] * nest.sizes[l + 1];
  for (auto [k, v] : llvm::enumerate(group.outputs))
    os << inner << llvm::formatv("out{0}[{1}] = {2};\n", k, index(dense), reg.lookup(v));
  os << indent << "}\n}\n";

  // The call, at the place of the group's last op.
  llvm::SmallVector<std::string> args;
  for (Value v : group.inputs)
    args.push_back(ctx.ptr(v));
  for (Value v : group.outputs)
    args.push_back(ctx.ptr(v));
  ctx.body() << "  " << name << "(" << llvm::join(args, ", ") << ");\n";
  return success();
}

} // namespace ppc::codegen
