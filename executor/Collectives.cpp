//===- Collectives.cpp - collectives of the simulated mesh ----------------===//
//
// A collective that communicates is computed for one group: the operands of
// its ranks in group order (`MeshOp::getGroup`); the mesh executor decides
// when the group meets. `all_slice` and `axis_index` need only the rank's
// position in its group. Data movement (gather, scatter, all-to-all, slice)
// copies elements in their storage; reductions combine in the C++ type the
// dtype computes in and round once.
//
//===----------------------------------------------------------------------===//

#include "executor/Collectives.h"

#include "llvm/ADT/DenseMap.h"

#include <cmath>

using namespace mlir;

namespace ppc {

namespace {

/// Copies `count` consecutive slices along `dim`, from position `srcStart`
/// of `src` to position `dstStart` of `dst`; both have the same dtype and
/// agree on every other dimension.
void copySlices(const Tensor &src, int64_t srcStart, Tensor &dst, int64_t dstStart, int64_t dim,
                int64_t count) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= src.shape()[d];
  for (int64_t d = dim + 1; d < src.rank(); ++d)
    inner *= src.shape()[d];
  int64_t srcDim = src.shape()[dim], dstDim = dst.shape()[dim];
  auto copy = [&](auto from, auto to) {
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(from.begin() + (o * srcDim + srcStart) * inner, count * inner,
                  to.begin() + (o * dstDim + dstStart) * inner);
  };
  if (src.isFloat())
    copy(src.floats(), dst.floats());
  else
    copy(src.ints(), dst.ints());
}

/// Block `index` of `tensor` cut into `blocks` equal blocks along `dim`.
Tensor block(const Tensor &tensor, int64_t dim, int64_t blocks, int64_t index) {
  Shape shape(tensor.shape());
  shape[dim] /= blocks;
  Tensor result(tensor.dtype(), shape);
  copySlices(tensor, index * shape[dim], result, 0, dim, shape[dim]);
  return result;
}

/// max that propagates NaN, as the reduce_max kernel does.
template <typename T> T maxOf(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(x) || std::isnan(y))
      return std::nan("");
  return x < y ? y : x;
}

/// Combines `values` elementwise in their order; integers wrap around.
template <typename T>
void combine(ReductionKind kind, llvm::ArrayRef<const Tensor *> values,
             llvm::MutableArrayRef<T> out, llvm::function_ref<T(const Tensor &, int64_t)> get) {
  for (size_t i = 0; i < out.size(); ++i) {
    T acc = get(*values.front(), i);
    for (const Tensor *t : values.drop_front()) {
      T x = get(*t, i);
      if (kind == ReductionKind::Max)
        acc = maxOf(acc, x);
      else if constexpr (std::is_integral_v<T>)
        acc = static_cast<T>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
      else
        acc += x;
    }
    out[i] = acc;
  }
}

/// The elementwise reduction of `values` (equal shapes and dtypes) as a
/// tensor of `dtype`, rounded once.
Tensor reduce(ReductionKind kind, llvm::ArrayRef<const Tensor *> values, DType dtype) {
  const Tensor &first = *values.front();
  Tensor result(dtype, first.shape());
  if (first.isFloat()) {
    combine<double>(kind, values, result.floats(),
                    [](const Tensor &t, int64_t i) { return t.floats()[i]; });
  } else if (first.dtype() == DType::U64) {
    llvm::SmallVector<uint64_t> out(result.numElements());
    combine<uint64_t>(kind, values, out, [](const Tensor &t, int64_t i) {
      return static_cast<uint64_t>(t.ints()[i]);
    });
    for (auto [i, v] : llvm::enumerate(out))
      result.ints()[i] = static_cast<int64_t>(v);
  } else {
    combine<int64_t>(kind, values, result.ints(),
                     [](const Tensor &t, int64_t i) { return t.ints()[i]; });
  }
  result.roundToDType();
  return result;
}

/// Checks that each rank of the group has a single operand in the dtype the
/// op's result is stored in (collectives keep the element type), and returns
/// the operands in group order.
FailureOr<llvm::SmallVector<const Tensor *>>
groupOperands(Operation *op, llvm::ArrayRef<int64_t> ranks,
              llvm::ArrayRef<llvm::SmallVector<Tensor>> operands, const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  llvm::SmallVector<const Tensor *> values;
  for (auto [rank, rankOperands] : llvm::zip_equal(ranks, operands)) {
    if (rankOperands.size() != 1 || rankOperands.front().dtype() != dtype)
      return op->emitError() << "rank " << rank << " has no operand of dtype " << dtypeName(dtype);
    values.push_back(&rankOperands.front());
  }
  return values;
}

/// Runs `perGroup(values, results)` on the group's checked operands, with
/// `results` sized to the group.
LogicalResult
withGroupOperands(Operation *op, llvm::ArrayRef<int64_t> ranks,
                  llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
                  llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
                  const ExecOptions &options,
                  llvm::function_ref<void(llvm::ArrayRef<const Tensor *>,
                                          llvm::MutableArrayRef<llvm::SmallVector<Tensor>>)>
                      perGroup) {
  auto values = groupOperands(op, ranks, operands, options);
  if (failed(values))
    return failure();
  results.clear();
  results.resize(ranks.size());
  perGroup(*values, results);
  return success();
}

LogicalResult allReduce(AllReduceOp op, llvm::ArrayRef<int64_t> ranks,
                        llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
                        llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
                        const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  return withGroupOperands(op, ranks, operands, results, options, [&](auto values, auto out) {
    Tensor sum = reduce(op.getReduction(), values, dtype);
    for (auto &rankResults : out)
      rankResults.push_back(sum);
  });
}

