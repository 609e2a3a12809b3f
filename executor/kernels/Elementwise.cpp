//===- Elementwise.cpp - constant, cast and elementwise kernels -----------===//
//
// Unary and binary kernels are written once as generic lambdas and run on
// the C++ type each dtype computes in: double for floats, uint64_t for u64
// (so that comparisons and division see values >= 2^63 as they are) and
// int64_t for every other integer dtype and i1.
//
//===----------------------------------------------------------------------===//

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

#include <cmath>
#include <type_traits>

using namespace mlir;

namespace ppc {

/// Calls `fn` with a zero of the type elements of `dtype` compute in.
template <typename Fn> static void visitComputeType(DType dtype, Fn &&fn) {
  if (isFloat(dtype))
    fn(0.0);
  else if (dtype == DType::U64)
    fn(uint64_t(0));
  else
    fn(int64_t(0));
}

template <typename T> static T load(const Tensor &tensor, int64_t index) {
  if constexpr (std::is_floating_point_v<T>)
    return tensor.floats()[index];
  else
    return static_cast<T>(tensor.ints()[index]);
}

/// Stores a computed value, rounding or wrapping it to the tensor's dtype.
template <typename T> static void store(Tensor &tensor, int64_t index, T value) {
  if constexpr (std::is_floating_point_v<T>)
    tensor.setDouble(index, value);
  else
    tensor.setInt(index, static_cast<int64_t>(value));
}

/// For every element of a tensor of shape `outShape`, in row-major order,
/// the flat index of the element of an operand of shape `inShape` that
/// broadcasts to it. An odometer keeps the index up to date incrementally.
static std::vector<int64_t> broadcastMap(llvm::ArrayRef<int64_t> inShape,
                                         llvm::ArrayRef<int64_t> outShape) {
  int64_t rank = outShape.size(), offset = rank - inShape.size();
  Shape inStrides = stridesOf(inShape);
  // The operand's stride along each result dimension; 0 where it broadcasts.
  Shape strides(rank, 0);
  for (int64_t d = offset; d < rank; ++d)
    if (inShape[d - offset] != 1)
      strides[d] = inStrides[d - offset];
  std::vector<int64_t> map(numElements(outShape));
  Shape coords(rank, 0);
  int64_t index = 0;
  for (int64_t &entry : map) {
    entry = index;
    for (int64_t d = rank - 1; d >= 0; --d) {
      index += strides[d];
      if (++coords[d] < outShape[d])
        break;
      index -= strides[d] * outShape[d];
      coords[d] = 0;
    }
  }
  return map;
}

//===----------------------------------------------------------------------===//
// Scalar operations
//===----------------------------------------------------------------------===//

// Integer arithmetic wraps around in 64 bits (the store then wraps to the
// dtype) instead of overflowing into undefined behaviour.

template <typename T> static T add(T x, T y) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
  else
    return x + y;
}

template <typename T> static T subtract(T x, T y) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
  else
    return x - y;
}

template <typename T> static T multiply(T x, T y) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  else
    return x * y;
}

template <typename T> static T negate(T x) { return subtract(T(0), x); }

/// Integer division truncates toward zero. Like numpy, x / 0 is 0 and
/// INT64_MIN / -1 wraps to INT64_MIN, where the hardware would trap.
template <typename T> static T divide(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0)
      return 0;
    if constexpr (std::is_signed_v<T>) {
      if (y == -1)
        return negate(x);
    }
  }
  return x / y;
}

/// Integer powers are exact (squaring and multiplying, wrapping around). A
/// negative exponent gives 1 / x^-y truncated toward zero: nonzero only for
/// x = 1 or -1, and 0 for x = 0 as in `divide`.
template <typename T> static T power(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(x, y);
  } else {
    if constexpr (std::is_signed_v<T>) {
      if (y < 0)
        return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
    }
    T result = 1;
    for (; y > 0; y /= 2) {
      if (y % 2)
        result = multiply(result, x);
      x = multiply(x, x);
    }
    return result;
  }
}

template <typename T> static bool isNaN(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(x);
  else
    return false;
}

/// max and min propagate NaN, as numpy and PyTorch do.
template <typename T> static T maximum(T x, T y) { return isNaN(x) || x > y ? x : y; }

template <typename T> static T minimum(T x, T y) { return isNaN(x) || x < y ? x : y; }

