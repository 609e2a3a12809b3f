//===- ShapeRules.cpp - shape arithmetic ----------------------------------===//

#include "ir/ShapeRules.h"
#include "runtime/Printable.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>

using namespace mlir;

namespace ppc {

static std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool swapsLastTwo(llvm::ArrayRef<int64_t> perm) {
  int64_t rank = perm.size();
  if (rank < 2 || perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return false;
  for (int64_t d = 0; d + 2 < rank; ++d)
    if (perm[d] != d)
      return false;
  return true;
}

FailureOr<Shape> broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes, ErrorFn error) {
  size_t rank = 0;
  for (auto s : shapes)
    rank = std::max(rank, s.size());
  Shape result(rank, 1);
  for (auto s : shapes) {
    size_t offset = rank - s.size();
    for (auto [i, d] : llvm::enumerate(s)) {
      int64_t &r = result[offset + i];
      if (d == r || d == 1)
        continue;
      if (r != 1) {
        std::string all;
        for (auto t : shapes)
          all += (all.empty() ? "" : " and ") + shapeStr(t);
        error("shapes " + all + " do not broadcast");
        return failure();
      }
      r = d;
    }
  }
  return result;
}

bool broadcastsTo(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  for (auto [i, d] : llvm::enumerate(from))
    if (d != 1 && d != to[offset + i])
      return false;
  return true;
}

FailureOr<Shape> matmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                             ErrorFn error) {
  if (lhs.size() < 2 || rhs.size() < 2) {
    error("matmul operands need rank >= 2, got " + shapeStr(lhs) + " and " + shapeStr(rhs));
    return failure();
  }
  int64_t k1 = lhs.back(), k2 = rhs[rhs.size() - 2];
  if (k1 != k2) {
    error("matmul contraction sizes differ: " + shapeStr(lhs) + " @ " + shapeStr(rhs));
    return failure();
  }
  auto batch = broadcastShapes({lhs.drop_back(2), rhs.drop_back(2)}, error);
  if (failed(batch))
    return failure();
  Shape result = *batch;
  result.push_back(lhs[lhs.size() - 2]);
  result.push_back(rhs.back());
  return result;
}

FailureOr<Shape> reduceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> axes,
                             bool keepdims, ErrorFn error) {
  int64_t rank = input.size();
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= rank || (i > 0 && axes[i - 1] >= a)) {
      error("reduction axes must be sorted, unique and in [0, " + llvm::Twine(rank) + "), got " +
            shapeStr(axes));
      return failure();
    }
  }
  Shape result;
  for (int64_t d = 0; d < rank; ++d) {
    if (!llvm::is_contained(axes, d))
      result.push_back(input[d]);
    else if (keepdims)
      result.push_back(1);
  }
  return result;
}

FailureOr<int64_t> sliceSize(int64_t dim, int64_t start, int64_t limit, int64_t step,
                             ErrorFn error) {
  if (step == 0) {
    error("slice step must be non-zero");
    return failure();
  }
  bool ok = step > 0 ? (0 <= start && start <= limit && limit <= dim)
                     : (-1 <= limit && limit <= start && start < dim);
  // An empty backward slice may start anywhere in [-1, dim).
  if (step < 0 && start == limit && start >= -1 && start < dim)
    ok = true;
  if (!ok) {
    error(llvm::formatv("slice start {0} limit {1} step {2} out of bounds for "
                        "a dimension of size {3}",
                        start, limit, step, dim));
    return failure();
  }
  int64_t span = step > 0 ? limit - start : start - limit;
  // Unsigned: -INT64_MIN, and span + step - 1 for a huge step, overflow.
  uint64_t s = step > 0 ? uint64_t(step) : 0 - uint64_t(step);
  return int64_t(span == 0 ? 0 : 1 + uint64_t(span - 1) / s);
}

FailureOr<EinsumSpec> parseEinsum(llvm::StringRef equation, ErrorFn error) {
  auto [lhs, rhs] = equation.split("->");
  if (lhs.size() == equation.size()) {
    error("einsum equation '" + printable(equation) + "' must be explicit (contain '->')");
    return failure();
  }
  EinsumSpec spec;
  auto isLabel = [](char c) { return llvm::isAlpha(c); };
  llvm::SmallVector<llvm::StringRef> terms;
  lhs.split(terms, ',');
  for (llvm::StringRef t : terms) {
    t = t.trim();
    if (!llvm::all_of(t, isLabel)) {
      error("einsum term '" + printable(t) + "' must consist of letters only");
      return failure();
    }
    spec.inputs.push_back(t.str());
  }
  rhs = rhs.trim();
  if (!llvm::all_of(rhs, isLabel)) {
    error("einsum output '" + printable(rhs) + "' must consist of letters only");
    return failure();
  }
  std::set<char> seen;
  for (char c : rhs) {
    if (!seen.insert(c).second) {
      error("einsum output label '" + llvm::Twine(c) + "' repeats");
      return failure();
    }
  }
  spec.output = rhs.str();
  return spec;
}

FailureOr<Shape> einsumShape(const EinsumSpec &spec, llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes,
                             ErrorFn error) {
  if (spec.inputs.size() != shapes.size()) {
    error(
        llvm::formatv("einsum has {0} terms but {1} operands", spec.inputs.size(), shapes.size()));
    return failure();
  }
  std::map<char, int64_t> sizes;
  for (auto [term, shape] : llvm::zip(spec.inputs, shapes)) {
    if (term.size() != shape.size()) {
      error("einsum term '" + term + "' does not match operand shape " + shapeStr(shape));
      return failure();
    }
    for (auto [c, d] : llvm::zip(term, shape)) {
      auto [it, inserted] = sizes.try_emplace(c, d);
      if (!inserted && it->second != d) {
        error(llvm::formatv("einsum label '{0}' has sizes {1} and {2}", c, it->second, d));
        return failure();
      }
    }
  }
  Shape result;
  for (char c : spec.output) {
    auto it = sizes.find(c);
    if (it == sizes.end()) {
      error("einsum output label '" + llvm::Twine(c) + "' is in no input");
      return failure();
    }
    result.push_back(it->second);
  }
  return result;
}

} // namespace ppc