LogicalResult allGather(AllGatherOp op, llvm::ArrayRef<int64_t> ranks,
                        llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
                        llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
                        const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  int64_t dim = op.getDim();
  return withGroupOperands(op, ranks, operands, results, options, [&](auto values, auto out) {
    Shape shape(values.front()->shape());
    int64_t size = shape[dim];
    shape[dim] *= values.size();
    Tensor gathered(dtype, shape);
    for (auto [position, value] : llvm::enumerate(values))
      copySlices(*value, 0, gathered, position * size, dim, size);
    for (auto &rankResults : out)
      rankResults.push_back(gathered);
  });
}

LogicalResult reduceScatter(ReduceScatterOp op, llvm::ArrayRef<int64_t> ranks,
                            llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
                            llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
                            const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  return withGroupOperands(op, ranks, operands, results, options, [&](auto values, auto out) {
    Tensor sum = reduce(op.getReduction(), values, dtype);
    for (auto [position, rankResults] : llvm::enumerate(out))
      rankResults.push_back(block(sum, op.getDim(), values.size(), position));
  });
}

LogicalResult allToAll(AllToAllOp op, llvm::ArrayRef<int64_t> ranks,
                       llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
                       llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
                       const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  int64_t split = op.getSplit(), concat = op.getConcat();
  return withGroupOperands(op, ranks, operands, results, options, [&](auto values, auto out) {
    int64_t n = values.size();
    for (auto [receiver, rankResults] : llvm::enumerate(out)) {
      // The receiver at position i gets block i of every sender's split
      // dimension, placed at the sender's position along concat.
      Shape shape(values[receiver]->shape());
      shape[split] /= n;
      int64_t size = shape[concat];
      shape[concat] *= n;
      Tensor received(dtype, shape);
      for (auto [sender, value] : llvm::enumerate(values))
        copySlices(block(*value, split, n, receiver), 0, received, sender * size, concat, size);
      rankResults.push_back(std::move(received));
    }
  });
}

LogicalResult allSlice(AllSliceOp op, int64_t position, int64_t groupSize,
                       llvm::ArrayRef<Tensor> operands, llvm::SmallVectorImpl<Tensor> &results,
                       const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  if (operands.size() != 1 || operands.front().dtype() != dtype)
    return op.emitError() << "has no operand of dtype " << dtypeName(dtype);
  results.push_back(block(operands.front(), op.getDim(), groupSize, position));
  return success();
}

LogicalResult axisIndex(AxisIndexOp, int64_t position, int64_t, llvm::ArrayRef<Tensor>,
                        llvm::SmallVectorImpl<Tensor> &results, const ExecOptions &) {
  Tensor index(DType::I64, {});
  index.setInt(0, position);
  results.push_back(std::move(index));
  return success();
}

class CollectiveRegistry {
public:
  static const CollectiveRegistry &get() {
    static const CollectiveRegistry registry = [] {
      CollectiveRegistry r;
      r.addGroup<AllReduceOp>(allReduce);
      r.addGroup<AllGatherOp>(allGather);
      r.addGroup<ReduceScatterOp>(reduceScatter);
      r.addGroup<AllToAllOp>(allToAll);
      r.addLocal<AllSliceOp>(allSlice);
      r.addLocal<AxisIndexOp>(axisIndex);
      return r;
    }();
    return registry;
  }

  const CollectiveKernel *lookup(Operation *op) const {
    auto name = op->getRegisteredInfo();
    if (!name)
      return nullptr;
    auto it = kernels.find(name->getTypeID());
    return it == kernels.end() ? nullptr : &it->second;
  }

private:
  template <typename OpT>
  void addGroup(LogicalResult (*fn)(OpT, llvm::ArrayRef<int64_t>,
                                    llvm::ArrayRef<llvm::SmallVector<Tensor>>,
                                    llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &,
                                    const ExecOptions &)) {
    kernels[TypeID::get<OpT>()].group = [fn](Operation *op, llvm::ArrayRef<int64_t> ranks,
                                             auto operands, auto &results,
                                             const ExecOptions &options) {
      return fn(llvm::cast<OpT>(op), ranks, operands, results, options);
    };
  }

  template <typename OpT>
  void addLocal(LogicalResult (*fn)(OpT, int64_t, int64_t, llvm::ArrayRef<Tensor>,
                                    llvm::SmallVectorImpl<Tensor> &, const ExecOptions &)) {
    kernels[TypeID::get<OpT>()].local = [fn](Operation *op, int64_t position, int64_t groupSize,
                                             auto operands, auto &results,
                                             const ExecOptions &options) {
      return fn(llvm::cast<OpT>(op), position, groupSize, operands, results, options);
    };
  }

  llvm::DenseMap<TypeID, CollectiveKernel> kernels;
};

} // namespace

const CollectiveKernel *lookupCollectiveKernel(Operation *op) {
  return CollectiveRegistry::get().lookup(op);
}

// Every collective takes its mesh and axes from `Ppc_CollectiveOp`'s
// `collectiveArgs`, under these names.
FlatSymbolRefAttr collectiveMesh(Operation *op) {
  return op->getAttrOfType<FlatSymbolRefAttr>("mesh");
}

ArrayAttr collectiveAxes(Operation *op) { return op->getAttrOfType<ArrayAttr>("axes"); }

} // namespace ppc