template <typename T> static T absolute(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return std::fabs(x);
  else if constexpr (std::is_unsigned_v<T>)
    return x;
  else
    return x < 0 ? negate(x) : x;
}

template <typename T> static T sign(T x) {
  if (isNaN(x))
    return x;
  return T(int(T(0) < x) - int(x < T(0)));
}

template <typename T> static T relu(T x) {
  if constexpr (std::is_unsigned_v<T>)
    return x;
  else
    return x < 0 ? T(0) : x;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

static LogicalResult constantKernel(Operation *op, llvm::ArrayRef<Tensor>,
                                    llvm::SmallVectorImpl<Tensor> &results,
                                    const ExecOptions &options) {
  auto value = Tensor::fromAttr(llvm::cast<ConstantOp>(op).getValue());
  if (failed(value))
    return op->emitError() << "the executor cannot read this constant's value";
  results.push_back(value->castTo(resultDType(op, 0, options)));
  return success();
}

static LogicalResult castKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                llvm::SmallVectorImpl<Tensor> &results,
                                const ExecOptions &options) {
  results.push_back(operands[0].castTo(resultDType(op, 0, options)));
  return success();
}

/// A kernel applying `fn` to every element; `fn` takes and returns the
/// compute type of the operand.
template <typename Fn> static Kernel unaryKernel(Fn fn) {
  return [fn](Operation *op, llvm::ArrayRef<Tensor> operands,
              llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &options) {
    const Tensor &input = operands[0];
    Tensor result(resultDType(op, 0, options), input.shape());
    visitComputeType(input.dtype(), [&](auto zero) {
      using T = decltype(zero);
      for (int64_t i = 0; i < input.numElements(); ++i)
        store(result, i, fn(load<T>(input, i)));
    });
    results.push_back(std::move(result));
    return success();
  };
}

/// A kernel for the ops that ODS restricts to float tensors.
static Kernel floatUnaryKernel(double (*fn)(double)) {
  return [fn](Operation *op, llvm::ArrayRef<Tensor> operands,
              llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &options) {
    const Tensor &input = operands[0];
    Tensor result(resultDType(op, 0, options), input.shape());
    for (int64_t i = 0; i < input.numElements(); ++i)
      result.setDouble(i, fn(input.floats()[i]));
    results.push_back(std::move(result));
    return success();
  };
}

/// A kernel applying `fn` to the broadcast operands; `fn` takes the compute
/// type of the operands and returns it or bool.
template <typename Fn> static Kernel binaryKernel(Fn fn) {
  return [fn](Operation *op, llvm::ArrayRef<Tensor> operands,
              llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &options) {
    const Tensor &lhs = operands[0], &rhs = operands[1];
    auto shape = llvm::cast<ShapedType>(op->getResult(0).getType()).getShape();
    Tensor result(resultDType(op, 0, options), shape);
    visitComputeType(lhs.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (lhs.shape() == rhs.shape()) {
        for (int64_t i = 0; i < result.numElements(); ++i)
          store(result, i, fn(load<T>(lhs, i), load<T>(rhs, i)));
        return;
      }
      std::vector<int64_t> l = broadcastMap(lhs.shape(), shape),
                           r = broadcastMap(rhs.shape(), shape);
      for (int64_t i = 0; i < result.numElements(); ++i)
        store(result, i, fn(load<T>(lhs, l[i]), load<T>(rhs, r[i])));
    });
    results.push_back(std::move(result));
    return success();
  };
}

static LogicalResult whereKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                 llvm::SmallVectorImpl<Tensor> &results,
                                 const ExecOptions &options) {
  const Tensor &condition = operands[0], &x = operands[1], &y = operands[2];
  auto shape = llvm::cast<WhereOp>(op).getType().getShape();
  Tensor result(resultDType(op, 0, options), shape);
  std::vector<int64_t> c = broadcastMap(condition.shape(), shape),
                       xi = broadcastMap(x.shape(), shape), yi = broadcastMap(y.shape(), shape);
  // x, y and the result share their dtype, so values are copied unchanged.
  for (int64_t i = 0; i < result.numElements(); ++i) {
    bool pick = condition.ints()[c[i]];
    if (result.isFloat())
      result.floats()[i] = pick ? x.floats()[xi[i]] : y.floats()[yi[i]];
    else
      result.ints()[i] = pick ? x.ints()[xi[i]] : y.ints()[yi[i]];
  }
  results.push_back(std::move(result));
  return success();
}

