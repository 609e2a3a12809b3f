//===- DataMovement.cpp - kernels that move elements unchanged ------------===//
//
// reshape, transpose, concat, slice, insert_slice, gather, expand and trilu
// copy values between tensors of the same dtype, so no rounding is involved;
// scatter_add sums, in double or wrapping 64-bit integers, and rounds once.
//
//===----------------------------------------------------------------------===//

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

#include <algorithm>

using namespace mlir;

namespace ppc {

/// Fills `out`, of shape `shape`, in row-major order: the element at
/// coordinates c reads `in[offset + sum_d c[d] * strides[d]]`. An odometer
/// keeps the index up to date incrementally.
template <typename T>
static void stridedCopy(llvm::ArrayRef<T> in, llvm::MutableArrayRef<T> out,
                        llvm::ArrayRef<int64_t> shape, int64_t offset,
                        llvm::ArrayRef<int64_t> strides) {
  int64_t rank = shape.size();
  Shape coords(rank, 0);
  int64_t index = offset;
  for (T &value : out) {
    value = in[index];
    for (int64_t d = rank - 1; d >= 0; --d) {
      index += strides[d];
      if (++coords[d] < shape[d])
        break;
      index -= strides[d] * shape[d];
      coords[d] = 0;
    }
  }
}

/// The inverse of stridedCopy: the element of `in`, of shape `shape`, at
/// coordinates c is written to `out[offset + sum_d c[d] * strides[d]]`.
template <typename T>
static void stridedStore(llvm::ArrayRef<T> in, llvm::MutableArrayRef<T> out,
                         llvm::ArrayRef<int64_t> shape, int64_t offset,
                         llvm::ArrayRef<int64_t> strides) {
  int64_t rank = shape.size();
  Shape coords(rank, 0);
  int64_t index = offset;
  for (const T &value : in) {
    out[index] = value;
    for (int64_t d = rank - 1; d >= 0; --d) {
      index += strides[d];
      if (++coords[d] < shape[d])
        break;
      index -= strides[d] * shape[d];
      coords[d] = 0;
    }
  }
}

/// The result of `op` read from `input` through `offset` and `strides` (see
/// stridedCopy): transpose, slice and expand differ only in those.
static Tensor stridedView(Operation *op, const ExecOptions &options, const Tensor &input,
                          int64_t offset, llvm::ArrayRef<int64_t> strides) {
  auto shape = llvm::cast<ShapedType>(op->getResult(0).getType()).getShape();
  Tensor result(resultDType(op, 0, options), shape);
  if (result.isFloat())
    stridedCopy(input.floats(), result.floats(), shape, offset, strides);
  else
    stridedCopy(input.ints(), result.ints(), shape, offset, strides);
  return result;
}

/// Copies `count` elements of `from`, starting at `fromIndex`, to `to` at
/// `toIndex`; both tensors have the same dtype.
static void copyElements(const Tensor &from, int64_t fromIndex, Tensor &to, int64_t toIndex,
                         int64_t count) {
  if (from.isFloat())
    std::copy_n(from.floats().begin() + fromIndex, count, to.floats().begin() + toIndex);
  else
    std::copy_n(from.ints().begin() + fromIndex, count, to.ints().begin() + toIndex);
}

static LogicalResult reshapeKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                   llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &) {
  results.push_back(operands[0].reshaped(llvm::cast<ReshapeOp>(op).getType().getShape()));
  return success();
}

/// A transfer between host and device memory copies its operand: the
/// executor has one memory (ExecutionFrame counts each side's bytes).
static LogicalResult transferKernel(Operation *, llvm::ArrayRef<Tensor> operands,
                                    llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &) {
  results.push_back(operands[0]);
  return success();
}

static LogicalResult transposeKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                     llvm::SmallVectorImpl<Tensor> &results,
                                     const ExecOptions &options) {
  const Tensor &input = operands[0];
  Shape inStrides = stridesOf(input.shape()), strides;
  for (int64_t p : llvm::cast<TransposeOp>(op).getPerm())
    strides.push_back(inStrides[p]);
  results.push_back(stridedView(op, options, input, 0, strides));
  return success();
}

