//===- Collectives.cpp - collectives of the simulated mesh ----------------===//
//
// Each collective is computed group by group: the ranks of a group, in group
// order, are `MeshOp::getGroup`. Data movement (gather, scatter, all-to-all,
// slice) copies elements in their storage; reductions combine in the C++
// type the dtype computes in and round once.
//
//===----------------------------------------------------------------------===//

#include "executor/Collectives.h"

#include "llvm/ADT/DenseMap.h"

#include <cmath>

using namespace mlir;

namespace ppc {

namespace {

/// The ranks of every group of `mesh` over `axes`, each in group order.
FailureOr<llvm::SmallVector<llvm::SmallVector<int64_t>>>
groupsOf(Operation *op, MeshOp mesh, ArrayAttr axes) {
  llvm::SmallVector<StringRef> names = axisNames(axes);
  llvm::SmallVector<bool> covered(mesh.getNumRanks(), false);
  llvm::SmallVector<llvm::SmallVector<int64_t>> groups;
  for (int64_t rank = 0; rank < mesh.getNumRanks(); ++rank) {
    if (covered[rank])
      continue;
    auto group = mesh.getGroup(rank, names);
    if (failed(group))
      return op->emitError()
             << "axes " << axes << " are not distinct axes of mesh @"
             << mesh.getSymName();
    for (int64_t member : *group)
      covered[member] = true;
    groups.push_back(std::move(*group));
  }
  return groups;
}

/// Copies `count` consecutive slices along `dim`, from position `srcStart`
/// of `src` to position `dstStart` of `dst`; both have the same dtype and
/// agree on every other dimension.
void copySlices(const Tensor &src, int64_t srcStart, Tensor &dst,
                int64_t dstStart, int64_t dim, int64_t count) {
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
             llvm::MutableArrayRef<T> out,
             llvm::function_ref<T(const Tensor &, int64_t)> get) {
  for (size_t i = 0; i < out.size(); ++i) {
    T acc = get(*values.front(), i);
    for (const Tensor *t : values.drop_front()) {
      T x = get(*t, i);
      if (kind == ReductionKind::Max)
        acc = maxOf(acc, x);
      else if constexpr (std::is_integral_v<T>)
        acc = static_cast<T>(static_cast<uint64_t>(acc) +
                             static_cast<uint64_t>(x));
      else
        acc += x;
    }
    out[i] = acc;
  }
}

/// The elementwise reduction of `values` (equal shapes and dtypes) as a
/// tensor of `dtype`, rounded once.
Tensor reduce(ReductionKind kind, llvm::ArrayRef<const Tensor *> values,
              DType dtype) {
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

/// Every rank's single operand, checked to be in the dtype the op's result
/// is stored in (collectives keep the element type).
LogicalResult checkOperands(Operation *op,
                            llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
                            const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  for (auto [rank, values] : llvm::enumerate(operands))
    if (values.size() != 1 || values.front().dtype() != dtype)
      return op->emitError() << "rank " << rank << " has no operand of dtype "
                             << dtypeName(dtype);
  return success();
}

/// Runs `perGroup(group, results)` for every group of the op's axes after
/// the common checks; `perGroup` fills `results[r]` for each rank r of the
/// group.
template <typename OpT>
LogicalResult forEachGroup(
    OpT op, MeshOp mesh, llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
    llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
    const ExecOptions &options,
    llvm::function_ref<void(llvm::ArrayRef<int64_t>,
                            llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &)>
        perGroup) {
  if (op.getMesh() != mesh.getSymName())
    return op.emitError() << "runs on mesh @" << op.getMesh()
                          << ", but the program runs on mesh @"
                          << mesh.getSymName();
  if (op->getNumOperands() && failed(checkOperands(op, operands, options)))
    return failure();
  auto groups = groupsOf(op, mesh, op.getAxes());
  if (failed(groups))
    return failure();
  results.clear();
  results.resize(mesh.getNumRanks());
  for (const auto &group : *groups)
    perGroup(group, results);
  return success();
}

llvm::SmallVector<const Tensor *>
groupValues(llvm::ArrayRef<int64_t> group,
            llvm::ArrayRef<llvm::SmallVector<Tensor>> operands) {
  return llvm::to_vector(llvm::map_range(
      group, [&](int64_t rank) { return &operands[rank].front(); }));
}

LogicalResult
allReduce(AllReduceOp op, MeshOp mesh,
          llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
          llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
          const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  return forEachGroup(
      op, mesh, operands, results, options, [&](auto group, auto &out) {
        Tensor sum =
            reduce(op.getReduction(), groupValues(group, operands), dtype);
        for (int64_t rank : group)
          out[rank].push_back(sum);
      });
}

LogicalResult
allGather(AllGatherOp op, MeshOp mesh,
          llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
          llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
          const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  int64_t dim = op.getDim();
  return forEachGroup(op, mesh, operands, results, options,
                      [&](auto group, auto &out) {
                        Shape shape(operands[group.front()].front().shape());
                        int64_t size = shape[dim];
                        shape[dim] *= group.size();
                        Tensor gathered(dtype, shape);
                        for (auto [position, rank] : llvm::enumerate(group))
                          copySlices(operands[rank].front(), 0, gathered,
                                     position * size, dim, size);
                        for (int64_t rank : group)
                          out[rank].push_back(gathered);
                      });
}

LogicalResult
reduceScatter(ReduceScatterOp op, MeshOp mesh,
              llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
              llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
              const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  return forEachGroup(
      op, mesh, operands, results, options, [&](auto group, auto &out) {
        Tensor sum =
            reduce(op.getReduction(), groupValues(group, operands), dtype);
        for (auto [position, rank] : llvm::enumerate(group))
          out[rank].push_back(block(sum, op.getDim(), group.size(), position));
      });
}

LogicalResult
allToAll(AllToAllOp op, MeshOp mesh,
         llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
         llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
         const ExecOptions &options) {
  DType dtype = resultDType(op, 0, options);
  int64_t split = op.getSplit(), concat = op.getConcat();
  return forEachGroup(
      op, mesh, operands, results, options, [&](auto group, auto &out) {
        int64_t n = group.size();
        for (auto [receiver, rank] : llvm::enumerate(group)) {
          // The receiver at position i gets block i of every sender's split
          // dimension, placed at the sender's position along concat.
          Shape shape(operands[rank].front().shape());
          shape[split] /= n;
          int64_t size = shape[concat];
          shape[concat] *= n;
          Tensor received(dtype, shape);
          for (auto [sender, from] : llvm::enumerate(group))
            copySlices(block(operands[from].front(), split, n, receiver), 0,
                       received, sender * size, concat, size);
          out[rank].push_back(std::move(received));
        }
      });
}

LogicalResult
allSlice(AllSliceOp op, MeshOp mesh,
         llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
         llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
         const ExecOptions &options) {
  return forEachGroup(
      op, mesh, operands, results, options, [&](auto group, auto &out) {
        for (auto [position, rank] : llvm::enumerate(group))
          out[rank].push_back(block(operands[rank].front(), op.getDim(),
                                    group.size(), position));
      });
}

LogicalResult
axisIndex(AxisIndexOp op, MeshOp mesh,
          llvm::ArrayRef<llvm::SmallVector<Tensor>> operands,
          llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &results,
          const ExecOptions &options) {
  return forEachGroup(op, mesh, operands, results, options,
                      [&](auto group, auto &out) {
                        for (auto [position, rank] : llvm::enumerate(group)) {
                          Tensor index(DType::I64, {});
                          index.setInt(0, position);
                          out[rank].push_back(std::move(index));
                        }
                      });
}

class CollectiveRegistry {
public:
  static const CollectiveRegistry &get() {
    static const CollectiveRegistry registry = [] {
      CollectiveRegistry r;
      r.add<AllReduceOp>(allReduce);
      r.add<AllGatherOp>(allGather);
      r.add<ReduceScatterOp>(reduceScatter);
      r.add<AllToAllOp>(allToAll);
      r.add<AllSliceOp>(allSlice);
      r.add<AxisIndexOp>(axisIndex);
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
  void
  add(LogicalResult (*fn)(OpT, MeshOp,
                          llvm::ArrayRef<llvm::SmallVector<Tensor>>,
                          llvm::SmallVectorImpl<llvm::SmallVector<Tensor>> &,
                          const ExecOptions &)) {
    kernels[TypeID::get<OpT>()] = [fn](Operation *op, MeshOp mesh,
                                       auto operands, auto &results,
                                       const ExecOptions &options) {
      return fn(llvm::cast<OpT>(op), mesh, operands, results, options);
    };
  }

  llvm::DenseMap<TypeID, CollectiveKernel> kernels;
};

} // namespace

const CollectiveKernel *lookupCollectiveKernel(Operation *op) {
  return CollectiveRegistry::get().lookup(op);
}

} // namespace ppc
