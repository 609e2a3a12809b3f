//===- PpcAttrs.cpp - attributes of the ppc dialect -----------------------===//

#include "ir/PpcAttrs.h"
#include "ir/PpcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

#define GET_ATTRDEF_CLASSES
#include "ir/PpcAttrs.cpp.inc"

namespace ppc {

void PpcDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/PpcAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Assembly: #ppc.sharding<@mesh, [[dp], [], [tp]], partial = [pp]>
//===----------------------------------------------------------------------===//

/// Axis names print bare when they lex as one keyword, else quoted.
static void printAxisName(AsmPrinter &printer, StringAttr axis) {
  StringRef name = axis.getValue();
  bool bare = !name.empty() && (llvm::isAlpha(name.front()) || name.front() == '_') &&
              llvm::all_of(name, [](char c) {
                return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
              });
  if (bare)
    printer << name;
  else
    printer.printString(name);
}

static void printAxisList(AsmPrinter &printer, ArrayRef<StringAttr> axes) {
  printer << '[';
  llvm::interleaveComma(axes, printer, [&](StringAttr axis) { printAxisName(printer, axis); });
  printer << ']';
}

static ParseResult parseAxisList(AsmParser &parser, SmallVectorImpl<StringAttr> &axes) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
    std::string name;
    if (parser.parseKeywordOrString(&name))
      return failure();
    axes.push_back(parser.getBuilder().getStringAttr(name));
    return success();
  });
}

/// A dimension: `[axes]`, or `B * [axes]` for one split in B blocks.
static ParseResult parseDim(AsmParser &parser, SmallVectorImpl<StringAttr> &axes, int64_t &blocks) {
  blocks = 1;
  OptionalParseResult count = parser.parseOptionalInteger(blocks);
  if (count.has_value() && (failed(*count) || parser.parseStar()))
    return failure();
  return parseAxisList(parser, axes);
}

/// All-one blocks are stored as none, so equal shardings are one attribute.
static ArrayRef<int64_t> canonicalBlocks(ArrayRef<int64_t> blocks) {
  return llvm::all_of(blocks, [](int64_t b) { return b == 1; }) ? ArrayRef<int64_t>() : blocks;
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<SmallVector<StringAttr>> dims;
  SmallVector<int64_t> blocks;
  SmallVector<StringAttr> partial;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        return parseDim(parser, dims.emplace_back(), blocks.emplace_back());
      }))
    return {};
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseKeyword("partial") || parser.parseEqual() || parseAxisList(parser, partial)))
    return {};
  if (parser.parseGreater())
    return {};
  SmallVector<ArrayRef<StringAttr>> dimRefs(dims.begin(), dims.end());
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, parser.getContext(),
                    mesh, dimRefs, partial, canonicalBlocks(blocks));
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printer.printAttributeWithoutType(getMesh());
  printer << ", [";
  for (auto [d, axes] : llvm::enumerate(getDimAxes())) {
    if (d)
      printer << ", ";
    if (getBlocks(d) != 1)
      printer << getBlocks(d) << " * ";
    printAxisList(printer, axes);
  }
  printer << ']';
  if (!getPartialAxes().empty()) {
    printer << ", partial = ";
    printAxisList(printer, getPartialAxes());
  }
  printer << '>';
}

//===----------------------------------------------------------------------===//
// Construction and queries
//===----------------------------------------------------------------------===//

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayRef<ArrayRef<StringAttr>> dimAxes,
                                   ArrayRef<StringAttr> partialAxes, ArrayRef<int64_t> dimBlocks) {
  if (!mesh)
    return emitError() << "sharding needs a mesh";
  if (!dimBlocks.empty() && dimBlocks.size() != dimAxes.size())
    return emitError() << "sharding has " << dimBlocks.size() << " block counts for "
                       << dimAxes.size() << " dimensions";
  for (auto [blocks, axes] : llvm::zip(dimBlocks, dimAxes))
    if (blocks < 1 || (blocks > 1 && axes.empty()))
      return emitError() << "sharding has " << blocks << " blocks on a dimension "
                         << (blocks < 1 ? "(must be at least 1)" : "that is not split");
  llvm::StringSet<> seen;
  auto check = [&](StringAttr axis) -> LogicalResult {
    if (!axis || axis.getValue().empty())
      return emitError() << "sharding has an empty axis name";
    if (!seen.insert(axis.getValue()).second)
      return emitError() << "sharding uses mesh axis '" << axis.getValue() << "' more than once";
    return success();
  };
  for (ArrayRef<StringAttr> axes : dimAxes)
    for (StringAttr axis : axes)
      if (failed(check(axis)))
        return failure();
  for (StringAttr axis : partialAxes)
    if (failed(check(axis)))
      return failure();
  return success();
}

ShardingAttr ShardingAttr::get(MLIRContext *context, StringRef mesh,
                               ArrayRef<SmallVector<StringRef>> dimAxes,
                               ArrayRef<StringRef> partialAxes, ArrayRef<int64_t> dimBlocks) {
  auto toAttrs = [&](ArrayRef<StringRef> names) {
    return llvm::to_vector(
        llvm::map_range(names, [&](StringRef name) { return StringAttr::get(context, name); }));
  };
  SmallVector<SmallVector<StringAttr>> dims;
  for (ArrayRef<StringRef> axes : dimAxes)
    dims.push_back(toAttrs(axes));
  SmallVector<ArrayRef<StringAttr>> dimRefs(dims.begin(), dims.end());
  return get(context, FlatSymbolRefAttr::get(context, mesh), dimRefs, toAttrs(partialAxes),
             canonicalBlocks(dimBlocks));
}

bool ShardingAttr::isReplicated() const {
  return getPartialAxes().empty() &&
         llvm::all_of(getDimAxes(), [](ArrayRef<StringAttr> axes) { return axes.empty(); });
}

std::optional<unsigned> ShardingAttr::getDimOfAxis(StringRef axis) const {
  for (auto [dim, axes] : llvm::enumerate(getDimAxes()))
    if (llvm::any_of(axes, [&](StringAttr a) { return a.getValue() == axis; }))
      return dim;
  return std::nullopt;
}

bool ShardingAttr::isPartialOver(StringRef axis) const {
  return llvm::any_of(getPartialAxes(), [&](StringAttr a) { return a.getValue() == axis; });
}

FailureOr<SmallVector<int64_t>> ShardingAttr::getLocalShape(MeshOp mesh,
                                                            ArrayRef<int64_t> globalShape) const {
  if (globalShape.size() != getRank())
    return failure();
  for (StringAttr axis : getPartialAxes())
    if (!mesh.getAxisIndex(axis.getValue()))
      return failure();
  SmallVector<int64_t> local;
  for (auto [d, size, axes] : llvm::enumerate(globalShape, getDimAxes())) {
    auto names = llvm::to_vector(llvm::map_range(axes, [](StringAttr a) { return a.getValue(); }));
    FailureOr<int64_t> parts = mesh.getGroupSize(names);
    if (failed(parts) || size % (*parts * getBlocks(d)) != 0)
      return failure();
    local.push_back(size / *parts);
  }
  return local;
}

} // namespace ppc
