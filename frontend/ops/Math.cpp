//===- Math.cpp - importers of contractions, reductions, softmax ----------===//

#include "frontend/NodeImporter.h"
#include "ir/PpcOps.h"
#include "runtime/Printable.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;

namespace ppc {

/// ONNX MatMul promotes 1-D operands to matrices and drops the added
/// dimension afterwards; ppc.matmul takes rank >= 2 only.
static LogicalResult importMatMul(NodeImporter &n) {
  auto lhs = n.input(0), rhs = n.input(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  auto lt = NodeImporter::typeOf(*lhs), rt = NodeImporter::typeOf(*rhs);
  if (lt.getRank() == 0 || rt.getRank() == 0)
    return n.error("operands must have rank >= 1");
  bool lhsVector = lt.getRank() == 1, rhsVector = rt.getRank() == 1;
  if (lhsVector)
    lhs = n.reshape(*lhs, {1, lt.getDimSize(0)});
  if (rhsVector)
    rhs = n.reshape(*rhs, {rt.getDimSize(0), 1});
  if (failed(lhs) || failed(rhs))
    return failure();
  auto product = n.create<MatMulOp>(*lhs, *rhs);
  if (failed(product) || (!lhsVector && !rhsVector))
    return n.result(product);
  Shape shape(NodeImporter::typeOf(*product).getShape());
  shape.erase(shape.end() - (rhsVector ? 1 : 2));
  if (lhsVector && rhsVector)
    shape.pop_back();
  return n.result(n.reshape(*product, shape));
}

/// Gemm: alpha * A' @ B' + beta * C.
static LogicalResult importGemm(NodeImporter &n) {
  auto a = n.input(0), b = n.input(1);
  if (failed(a) || failed(b))
    return failure();
  for (Value v : {*a, *b})
    if (NodeImporter::typeOf(v).getRank() != 2)
      return n.error("A and B must be matrices");
  if (n.intAttr("transA", 0))
    a = n.create<TransposeOp>(*a, llvm::ArrayRef<int64_t>{1, 0});
  if (n.intAttr("transB", 0))
    b = n.create<TransposeOp>(*b, llvm::ArrayRef<int64_t>{1, 0});
  if (failed(a) || failed(b))
    return failure();
  auto y = n.create<MatMulOp>(*a, *b);
  float alpha = n.floatAttr("alpha", 1.0f), beta = n.floatAttr("beta", 1.0f);
  if (succeeded(y) && alpha != 1.0f)
    y = n.create<MulOp>(*y, n.scalarLike(*y, alpha));
  if (failed(y) || !n.hasInput(2))
    return n.result(y);
  auto c = n.input(2);
  if (succeeded(c) && beta != 1.0f)
    c = n.create<MulOp>(*c, n.scalarLike(*c, beta));
  if (failed(c))
    return failure();
  return n.result(n.create<AddOp>(*y, *c));
}

/// Rewrites an ONNX einsum equation (implicit output, ellipsis) into the
/// explicit letter-only form of ppc.einsum, given the operand ranks.
static FailureOr<std::string> explicitEinsum(NodeImporter &n, std::string equation,
                                             llvm::ArrayRef<int64_t> ranks) {
  llvm::erase_if(equation, [](char c) { return c == ' '; });
  llvm::StringRef eq(equation);
  auto [lhs, rhs] = eq.split("->");
  bool implicit = lhs.size() == eq.size();
  llvm::SmallVector<llvm::StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != ranks.size())
    return n.error("equation '" + printable(equation) + "' has " + llvm::Twine(terms.size()) +
                   " terms for " + llvm::Twine(ranks.size()) + " inputs");
  std::string used;
  for (char c : equation)
    if (llvm::isAlpha(c))
      used += c;
  // Ellipsis dimensions get fresh letters, right-aligned across operands.
  int64_t ellipsisRank = 0;
  for (auto [i, term, rank] : llvm::enumerate(terms, ranks)) {
    int64_t letters = llvm::count_if(term, llvm::isAlpha);
    if (!term.contains("..."))
      continue;
    if (letters > rank)
      return n.error("equation term '" + printable(term) + "' has " + llvm::Twine(letters) +
                     " letters besides its ellipsis, but input " + llvm::Twine(i) + " has rank " +
                     llvm::Twine(rank));
    ellipsisRank = std::max(ellipsisRank, rank - letters);
  }
  std::string fresh;
  for (char c = 'A'; c <= 'z' && static_cast<int64_t>(fresh.size()) < ellipsisRank; ++c)
    if (llvm::isAlpha(c) && used.find(c) == std::string::npos)
      fresh += c;
  auto expand = [&](llvm::StringRef term, int64_t rank) {
    int64_t letters = llvm::count_if(term, llvm::isAlpha);
    auto [before, after] = term.split("...");
    if (before.size() == term.size())
      return term.str();
    int64_t k = rank - letters;
    return before.str() + fresh.substr(ellipsisRank - k) + after.str();
  };
  std::string result;
  std::map<char, int> counts;
  for (auto [i, term] : llvm::enumerate(terms)) {
    std::string t = expand(term, ranks[i]);
    for (char c : t)
      ++counts[c];
    result += (i ? "," : "") + t;
  }
  std::string output;
  if (implicit) {
    output = fresh;
    for (auto [c, count] : counts)
      if (count == 1 && fresh.find(c) == std::string::npos)
        output += c;
  } else {
    output = expand(rhs, ellipsisRank + llvm::count_if(rhs, llvm::isAlpha));
  }
  return result + "->" + output;
}

static LogicalResult importEinsum(NodeImporter &n) {
  llvm::SmallVector<Value> inputs;
  llvm::SmallVector<int64_t> ranks;
  for (int i = 0; i < n.numInputs(); ++i) {
    auto v = n.input(i);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
    ranks.push_back(NodeImporter::typeOf(*v).getRank());
  }
  auto equation = explicitEinsum(n, n.stringAttr("equation", ""), ranks);
  if (failed(equation))
    return failure();
  return n.result(n.create<EinsumOp>(*equation, inputs));
}

/// Reduce ops: axes from an input (ReduceSum from opset 13, the others from
/// 18) or an attribute; empty axes reduce everything unless
/// noop_with_empty_axes.
template <typename OpT> static LogicalResult importReduce(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  int64_t rank = NodeImporter::typeOf(*x).getRank();
  llvm::SmallVector<int64_t> axes;
  if (n.hasInput(1)) {
    auto a = n.intsInput(1);
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    axes = n.intsAttr("axes");
  }
  if (axes.empty()) {
    if (n.intAttr("noop_with_empty_axes", 0)) {
      n.setOutput(0, *x);
      return success();
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes) {
    auto axis = n.normalizeAxis(a, rank);
    if (failed(axis))
      return failure();
    a = *axis;
  }
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return n.error("axes repeat");
  return n.result(n.create<OpT>(*x, axes, n.intAttr("keepdims", 1) != 0));
}

/// From opset 13 softmax runs along one axis (default -1). Before, the input
/// is coerced to 2-D at `axis` (default 1) and normalized over the second
/// dimension: a reshape around a softmax on the flattened trailing part.
template <typename OpT> static LogicalResult importSoftmax(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  auto shape = NodeImporter::typeOf(*x).getShape();
  int64_t rank = shape.size();
  bool coerced = n.opset() < 13;
  auto axis = n.normalizeAxis(n.intAttr("axis", coerced ? 1 : -1), rank);
  if (failed(axis))
    return failure();
  if (!coerced || *axis == rank - 1)
    return n.result(n.create<OpT>(*x, *axis));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < *axis ? outer : inner) *= shape[d];
  auto flat = n.reshape(*x, {outer, inner});
  if (failed(flat))
    return failure();
  auto normalized = n.create<OpT>(*flat, 1);
  if (failed(normalized))
    return failure();
  return n.result(n.reshape(*normalized, shape));
}

void registerMathImporters(OpImporterTable &table) {
  table.add("MatMul", importMatMul, 2, 2);
  table.add("Gemm", importGemm, 2, 3);
  table.add("Einsum", importEinsum, 1, INT32_MAX);
  table.add("ReduceSum", importReduce<ReduceSumOp>, 1, 2);
  table.add("ReduceMean", importReduce<ReduceMeanOp>, 1, 2);
  table.add("ReduceMax", importReduce<ReduceMaxOp>, 1, 2);
  table.add("ReduceMin", importReduce<ReduceMinOp>, 1, 2);
  table.add("ReduceProd", importReduce<ReduceProdOp>, 1, 2);
  table.add("Softmax", importSoftmax<SoftmaxOp>, 1, 1);
  table.add("LogSoftmax", importSoftmax<LogSoftmaxOp>, 1, 1);
}

} // namespace ppc
