//===- MeshOps.cpp - the device mesh and the collectives ------------------===//
//
// Rank arithmetic of `ppc.mesh` (axes major to minor) and the verifiers of
// the collectives and of send/recv: local checks in `verify`, checks against
// the mesh in `verifySymbolUses` (for collectives through `verifyGroupSize`),
// which the enclosing symbol table runs once the mesh itself is verified.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "runtime/Layout.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace ppc {

llvm::SmallVector<StringRef> axisNames(ArrayAttr axes) {
  return llvm::to_vector(
      llvm::map_range(axes.getAsRange<StringAttr>(), [](StringAttr a) { return a.getValue(); }));
}

//===----------------------------------------------------------------------===//
// ppc.mesh
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  if (getAxes().size() != getShape().size())
    return emitOpError() << "has " << getAxes().size() << " axes but " << getShape().size()
                         << " sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(getAxisNames(), getShape())) {
    if (name.empty())
      return emitOpError() << "has an axis with an empty name";
    if (!seen.insert(name).second)
      return emitOpError() << "has axis '" << name << "' twice";
    if (size <= 0)
      return emitOpError() << "axis '" << name << "' has size " << size
                           << ", expected a positive size";
  }
  return success();
}

llvm::SmallVector<StringRef> MeshOp::getAxisNames() { return axisNames(getAxes()); }

std::optional<unsigned> MeshOp::getAxisIndex(StringRef axis) {
  for (auto [index, name] : llvm::enumerate(getAxes().getAsRange<StringAttr>()))
    if (name.getValue() == axis)
      return index;
  return std::nullopt;
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef axis) {
  std::optional<unsigned> index = getAxisIndex(axis);
  if (!index)
    return std::nullopt;
  return getShape()[*index];
}

int64_t MeshOp::getNumRanks() {
  int64_t ranks = 1;
  for (int64_t size : getShape())
    ranks *= size;
  return ranks;
}

llvm::SmallVector<int64_t> MeshOp::getCoordinates(int64_t rank) {
  ArrayRef<int64_t> shape = getShape();
  llvm::SmallVector<int64_t> coordinates(shape.size());
  ppcrt::meshCoordinates(rank, shape.data(), shape.size(), coordinates.data());
  return coordinates;
}

std::optional<int64_t> MeshOp::getCoordinate(int64_t rank, StringRef axis) {
  std::optional<unsigned> index = getAxisIndex(axis);
  if (!index)
    return std::nullopt;
  return getCoordinates(rank)[*index];
}

int64_t MeshOp::getRankAt(ArrayRef<int64_t> coordinates) {
  return ppcrt::meshRank(coordinates.data(), getShape().data(),
                         std::min(coordinates.size(), getShape().size()));
}

/// The positions of `axes` in the mesh's axis list; fails on an unknown or
/// repeated axis.
static FailureOr<llvm::SmallVector<unsigned>> axisIndices(MeshOp mesh, ArrayRef<StringRef> axes) {
  llvm::SmallVector<unsigned> indices;
  for (StringRef axis : axes) {
    std::optional<unsigned> index = mesh.getAxisIndex(axis);
    if (!index || llvm::is_contained(indices, *index))
      return failure();
    indices.push_back(*index);
  }
  return indices;
}

FailureOr<int64_t> MeshOp::getGroupSize(ArrayRef<StringRef> axes) {
  auto indices = axisIndices(*this, axes);
  if (failed(indices))
    return failure();
  int64_t size = 1;
  for (unsigned index : *indices)
    size *= getShape()[index];
  return size;
}

FailureOr<int64_t> MeshOp::getIndexInGroup(int64_t rank, ArrayRef<StringRef> axes) {
  auto indices = axisIndices(*this, axes);
  if (failed(indices))
    return failure();
  llvm::SmallVector<int64_t> coordinates = getCoordinates(rank);
  int64_t position = 0;
  for (unsigned index : *indices)
    position = position * getShape()[index] + coordinates[index];
  return position;
}

FailureOr<llvm::SmallVector<int64_t>> MeshOp::getGroup(int64_t rank, ArrayRef<StringRef> axes) {
  auto indices = axisIndices(*this, axes);
  FailureOr<int64_t> size = getGroupSize(axes);
  if (failed(indices) || failed(size))
    return failure();
  llvm::SmallVector<int64_t> coordinates = getCoordinates(rank);
  llvm::SmallVector<int64_t> group;
  for (int64_t position = 0; position < *size; ++position) {
    // Position p sets the coordinates on `axes` row-major, last axis fastest.
    int64_t rest = position;
    for (unsigned index : llvm::reverse(*indices)) {
      coordinates[index] = rest % getShape()[index];
      rest /= getShape()[index];
    }
    group.push_back(getRankAt(coordinates));
  }
  return group;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

FailureOr<int64_t> verifyCollectiveMesh(Operation *op, SymbolTableCollection &symbolTable,
                                        FlatSymbolRefAttr meshName, ArrayAttr axes) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(op, meshName);
  if (!mesh) {
    op->emitOpError() << "names " << meshName << ", which is not a ppc.mesh";
    return failure();
  }
  int64_t size = 1;
  for (StringRef axis : axisNames(axes)) {
    std::optional<int64_t> axisSize = mesh.getAxisSize(axis);
    if (!axisSize) {
      op->emitOpError() << "axis '" << axis << "' is not an axis of mesh " << meshName << " ("
                        << mesh.getAxes() << ")";
      return failure();
    }
    size *= *axisSize;
  }
  return size;
}

