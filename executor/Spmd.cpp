//===- Spmd.cpp - runs an SPMD program on a simulated mesh ----------------===//

#include "executor/Spmd.h"
#include "executor/Collectives.h"
#include "executor/Interpreter.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc {

FailureOr<llvm::SmallVector<llvm::SmallVector<Tensor>>>
runSpmd(func::FuncOp func, MeshOp mesh,
        llvm::ArrayRef<llvm::SmallVector<Tensor>> argsPerRank,
        const ExecOptions &options) {
  int64_t numRanks = mesh.getNumRanks();
  if (static_cast<int64_t>(argsPerRank.size()) != numRanks)
    return func.emitError()
           << "mesh @" << mesh.getSymName() << " has " << numRanks
           << " ranks, but arguments were given for " << argsPerRank.size();

  // While a rank runs an op on its own, its errors name it.
  int64_t currentRank = -1;
  ScopedDiagnosticHandler nameRank(func.getContext(), [&](Diagnostic &diag) {
    if (currentRank >= 0 && diag.getSeverity() == DiagnosticSeverity::Error)
      diag << " (rank " << currentRank << ")";
    return failure(); // not handled: pass it on
  });

  llvm::SmallVector<ExecutionFrame> frames;
  for (int64_t rank = 0; rank < numRanks; ++rank) {
    currentRank = rank;
    auto frame = ExecutionFrame::create(func, argsPerRank[rank]);
    if (failed(frame))
      return failure();
    frames.push_back(std::move(*frame));
  }

  for (Operation &op : func.getBody().front()) {
    if (llvm::isa<func::ReturnOp>(op)) {
      llvm::SmallVector<llvm::SmallVector<Tensor>> results;
      for (ExecutionFrame &frame : frames) {
        auto values = frame.takeOperands(op);
        if (failed(values))
          return failure();
        results.push_back(std::move(*values));
      }
      return results;
    }
    if (const CollectiveKernel *collective = lookupCollectiveKernel(&op)) {
      currentRank = -1;
      llvm::SmallVector<llvm::SmallVector<Tensor>> operands;
      for (ExecutionFrame &frame : frames) {
        auto values = frame.takeOperands(op);
        if (failed(values))
          return failure();
        operands.push_back(std::move(*values));
      }
      llvm::SmallVector<llvm::SmallVector<Tensor>> results;
      if (failed((*collective)(&op, mesh, operands, results, options)))
        return failure();
      for (auto [rank, frame] : llvm::enumerate(frames)) {
        currentRank = rank;
        if (failed(checkResults(&op, results[rank], options)))
          return failure();
        frame.setResults(op, results[rank]);
      }
      continue;
    }
    for (auto [rank, frame] : llvm::enumerate(frames)) {
      currentRank = rank;
      if (failed(frame.runOp(op, options)))
        return failure();
    }
  }
  return func.emitError() << "function has no return";
}

//===----------------------------------------------------------------------===//
// Sharding and unsharding tensors
//===----------------------------------------------------------------------===//

namespace {

std::string str(Attribute attr) {
  std::string s;
  llvm::raw_string_ostream os(s);
  attr.print(os);
  return s;
}

std::string str(llvm::ArrayRef<int64_t> shape) {
  return "[" +
         llvm::join(llvm::map_range(
                        shape, [](int64_t d) { return std::to_string(d); }),
                    ",") +
         "]";
}

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::SmallVector<StringRef> names(llvm::ArrayRef<StringAttr> axes) {
  return llvm::to_vector(
      llvm::map_range(axes, [](StringAttr a) { return a.getValue(); }));
}

/// Where `rank`'s part of each dimension lies: the index, among the parts,
/// of the part it holds, and the dimension's blocks (each block is split in
/// as many parts as the dimension; a rank holds its part of every block).
struct DimPart {
  int64_t part, blocks;
};

llvm::SmallVector<DimPart> partsOf(ShardingAttr sharding, MeshOp mesh, int64_t rank) {
  llvm::SmallVector<DimPart> parts;
  for (auto [d, axes] : llvm::enumerate(sharding.getDimAxes()))
    parts.push_back({*mesh.getIndexInGroup(rank, names(axes)), sharding.getBlocks(d)});
  return parts;
}

/// Calls `fn(localFlat, globalFlat)` for every element a rank holds, given
/// its parts of a tensor of `globalShape`.
void forEachLocalElement(llvm::ArrayRef<int64_t> localShape,
                         llvm::ArrayRef<int64_t> globalShape,
                         llvm::ArrayRef<DimPart> parts,
                         llvm::function_ref<void(int64_t, int64_t)> fn) {
  Shape localStrides = stridesOf(localShape),
        globalStrides = stridesOf(globalShape);
  int64_t count = 1;
  for (int64_t d : localShape)
    count *= d;
  for (int64_t local = 0; local < count; ++local) {
    int64_t global = 0;
    for (size_t d = 0; d < localShape.size(); ++d) {
      int64_t i = (local / localStrides[d]) % localShape[d];
      int64_t partSize = localShape[d] / parts[d].blocks;
      int64_t block = i / partSize, offset = i % partSize;
      global += (block * (globalShape[d] / parts[d].blocks) + parts[d].part * partSize +
                 offset) *
                globalStrides[d];
    }
    fn(local, global);
  }
}

void copyElement(const Tensor &src, int64_t from, Tensor &dst, int64_t to) {
  if (src.isFloat())
    dst.floats()[to] = src.floats()[from];
  else
    dst.ints()[to] = src.ints()[from];
}

void addElement(const Tensor &src, int64_t from, Tensor &dst, int64_t to) {
  if (src.isFloat())
    dst.floats()[to] += src.floats()[from];
  else
    dst.ints()[to] =
        static_cast<int64_t>(static_cast<uint64_t>(dst.ints()[to]) +
                             static_cast<uint64_t>(src.ints()[from]));
}

} // namespace