/// The flat offset of a slice's first element in a tensor of shape `shape`
/// and the flat strides of its dimensions there.
static int64_t sliceStrides(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
                            llvm::ArrayRef<int64_t> steps, Shape &strides) {
  int64_t offset = 0;
  for (auto [start, step, stride] : llvm::zip(starts, steps, stridesOf(shape))) {
    offset += start * stride;
    strides.push_back(step * stride);
  }
  return offset;
}

static LogicalResult sliceKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                 llvm::SmallVectorImpl<Tensor> &results,
                                 const ExecOptions &options) {
  auto slice = llvm::cast<SliceOp>(op);
  const Tensor &input = operands[0];
  Shape strides;
  int64_t offset = sliceStrides(input.shape(), slice.getStarts(), slice.getSteps(), strides);
  results.push_back(stridedView(op, options, input, offset, strides));
  return success();
}

static LogicalResult insertSliceKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                       llvm::SmallVectorImpl<Tensor> &results,
                                       const ExecOptions &) {
  auto insert = llvm::cast<InsertSliceOp>(op);
  const Tensor &source = operands[0];
  Tensor result = operands[1];
  Shape strides;
  int64_t offset = sliceStrides(result.shape(), insert.getStarts(), insert.getSteps(), strides);
  if (result.isFloat())
    stridedStore(source.floats(), result.floats(), source.shape(), offset, strides);
  else
    stridedStore(source.ints(), result.ints(), source.shape(), offset, strides);
  results.push_back(std::move(result));
  return success();
}

static LogicalResult expandKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results,
                                  const ExecOptions &options) {
  const Tensor &input = operands[0];
  int64_t rank = llvm::cast<ExpandOp>(op).getType().getRank(), offset = rank - input.rank();
  Shape inStrides = stridesOf(input.shape());
  // Broadcast dimensions (missing or of size 1) read the same element.
  Shape strides(rank, 0);
  for (int64_t d = offset; d < rank; ++d)
    if (input.shape()[d - offset] != 1)
      strides[d] = inStrides[d - offset];
  results.push_back(stridedView(op, options, input, 0, strides));
  return success();
}

static LogicalResult concatKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results,
                                  const ExecOptions &options) {
  auto concat = llvm::cast<ConcatOp>(op);
  int64_t axis = concat.getAxis();
  llvm::ArrayRef<int64_t> shape = concat.getType().getShape();
  Tensor result(resultDType(op, 0, options), shape);
  // Each operand contributes one contiguous chunk per outer index.
  int64_t outer = numElements(shape.take_front(axis)), index = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor &input : operands) {
      int64_t chunk = numElements(input.shape().drop_front(axis));
      copyElements(input, o * chunk, result, index, chunk);
      index += chunk;
    }
  }
  results.push_back(std::move(result));
  return success();
}

/// The rows `indices` name along an axis of size `n`, negative ones counted
/// from the end; an index outside [-n, n) is an error at `op`.
static FailureOr<Shape> axisRows(Operation *op, const Tensor &indices, int64_t n) {
  Shape rows;
  for (int64_t idx : indices.ints()) {
    if (idx < -n || idx >= n)
      return op->emitError() << op->getName().stripDialect() << " index " << idx
                             << " out of range [" << -n << ", " << n << ")";
    rows.push_back(idx < 0 ? idx + n : idx);
  }
  return rows;
}

static LogicalResult gatherKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results,
                                  const ExecOptions &options) {
  auto gather = llvm::cast<GatherOp>(op);
  const Tensor &data = operands[0], &indices = operands[1];
  int64_t axis = gather.getAxis();
  llvm::ArrayRef<int64_t> shape = data.shape();
  int64_t outer = numElements(shape.take_front(axis)), n = shape[axis],
          inner = numElements(shape.drop_front(axis + 1));
  auto rows = axisRows(op, indices, n);
  if (failed(rows))
    return failure();
  Tensor result(resultDType(op, 0, options), gather.getType().getShape());
  int64_t numRows = rows->size();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < numRows; ++i)
      copyElements(data, (o * n + (*rows)[i]) * inner, result, (o * numRows + i) * inner, inner);
  results.push_back(std::move(result));
  return success();
}