/// Axis lists of collectives: unique, non-empty names.
static LogicalResult verifyAxisList(Operation *op, ArrayAttr axes) {
  llvm::StringSet<> seen;
  for (StringRef axis : axisNames(axes)) {
    if (axis.empty())
      return op->emitOpError() << "has an empty axis name";
    if (!seen.insert(axis).second)
      return op->emitOpError() << "lists axis '" << axis << "' twice";
  }
  return success();
}

static LogicalResult verifyDimIndex(Operation *op, StringRef what, int64_t dim, int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << what << " = " << dim << " is out of range for rank " << rank;
  return success();
}

/// Operand and result have the same rank and agree on every dimension
/// except `changed`.
static LogicalResult verifySameOtherDims(Operation *op, ShapedType input, ShapedType result,
                                         ArrayRef<int64_t> changed) {
  if (input.getRank() != result.getRank())
    return op->emitOpError() << "operand has rank " << input.getRank() << " but result has rank "
                             << result.getRank();
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (!llvm::is_contained(changed, d) && input.getDimSize(d) != result.getDimSize(d))
      return op->emitOpError() << "operand and result differ in dimension " << d << " ("
                               << input.getDimSize(d) << " vs " << result.getDimSize(d) << ")";
  return success();
}

static LogicalResult verifyScaledDim(Operation *op, int64_t dim, int64_t actual, int64_t expected,
                                     StringRef rule) {
  if (actual != expected)
    return op->emitOpError() << "result dimension " << dim << " is " << actual << ", expected "
                             << expected << " (" << rule << ")";
  return success();
}

/// Local checks of a collective that changes one dimension `dim`.
static LogicalResult verifyOneDimOp(Operation *op, ArrayAttr axes, Type inputType, Type resultType,
                                    int64_t dim) {
  auto input = llvm::cast<ShapedType>(inputType);
  auto result = llvm::cast<ShapedType>(resultType);
  if (failed(verifyAxisList(op, axes)) || failed(verifyDimIndex(op, "dim", dim, input.getRank())))
    return failure();
  return verifySameOtherDims(op, input, result, {dim});
}

/// The result's `dim` is the operand's divided by the group size.
static LogicalResult verifyDividedDim(Operation *op, Type inputType, Type resultType, int64_t dim,
                                      int64_t groupSize) {
  int64_t size = llvm::cast<ShapedType>(inputType).getDimSize(dim);
  if (size % groupSize != 0)
    return op->emitOpError() << "operand dimension " << dim << " (" << size
                             << ") does not divide by the group size " << groupSize;
  return verifyScaledDim(
      op, dim, llvm::cast<ShapedType>(resultType).getDimSize(dim), size / groupSize,
      "operand dimension divided by the group size " + std::to_string(groupSize));
}

LogicalResult AllReduceOp::verify() { return verifyAxisList(*this, getAxes()); }

LogicalResult AllReduceOp::verifyGroupSize(int64_t) { return success(); }

LogicalResult AllGatherOp::verify() {
  return verifyOneDimOp(*this, getAxes(), getInput().getType(), getResult().getType(), getDim());
}

LogicalResult AllGatherOp::verifyGroupSize(int64_t groupSize) {
  auto input = llvm::cast<ShapedType>(getInput().getType());
  auto result = llvm::cast<ShapedType>(getResult().getType());
  return verifyScaledDim(*this, getDim(), result.getDimSize(getDim()),
                         input.getDimSize(getDim()) * groupSize,
                         "operand dimension times the group size " + std::to_string(groupSize));
}

LogicalResult ReduceScatterOp::verify() {
  return verifyOneDimOp(*this, getAxes(), getInput().getType(), getResult().getType(), getDim());
}

LogicalResult ReduceScatterOp::verifyGroupSize(int64_t groupSize) {
  return verifyDividedDim(*this, getInput().getType(), getResult().getType(), getDim(), groupSize);
}

LogicalResult AllToAllOp::verify() {
  auto input = llvm::cast<ShapedType>(getInput().getType());
  auto result = llvm::cast<ShapedType>(getResult().getType());
  if (failed(verifyAxisList(*this, getAxes())) ||
      failed(verifyDimIndex(*this, "split", getSplit(), input.getRank())) ||
      failed(verifyDimIndex(*this, "concat", getConcat(), input.getRank())))
    return failure();
  return verifySameOtherDims(*this, input, result,
                             {static_cast<int64_t>(getSplit()), static_cast<int64_t>(getConcat())});
}

