//===- EmitContext.cpp - naming, types and places of emitted values -------===//

#include "codegen/EmitContext.h"
#include "ir/ShapeRules.h"
#include "runtime/Printable.h"

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace ppc::codegen {

FailureOr<std::string> cType(Type type) {
  if (type.isF32())
    return std::string("float");
  if (type.isF64())
    return std::string("double");
  if (type.isInteger(1))
    return std::string("uint8_t");
  if (auto integer = llvm::dyn_cast<IntegerType>(type)) {
    unsigned width = integer.getWidth();
    if (width == 8 || width == 16 || width == 32 || width == 64)
      return (integer.isUnsigned() ? "uint" : "int") + std::to_string(width) + "_t";
  }
  return failure();
}

FailureOr<std::string> runtimeDType(Type type) {
  llvm::StringRef name;
  if (type.isF32())
    name = "F32";
  else if (type.isF64())
    name = "F64";
  else if (type.isBF16())
    name = "BF16";
  else if (type.isF16())
    name = "F16";
  else if (type.isInteger(1))
    name = "I1";
  else if (type.isInteger(64))
    name = "I64";
  else if (type.isInteger(32))
    name = "I32";
  else if (type.isInteger(8))
    name = type.isUnsignedInteger() ? "U8" : "I8";
  else
    return failure();
  return ("ppcrt::DType::" + name).str();
}

std::string nodeName(Operation *op) {
  std::string name;
  op->getLoc()->walk([&](Location loc) {
    if (auto named = llvm::dyn_cast<NameLoc>(loc)) {
      name = printable(named.getName().getValue());
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

std::string quote(llvm::StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      // Three octal digits end the escape whatever follows (a hex escape
      // would swallow the next character if it is a hex digit).
      unsigned byte = (unsigned char)c;
      out += {'\\', char('0' + (byte >> 6)), char('0' + ((byte >> 3) & 7)), char('0' + (byte & 7))};
    }
  }
  return out + "\"";
}

std::string braces(llvm::ArrayRef<int64_t> values) {
  std::string out = "{";
  for (auto [i, v] : llvm::enumerate(values))
    out += (i ? ", " : "") + std::to_string(v);
  return out + "}";
}

ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

std::string linesAlong(ArrayRef<int64_t> shape, int64_t axis) {
  return llvm::formatv("{0}, {1}, {2}", numElements(shape.take_front(axis)), shape[axis],
                       numElements(shape.drop_front(axis + 1)))
      .str();
}

std::string cppLiteral(Attribute value, Type type) {
  if (auto f = llvm::dyn_cast<FloatAttr>(value)) {
    double d = f.getValueAsDouble();
    if (std::isnan(d))
      return "NAN";
    if (std::isinf(d))
      return d > 0 ? "INFINITY" : "-INFINITY";
    char text[64];
    std::snprintf(text, sizeof(text), "%a", d);
    return text;
  }
  auto i = llvm::cast<IntegerAttr>(value);
  if (type.isInteger(1))
    return std::to_string(i.getValue().getBoolValue());
  return "INT64_C(" + std::to_string(i.getValue().getSExtValue()) + ")";
}

void EmitContext::beginProgram(llvm::raw_ostream &body, llvm::DenseMap<Value, Value> storageMap,
                               llvm::DenseMap<Value, int64_t> offsetMap,
                               llvm::DenseMap<Operation *, int64_t> workspaceOffsets,
                               const FusionPlan &fusion, const StridedViews &strided) {
  bodyStream = &body;
  fusionPlan = &fusion;
  views = &strided;
  storage = std::move(storageMap);
  offsets = std::move(offsetMap);
  workspaces = std::move(workspaceOffsets);
  names.clear();
  nextName = 0;
  nextTicket = 0;
}

const StridedView *EmitContext::stridedView(Value value) const {
  auto it = views->views.find(value);
  return it == views->views.end() ? nullptr : &it->second;
}

Value EmitContext::holder(Value value) const {
  auto it = storage.find(value);
  return it == storage.end() ? value : it->second;
}

std::string EmitContext::elementType(Value value) {
  Type element = llvm::cast<ShapedType>(value.getType()).getElementType();
  if (element.isBF16() && !spelling->bf16Type().empty())
    return spelling->bf16Type().str();
  auto type = cType(element);
  return succeeded(type) ? *type : "void";
}

std::string EmitContext::ptr(Value value) {
  auto it = names.find(value);
  if (it != names.end())
    return it->second;
  std::string name = "v" + std::to_string(nextName++);
  std::string type = elementType(value);
  body() << llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>({3} + {2});\n", type, name,
                          offsets.lookup(holder(value)),
                          onHost(holder(value)) ? "hostArena" : "arena");
  names[value] = name;
  return name;
}

std::string EmitContext::workspace(Operation *op, llvm::StringRef type) {
  auto it = workspaces.find(op);
  if (it == workspaces.end())
    return "nullptr";
  return llvm::formatv("reinterpret_cast<{0} *>(arena + {1})", type, it->second).str();
}

std::string EmitContext::freshName(llvm::StringRef prefix, Operation *op) {
  std::string node = nodeName(op), clean;
  for (char c : node)
    clean += llvm::isAlnum(c) ? c : '_';
  if (clean.size() > 40)
    clean = clean.substr(clean.size() - 40);
  return (prefix + llvm::Twine(nextDefinition++) + (clean.empty() ? "" : "_") + clean).str();
}

std::string EmitContext::constArray(Operation *op, ArrayRef<int64_t> values) {
  if (values.empty())
    return "nullptr";
  std::string name = freshName("dims", op);
  kernels << "static const int64_t " << name << "[] = " << braces(values) << ";\n";
  return name;
}

int EmitContext::group(llvm::ArrayRef<llvm::StringRef> axes) {
  std::string key = llvm::join(axes, ",");
  for (auto [i, g] : llvm::enumerate(groups))
    if (g == key)
      return i;
  groups.push_back(key);
  return groups.size() - 1;
}

std::string EmitContext::what(Operation *op, llvm::StringRef axes) {
  std::string node = nodeName(op);
  return quote((op->getName().stripDialect() + " on " + axes +
                (node.empty() ? "" : " for node '" + node + "'"))
                   .str());
}

void EmitContext::comment(Operation *op) {
  std::string node = nodeName(op);
  body() << "  // " << op->getName().getStringRef();
  if (!node.empty())
    body() << " '" << node << "'";
  body() << "\n";
}

std::string EmitContext::ticket() {
  if (!spelling->asynchronousCommunication())
    return "";
  pendingTicket = "ticket" + std::to_string(nextTicket++);
  return "const ppcrt::Ticket " + pendingTicket + " = ";
}

int EmitContext::kernelError(const std::string &message) {
  errors.push_back(message);
  return int(errors.size());
}

LogicalResult EmitContext::unsupported(Operation *op, const llvm::Twine &why) {
  return op->emitError() << "code generation: " << why;
}

} // namespace ppc::codegen