/// Adds row `i` of `updates` (an (outer, numRows, inner) view) into row
/// `rows[i]` of `out` (an (outer, n, inner) view), in `T`: double, or
/// uint64_t so that integer sums wrap around instead of overflowing.
template <typename T, typename Elements>
static void scatterAdd(llvm::ArrayRef<Elements> updates, llvm::MutableArrayRef<Elements> out,
                       llvm::ArrayRef<int64_t> rows, int64_t outer, int64_t n, int64_t inner) {
  int64_t numRows = rows.size();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < numRows; ++i) {
      const Elements *from = updates.data() + (o * numRows + i) * inner;
      Elements *to = out.data() + (o * n + rows[i]) * inner;
      for (int64_t j = 0; j < inner; ++j)
        to[j] = static_cast<Elements>(static_cast<T>(to[j]) + static_cast<T>(from[j]));
    }
  }
}

static LogicalResult scatterAddKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                      llvm::SmallVectorImpl<Tensor> &results,
                                      const ExecOptions &options) {
  auto scatter = llvm::cast<ScatterAddOp>(op);
  const Tensor &updates = operands[0], &indices = operands[1];
  int64_t axis = scatter.getAxis();
  llvm::ArrayRef<int64_t> shape = scatter.getType().getShape();
  int64_t outer = numElements(shape.take_front(axis)), n = shape[axis],
          inner = numElements(shape.drop_front(axis + 1));
  auto rows = axisRows(op, indices, n);
  if (failed(rows))
    return failure();
  Tensor result(resultDType(op, 0, options), shape);
  if (result.isFloat())
    scatterAdd<double>(updates.floats(), result.floats(), *rows, outer, n, inner);
  else
    scatterAdd<uint64_t>(updates.ints(), result.ints(), *rows, outer, n, inner);
  result.roundToDType();
  results.push_back(std::move(result));
  return success();
}

static LogicalResult triluKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                 llvm::SmallVectorImpl<Tensor> &results,
                                 const ExecOptions &options) {
  auto trilu = llvm::cast<TriluOp>(op);
  const Tensor &input = operands[0];
  bool upper = trilu.getUpper();
  int64_t k = trilu.getKAttr().getInt();
  llvm::ArrayRef<int64_t> shape = input.shape();
  int64_t rank = shape.size(), numRows = shape[rank - 2], numCols = shape[rank - 1];
  Tensor result(resultDType(op, 0, options), shape);
  for (int64_t i = 0; i < input.numElements(); ++i) {
    int64_t row = i / numCols % numRows, col = i % numCols;
    if (upper ? col - row >= k : col - row <= k)
      copyElements(input, i, result, i, 1);
  }
  results.push_back(std::move(result));
  return success();
}

/// Sums in scan order, each partial sum rounded to the element type, as a
/// loop in that type computes it.
static LogicalResult cumSumKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results,
                                  const ExecOptions &options) {
  auto cumsum = llvm::cast<CumSumOp>(op);
  const Tensor &input = operands[0];
  llvm::ArrayRef<int64_t> shape = input.shape();
  int64_t axis = cumsum.getAxis(), n = shape[axis];
  int64_t outer = numElements(shape.take_front(axis)),
          inner = numElements(shape.drop_front(axis + 1));
  bool exclusive = cumsum.getExclusive(), reverse = cumsum.getReverse();
  Tensor result(resultDType(op, 0, options), shape);
  Tensor sum(result.dtype(), {});
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      sum.setDouble(0, 0);
      if (!result.isFloat())
        sum.setInt(0, 0);
      for (int64_t s = 0; s < n; ++s) {
        int64_t k = reverse ? n - 1 - s : s;
        int64_t index = (o * n + k) * inner + j;
        if (exclusive)
          copyElements(sum, 0, result, index, 1);
        if (result.isFloat())
          sum.setDouble(0, sum.getDouble(0) + input.getDouble(index));
        else
          sum.setInt(0, sum.getInt(0) + input.getInt(index));
        if (!exclusive)
          copyElements(sum, 0, result, index, 1);
      }
    }
  results.push_back(std::move(result));
  return success();
}