LogicalResult AllToAllOp::verifyGroupSize(int64_t groupSize) {
  auto input = llvm::cast<ShapedType>(getInput().getType());
  auto result = llvm::cast<ShapedType>(getResult().getType());
  int64_t split = getSplit(), concat = getConcat();
  if (input.getDimSize(split) % groupSize != 0)
    return emitOpError() << "operand dimension " << split << " (" << input.getDimSize(split)
                         << ") does not divide by the group size " << groupSize;
  llvm::SmallVector<int64_t> expected(input.getShape());
  expected[split] /= groupSize;
  expected[concat] *= groupSize;
  for (int64_t dim : {split, concat})
    if (failed(verifyScaledDim(*this, dim, result.getDimSize(dim), expected[dim],
                               "split divides and concat multiplies by the group "
                               "size " +
                                   std::to_string(groupSize))))
      return failure();
  return success();
}

LogicalResult AllSliceOp::verify() {
  return verifyOneDimOp(*this, getAxes(), getInput().getType(), getResult().getType(), getDim());
}

LogicalResult AllSliceOp::verifyGroupSize(int64_t groupSize) {
  return verifyDividedDim(*this, getInput().getType(), getResult().getType(), getDim(), groupSize);
}

LogicalResult AxisIndexOp::verify() { return verifyAxisList(*this, getAxes()); }

LogicalResult AxisIndexOp::verifyGroupSize(int64_t) { return success(); }

//===----------------------------------------------------------------------===//
// Point-to-point communication
//===----------------------------------------------------------------------===//

/// Checks that `mesh` names a `ppc.mesh` with an axis `axis` and that `peer`
/// is a coordinate on it.
static LogicalResult verifyPeer(Operation *op, SymbolTableCollection &symbolTable,
                                FlatSymbolRefAttr meshName, StringRef axis, int64_t peer) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(op, meshName);
  if (!mesh)
    return op->emitOpError() << "names " << meshName << ", which is not a ppc.mesh";
  std::optional<int64_t> size = mesh.getAxisSize(axis);
  if (!size)
    return op->emitOpError() << "axis '" << axis << "' is not an axis of mesh " << meshName << " ("
                             << mesh.getAxes() << ")";
  if (peer < 0 || peer >= *size)
    return op->emitOpError() << "peer " << peer << " is out of range [0, " << *size << ") of axis '"
                             << axis << "'";
  return success();
}

static StringRef valueNameOf(Operation *op) {
  auto name = op->getAttrOfType<StringAttr>(SendOp::kValueAttrName);
  return name ? name.getValue() : StringRef();
}

static std::optional<int64_t> peerRankOf(MeshOp mesh, int64_t rank, StringRef axis, int64_t peer) {
  std::optional<unsigned> index = mesh.getAxisIndex(axis);
  if (!index || peer < 0 || peer >= mesh.getShape()[*index] || rank < 0 ||
      rank >= mesh.getNumRanks())
    return std::nullopt;
  llvm::SmallVector<int64_t> coordinates = mesh.getCoordinates(rank);
  coordinates[*index] = peer;
  return mesh.getRankAt(coordinates);
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyPeer(*this, symbolTable, getMeshAttr(), getAxis(), static_cast<int64_t>(getPeer()));
}

StringRef SendOp::getValueName() { return valueNameOf(*this); }

std::optional<int64_t> SendOp::getPeerRank(MeshOp mesh, int64_t rank) {
  return peerRankOf(mesh, rank, getAxis(), static_cast<int64_t>(getPeer()));
}

MeshOp SendOp::getMeshOp() {
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(*this, getMeshAttr());
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyPeer(*this, symbolTable, getMeshAttr(), getAxis(), static_cast<int64_t>(getPeer()));
}

StringRef RecvOp::getValueName() { return valueNameOf(*this); }

std::optional<int64_t> RecvOp::getPeerRank(MeshOp mesh, int64_t rank) {
  return peerRankOf(mesh, rank, getAxis(), static_cast<int64_t>(getPeer()));
}

MeshOp RecvOp::getMeshOp() {
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(*this, getMeshAttr());
}

} // namespace ppc

//===----------------------------------------------------------------------===//
// Placement
//===----------------------------------------------------------------------===//

namespace ppc {

LogicalResult TransferOp::verify() {
  if (getTo() != "host" && getTo() != "device")
    return emitOpError() << "'to' must be \"host\" or \"device\", not \"" << getTo() << "\"";
  return success();
}

bool onHost(Value value) {
  if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
    auto fn = llvm::dyn_cast_or_null<FunctionOpInterface>(arg.getOwner()->getParentOp());
    return fn && arg.getOwner()->isEntryBlock() &&
           fn.getArgAttr(arg.getArgNumber(), PpcDialect::kPlaceAttrName);
  }
  Operation *op = value.getDefiningOp();
  if (auto transfer = llvm::dyn_cast<TransferOp>(op))
    return transfer.toHost();
  return op->hasAttr(PpcDialect::kPlaceAttrName);
}

bool runsOnHost(Operation *op) {
  return !llvm::isa<TransferOp>(op) && op->hasAttr(PpcDialect::kPlaceAttrName);
}

} // namespace ppc
