//===- Reduction.cpp - reduce_* kernels -----------------------------------===//
//
// A reduction runs in the C++ type its dtype computes in (double for floats,
// uint64_t for u64, int64_t otherwise) over one axis at a time, each split
// into (outer, reduced, inner) so that the innermost loop is contiguous.
//
//===----------------------------------------------------------------------===//

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

#include <cmath>
#include <limits>
#include <type_traits>

using namespace mlir;

namespace ppc {

template <typename T> static bool isNaN(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(x);
  else
    return false;
}

namespace {
// Each reduction is its identity (the result over no elements) and how it
// combines two values; integers wrap around rather than overflow.

struct Sum {
  template <typename T> static T identity() { return 0; }
  template <typename T> static T combine(T x, T y) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
    else
      return x + y;
  }
};

struct Prod {
  template <typename T> static T identity() { return 1; }
  template <typename T> static T combine(T x, T y) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
    else
      return x * y;
  }
};

/// max and min propagate NaN, as numpy and PyTorch do.
struct Max {
  template <typename T> static T identity() {
    if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::min();
  }
  template <typename T> static T combine(T x, T y) { return isNaN(x) || x > y ? x : y; }
};

struct Min {
  template <typename T> static T identity() {
    if constexpr (std::is_floating_point_v<T>)
      return std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::max();
  }
  template <typename T> static T combine(T x, T y) { return isNaN(x) || x < y ? x : y; }
};
} // namespace

template <typename T> static std::vector<T> valuesAs(const Tensor &tensor) {
  if constexpr (std::is_floating_point_v<T>)
    return {tensor.floats().begin(), tensor.floats().end()};
  else
    return {tensor.ints().begin(), tensor.ints().end()};
}

/// Reduces `values`, of shape `shape`, over `axes`; the reduced dimensions
/// keep size 1. Returns the number of elements combined into each result.
template <typename Reduction, typename T>
static int64_t reduce(std::vector<T> &values, Shape shape, llvm::ArrayRef<int64_t> axes) {
  int64_t count = 1;
  for (int64_t axis : llvm::reverse(axes)) {
    llvm::ArrayRef<int64_t> dims = shape;
    int64_t outer = numElements(dims.take_front(axis)), size = shape[axis],
            inner = numElements(dims.drop_front(axis + 1));
    std::vector<T> reduced(outer * inner, Reduction::template identity<T>());
    for (int64_t o = 0; o < outer; ++o) {
      T *out = reduced.data() + o * inner;
      for (int64_t k = 0; k < size; ++k) {
        const T *in = values.data() + (o * size + k) * inner;
        for (int64_t j = 0; j < inner; ++j)
          out[j] = Reduction::combine(out[j], in[j]);
      }
    }
    values = std::move(reduced);
    shape[axis] = 1;
    count *= size;
  }
  return count;
}

template <typename OpT, typename Reduction>
static LogicalResult reduceKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results,
                                  const ExecOptions &options) {
  auto reduceOp = llvm::cast<OpT>(op);
  const Tensor &input = operands[0];
  Tensor result(resultDType(op, 0, options), reduceOp.getType().getShape());
  auto run = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> values = valuesAs<T>(input);
    int64_t count = reduce<Reduction>(values, Shape(input.shape()), reduceOp.getAxes());
    for (int64_t i = 0, e = values.size(); i < e; ++i) {
      T value = values[i];
      if constexpr (std::is_same_v<OpT, ReduceMeanOp>) {
        // Integer means truncate; a mean over no elements is NaN for floats
        // and 0 for integers.
        if constexpr (std::is_integral_v<T>)
          value = count ? value / static_cast<T>(count) : 0;
        else
          value /= count;
      }
      if constexpr (std::is_floating_point_v<T>)
        result.setDouble(i, value);
      else
        result.setInt(i, static_cast<int64_t>(value));
    }
  };
  if (input.isFloat())
    run(0.0);
  else if (input.dtype() == DType::U64)
    run(uint64_t(0));
  else
    run(int64_t(0));
  results.push_back(std::move(result));
  return success();
}

void registerReductionKernels(KernelRegistry &registry) {
  registry.add<ReduceSumOp>(reduceKernel<ReduceSumOp, Sum>);
  registry.add<ReduceMeanOp>(reduceKernel<ReduceMeanOp, Sum>);
  registry.add<ReduceMaxOp>(reduceKernel<ReduceMaxOp, Max>);
  registry.add<ReduceMinOp>(reduceKernel<ReduceMinOp, Min>);
  registry.add<ReduceProdOp>(reduceKernel<ReduceProdOp, Prod>);
}

} // namespace ppc