/// rotary: each element with its partner in the other half of the last
/// dimension, in double, rounded once (ir/PpcOps.td gives the formulas).
static LogicalResult rotaryKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results,
                                  const ExecOptions &options) {
  const Tensor &x = operands[0];
  llvm::ArrayRef<int64_t> shape = x.shape();
  bool transposed = llvm::cast<RotaryOp>(op).getTransposed();
  int64_t n = shape.back(), half = n / 2;
  Tensor result(resultDType(op, 0, options), shape);
  std::vector<int64_t> c = broadcastMap(operands[1].shape(), shape),
                       s = broadcastMap(operands[2].shape(), shape);
  llvm::ArrayRef<double> in = x.floats(), cos = operands[1].floats(), sin = operands[2].floats();
  for (int64_t i = 0; i < result.numElements(); ++i) {
    bool first = i % n < half;
    int64_t partner = first ? i + half : i - half;
    // The sine of the rotated element's own position, or (transposed) its
    // partner's; the first half's partner enters negated.
    double sine = transposed ? sin[s[partner]] : sin[s[i]];
    double sign = first != transposed ? -1.0 : 1.0;
    result.setDouble(i, in[i] * cos[c[i]] + sign * in[partner] * sine);
  }
  results.push_back(std::move(result));
  return success();
}

void registerElementwiseKernels(KernelRegistry &registry) {
  registry.add<ConstantOp>(constantKernel);
  registry.add<CastOp>(castKernel);
  registry.add<RotaryOp>(rotaryKernel);

  registry.add<NegOp>(unaryKernel([](auto x) { return negate(x); }));
  registry.add<AbsOp>(unaryKernel([](auto x) { return absolute(x); }));
  registry.add<ReluOp>(unaryKernel([](auto x) { return relu(x); }));
  registry.add<SignOp>(unaryKernel([](auto x) { return sign(x); }));
  registry.add<NotOp>(unaryKernel([](auto x) { return !x; }));
  registry.add<SqrtOp>(floatUnaryKernel([](double x) { return std::sqrt(x); }));
  registry.add<ReciprocalOp>(floatUnaryKernel([](double x) { return 1 / x; }));
  registry.add<ExpOp>(floatUnaryKernel([](double x) { return std::exp(x); }));
  registry.add<LogOp>(floatUnaryKernel([](double x) { return std::log(x); }));
  registry.add<ErfOp>(floatUnaryKernel([](double x) { return std::erf(x); }));
  registry.add<TanhOp>(floatUnaryKernel([](double x) { return std::tanh(x); }));
  registry.add<SigmoidOp>(floatUnaryKernel([](double x) { return 1 / (1 + std::exp(-x)); }));
  registry.add<SinOp>(floatUnaryKernel([](double x) { return std::sin(x); }));
  registry.add<CosOp>(floatUnaryKernel([](double x) { return std::cos(x); }));
  registry.add<FloorOp>(floatUnaryKernel([](double x) { return std::floor(x); }));
  registry.add<CeilOp>(floatUnaryKernel([](double x) { return std::ceil(x); }));

  registry.add<AddOp>(binaryKernel([](auto x, auto y) { return add(x, y); }));
  registry.add<SubOp>(binaryKernel([](auto x, auto y) { return subtract(x, y); }));
  registry.add<MulOp>(binaryKernel([](auto x, auto y) { return multiply(x, y); }));
  registry.add<DivOp>(binaryKernel([](auto x, auto y) { return divide(x, y); }));
  registry.add<PowOp>(binaryKernel([](auto x, auto y) { return power(x, y); }));
  registry.add<MaxOp>(binaryKernel([](auto x, auto y) { return maximum(x, y); }));
  registry.add<MinOp>(binaryKernel([](auto x, auto y) { return minimum(x, y); }));
  registry.add<EqualOp>(binaryKernel([](auto x, auto y) { return x == y; }));
  registry.add<LessOp>(binaryKernel([](auto x, auto y) { return x < y; }));
  registry.add<GreaterOp>(binaryKernel([](auto x, auto y) { return x > y; }));
  // The operands of the logical ops are i1 values, 0 or 1.
  registry.add<AndOp>(binaryKernel([](auto x, auto y) { return x && y; }));
  registry.add<OrOp>(binaryKernel([](auto x, auto y) { return x || y; }));
  registry.add<XorOp>(binaryKernel([](auto x, auto y) { return x != y; }));
  registry.add<WhereOp>(whereKernel);
}

} // namespace ppc
