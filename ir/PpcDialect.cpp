//===- PpcDialect.cpp - the ppc dialect -----------------------------------===//

#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace ppc;

#include "ir/PpcDialect.cpp.inc"

void PpcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/PpcOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *PpcDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                           Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}

/// Checks a sharding against the type of the value it describes and,
/// when `anchor` sits in a symbol table, against the mesh it names.
static LogicalResult verifyShardingOf(Operation *anchor, ShardingAttr sharding, Type type,
                                      llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return emitError() << "a sharding needs a ranked tensor, got " << type;
  if (tensor.getRank() != sharding.getRank())
    return emitError() << "sharding has " << sharding.getRank()
                       << " dimensions, but the value has type " << type;
  if (!SymbolTable::getNearestSymbolTable(anchor))
    return success();
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(anchor, sharding.getMesh());
  if (!mesh)
    return emitError() << "sharding names " << sharding.getMesh() << ", which is not a ppc.mesh";
  auto checkAxis = [&](StringAttr axis) -> LogicalResult {
    if (!mesh.getAxisIndex(axis.getValue()))
      return emitError() << "sharding uses axis '" << axis.getValue() << "', which mesh "
                         << sharding.getMesh() << " does not have";
    return success();
  };
  for (llvm::ArrayRef<StringAttr> axes : sharding.getDimAxes())
    for (StringAttr axis : axes)
      if (failed(checkAxis(axis)))
        return failure();
  for (StringAttr axis : sharding.getPartialAxes())
    if (failed(checkAxis(axis)))
      return failure();
  return success();
}

/// `ppc.sharding` on argument or result `index` of a function: a sharding
/// of that argument's or result's type.
static LogicalResult verifyFunctionSharding(Operation *op, NamedAttribute attr, unsigned index,
                                            bool isResult) {
  auto sharding = llvm::dyn_cast<ShardingAttr>(attr.getValue());
  if (!sharding)
    return op->emitError() << "'" << PpcDialect::kShardingAttrName << "' must be a #ppc.sharding";
  auto function = llvm::dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return success();
  llvm::ArrayRef<Type> types = isResult ? function.getResultTypes() : function.getArgumentTypes();
  if (index >= types.size())
    return success();
  return verifyShardingOf(op, sharding, types[index], [&] {
    return op->emitError() << (isResult ? "result " : "argument ") << index << ": ";
  });
}

/// `ppc.input`, `ppc.param`, `ppc.output`, `ppc.grad` and `ppc.state` name
/// the ONNX value (or parameter) behind a function argument or result; each
/// must be a non-empty string. `ppc.step` marks the step argument;
/// `ppc.hyper` names a hyper-parameter argument ("lr", "beta1", ...);
/// `ppc.sharding` says how the value is split over a mesh.
static LogicalResult verifyNameAttr(Operation *op, NamedAttribute attr, unsigned index,
                                    bool isResult, llvm::ArrayRef<llvm::StringLiteral> allowed) {
  if (!llvm::is_contained(allowed, attr.getName().getValue()))
    return op->emitError() << "unknown ppc attribute '" << attr.getName().getValue() << "' here";
  if (attr.getName().getValue() == PpcDialect::kShardingAttrName)
    return verifyFunctionSharding(op, attr, index, isResult);
  if (attr.getName().getValue() == PpcDialect::kPlaceAttrName) {
    auto place = llvm::dyn_cast<StringAttr>(attr.getValue());
    if (!place || place.getValue() != "host")
      return op->emitError() << "'" << PpcDialect::kPlaceAttrName << "' must be \"host\"";
    return success();
  }
  if (attr.getName().getValue() == PpcDialect::kStepAttrName) {
    if (!llvm::isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << PpcDialect::kStepAttrName << "' must be a unit attribute";
    return success();
  }
  auto name = llvm::dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitError() << "'" << attr.getName().getValue() << "' must be a non-empty string";
  return success();
}

/// An argument a ppc attribute names is a tensor within the size limit,
/// as every ppc op's result is (BoundedTensorsTrait).
static LogicalResult verifyArgumentSize(Operation *op, unsigned index) {
  auto function = llvm::dyn_cast<FunctionOpInterface>(op);
  if (!function || index >= function.getNumArguments())
    return success();
  auto shaped = llvm::dyn_cast<ShapedType>(function.getArgumentTypes()[index]);
  if (!shaped || !shaped.hasRank())
    return success();
  if (llvm::Expected<int64_t> bytes = tensorTypeBytes(shaped); !bytes)
    return op->emitError() << "argument " << index << ": " << llvm::toString(bytes.takeError());
  return success();
}

LogicalResult PpcDialect::verifyRegionArgAttribute(Operation *op, unsigned, unsigned argIndex,
                                                   NamedAttribute attr) {
  if (failed(verifyNameAttr(op, attr, argIndex, /*isResult=*/false,
                            {kInputAttrName, kParamAttrName, kStateAttrName, kStepAttrName,
                             kHyperAttrName, kShardingAttrName, kPlaceAttrName})))
    return failure();
  // Once per argument: a sharding or place accompanies one of the others.
  if (attr.getName().getValue() == kShardingAttrName || attr.getName().getValue() == kPlaceAttrName)
    return success();
  return verifyArgumentSize(op, argIndex);
}

LogicalResult PpcDialect::verifyRegionResultAttribute(Operation *op, unsigned, unsigned resultIndex,
                                                      NamedAttribute attr) {
  return verifyNameAttr(op, attr, resultIndex, /*isResult=*/true,
                        {kOutputAttrName, kParamAttrName, kGradAttrName, kStateAttrName,
                         kShardingAttrName, kPlaceAttrName});
}

/// `ppc.place` on an op: "host" (its results live in host memory).
/// `ppc.shardings` on an op: one sharding per result. Other discardable
/// `ppc.*` attributes on ops (the module's `ppc.source` and `ppc.opset`)
/// are not checked here.
LogicalResult PpcDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName().getValue() == kPlaceAttrName) {
    auto place = llvm::dyn_cast<StringAttr>(attr.getValue());
    if (!place || place.getValue() != "host")
      return op->emitOpError() << "'" << kPlaceAttrName << "' must be \"host\"";
    return success();
  }
  if (attr.getName().getValue() != kShardingsAttrName)
    return success();
  auto array = llvm::dyn_cast<ArrayAttr>(attr.getValue());
  if (!array || !llvm::all_of(array, [](Attribute a) { return llvm::isa<ShardingAttr>(a); }))
    return op->emitOpError() << "'" << kShardingsAttrName << "' must be an array of #ppc.sharding";
  if (array.size() != op->getNumResults())
    return op->emitOpError() << "'" << kShardingsAttrName << "' has " << array.size()
                             << " shardings for " << op->getNumResults() << " results";
  for (auto [index, sharding] : llvm::enumerate(array.getAsRange<ShardingAttr>()))
    if (failed(verifyShardingOf(op, sharding, op->getResult(index).getType(),
                                [&] { return op->emitOpError() << "result " << index << ": "; })))
      return failure();
  return success();
}