llvm::Expected<Tensor> shardTensor(const Tensor &global, ShardingAttr sharding,
                                   MeshOp mesh, int64_t rank) {
  auto localShape = sharding.getLocalShape(mesh, global.shape());
  if (failed(localShape))
    return error("sharding " + str(sharding) +
                 " does not fit a tensor of shape " + str(global.shape()) +
                 " on mesh @" + mesh.getSymName());
  if (rank < 0 || rank >= mesh.getNumRanks())
    return error(
        llvm::formatv("rank {0} is not on mesh @{1}", rank, mesh.getSymName()));
  Tensor local(global.dtype(), *localShape);
  if (*mesh.getIndexInGroup(rank, names(sharding.getPartialAxes())) != 0)
    return local;
  forEachLocalElement(
      *localShape, global.shape(), partsOf(sharding, mesh, rank),
      [&](int64_t l, int64_t g) { copyElement(global, g, local, l); });
  return local;
}

llvm::Expected<Tensor> unshardTensor(llvm::ArrayRef<Tensor> perRank,
                                     ShardingAttr sharding, MeshOp mesh) {
  if (static_cast<int64_t>(perRank.size()) != mesh.getNumRanks())
    return error(
        llvm::formatv("mesh @{0} has {1} ranks, but {2} tensors were given",
                      mesh.getSymName(), mesh.getNumRanks(), perRank.size()));
  const Tensor &first = perRank.front();
  Shape globalShape(first.shape());
  if (globalShape.size() != sharding.getRank())
    return error("sharding " + str(sharding) +
                 " does not fit a tensor of shape " + str(first.shape()));
  for (auto [d, size, axes] : llvm::enumerate(globalShape, sharding.getDimAxes())) {
    if (size % sharding.getBlocks(d) != 0)
      return error("sharding " + str(sharding) + " does not fit a local tensor of shape " +
                   str(first.shape()));
    auto parts = mesh.getGroupSize(names(axes));
    if (failed(parts))
      return error("sharding " + str(sharding) + " uses axes that mesh @" +
                   mesh.getSymName() + " does not have");
    size *= *parts;
  }
  for (auto [rank, t] : llvm::enumerate(perRank))
    if (t.shape() != first.shape() || t.dtype() != first.dtype())
      return error(
          llvm::formatv("rank {0} holds {1} {2}, but rank 0 holds {3} {4}",
                        rank, dtypeName(t.dtype()), str(t.shape()),
                        dtypeName(first.dtype()), str(first.shape())));

  // Ranks off coordinate 0 of a replicated axis hold copies; skip them.
  llvm::SmallVector<unsigned> replicated;
  for (auto [index, axis] : llvm::enumerate(mesh.getAxisNames()))
    if (!sharding.getDimOfAxis(axis) && !sharding.isPartialOver(axis))
      replicated.push_back(index);
  bool partial = !sharding.getPartialAxes().empty();
  Tensor global(first.dtype(), globalShape);
  for (auto [rank, local] : llvm::enumerate(perRank)) {
    llvm::SmallVector<int64_t> coordinates = mesh.getCoordinates(rank);
    if (llvm::any_of(replicated,
                     [&](unsigned axis) { return coordinates[axis] != 0; }))
      continue;
    forEachLocalElement(local.shape(), globalShape, partsOf(sharding, mesh, rank),
                        [&](int64_t l, int64_t g) {
                          if (partial)
                            addElement(local, l, global, g);
                          else
                            copyElement(local, l, global, g);
                        });
  }
  if (partial)
    global.roundToDType();
  return global;
}

} // namespace ppc