/// The reference: each line compared in double (integers exactly), NaN
/// first, ties to the first (or last) position.
static LogicalResult argMaxKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                  llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &) {
  auto argMax = llvm::cast<ArgMaxOp>(op);
  const Tensor &input = operands[0];
  llvm::ArrayRef<int64_t> shape = input.shape();
  int64_t axis = argMax.getAxis(), n = shape[axis];
  int64_t outer = numElements(shape.take_front(axis)),
          inner = numElements(shape.drop_front(axis + 1));
  bool largest = argMax.getLargest(), last = argMax.getLast();
  Shape resultShape(shape);
  resultShape[axis] = 1;
  Tensor result(DType::I64, resultShape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return (o * n + i) * inner + j; };
      // Whether element i replaces the best so far, b.
      auto better = [&](int64_t i, int64_t b) {
        if (input.isFloat()) {
          double x = input.getDouble(at(i)), y = input.getDouble(at(b));
          if (std::isnan(x) || std::isnan(y))
            return std::isnan(x) && (!std::isnan(y) || last);
          return largest ? x > y || (last && x == y) : x < y || (last && x == y);
        }
        int64_t x = input.getInt(at(i)), y = input.getInt(at(b));
        return largest ? x > y || (last && x == y) : x < y || (last && x == y);
      };
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i)
        if (better(i, best))
          best = i;
      result.setInt(o * inner + j, best);
    }
  results.push_back(std::move(result));
  return success();
}

static LogicalResult topKIndicesKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                       llvm::SmallVectorImpl<Tensor> &results,
                                       const ExecOptions &options) {
  auto topK = llvm::cast<TopKIndicesOp>(op);
  const Tensor &input = operands[0];
  llvm::ArrayRef<int64_t> shape = input.shape();
  int64_t axis = topK.getAxis(), n = shape[axis], k = topK.getK();
  int64_t outer = numElements(shape.take_front(axis)),
          inner = numElements(shape.drop_front(axis + 1));
  bool largest = topK.getLargest();
  Shape resultShape(shape);
  resultShape[axis] = k;
  Tensor result(DType::I64, resultShape);
  std::vector<int64_t> order(n);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return input.getDouble((o * n + i) * inner + j); };
      auto atInt = [&](int64_t i) { return input.getInt((o * n + i) * inner + j); };
      // a before b: larger (smaller) first, NaN largest, then the lower index.
      // Integers compare exactly (int64 beyond 2^53 has no double).
      auto before = [&](int64_t a, int64_t b) {
        if (!input.isFloat())
          return largest ? atInt(a) > atInt(b) : atInt(a) < atInt(b);
        double x = at(a), y = at(b);
        if (std::isnan(x) || std::isnan(y))
          return std::isnan(x) && !std::isnan(y) ? largest : (!std::isnan(x) && !largest);
        return largest ? x > y : x < y;
      };
      for (int64_t i = 0; i < n; ++i)
        order[i] = i;
      std::stable_sort(order.begin(), order.end(), before);
      for (int64_t i = 0; i < k; ++i)
        result.setInt((o * k + i) * inner + j, order[i]);
    }
  results.push_back(std::move(result));
  return success();
}

void registerDataMovementKernels(KernelRegistry &registry) {
  registry.add<ArgMaxOp>(argMaxKernel);
  registry.add<TopKIndicesOp>(topKIndicesKernel);
  registry.add<CumSumOp>(cumSumKernel);
  registry.add<ReshapeOp>(reshapeKernel);
  registry.add<TransposeOp>(transposeKernel);
  registry.add<SliceOp>(sliceKernel);
  registry.add<InsertSliceOp>(insertSliceKernel);
  registry.add<ExpandOp>(expandKernel);
  registry.add<ConcatOp>(concatKernel);
  registry.add<GatherOp>(gatherKernel);
  registry.add<ScatterAddOp>(scatterAddKernel);
  registry.add<TriluOp>(triluKernel);
  registry.add<TransferOp>(transferKernel);
}

} // namespace ppc
