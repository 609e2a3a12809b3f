//===- OnnxImporter.cpp - ONNX models to the ppc dialect ------------------===//

#include "frontend/OnnxImporter.h"
#include "frontend/GraphImporter.h"
#include "frontend/NodeImporter.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "runtime/Printable.h"
#include "runtime/RegularFile.h"
#include "runtime/TrainedModel.h"

#include "mlir/IR/Verifier.h"
#include "onnx/defs/schema.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <climits>

using namespace mlir;

namespace ppc {

// Op importers implement each op's forms from opset 1 on where they differ
// (and refuse legacy attributes they do not implement); 13-21 are the
// opsets current exporters emit.
static constexpr int64_t kMinOpset = 1, kMaxOpset = 21;

//===----------------------------------------------------------------------===//
// OnnxModel
//===----------------------------------------------------------------------===//

/// An error about the model file `path`.
static llvm::Error modelError(llvm::StringRef path, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "file '" + printable(path) + "': " + message);
}

llvm::Expected<std::unique_ptr<OnnxModel>> OnnxModel::load(llvm::StringRef path) {
  auto buffer = readRegularFile(path);
  if (!buffer)
    return modelError(path, llvm::toString(buffer.takeError()));
  return parse((*buffer)->getBuffer(), path);
}

llvm::Expected<std::unique_ptr<OnnxModel>> OnnxModel::parse(llvm::StringRef bytes,
                                                            llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &message) { return modelError(path, message); };
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return fail("larger than 2 GiB; store the weights as ONNX external data");
  auto model = std::unique_ptr<OnnxModel>(new OnnxModel());
  if (!model->proto_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return fail("not a valid ONNX model (protobuf parsing failed)");
  if (!model->proto_.has_graph())
    return fail("the ONNX model has no graph");
  model->path_ = path.str();
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  model->directory_ = dir.empty() ? "." : dir.str();
  for (const auto &init : model->proto_.graph().initializer())
    model->initializers_[init.name()] = &init;
  return model;
}

int64_t OnnxModel::opset() const {
  for (const auto &entry : proto_.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      return entry.version();
  return 0;
}

const onnx::TensorProto *OnnxModel::initializer(llvm::StringRef name) const {
  return initializers_.lookup(name);
}

llvm::Expected<Tensor> OnnxModel::loadInitializer(llvm::StringRef name) const {
  const onnx::TensorProto *proto = initializer(name);
  if (!proto)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no initializer named '" + printable(name) + "'");
  return decodeTensorProto(*proto, directory_);
}

std::vector<std::string> OnnxModel::untieMergedInitializers() {
  std::vector<std::string> added = ppcrt::untieMergedInitializers(*proto_.mutable_graph());
  initializers_.clear();
  for (const auto &init : proto_.graph().initializer())
    initializers_[init.name()] = &init;
  return added;
}

/// The float initializers that train: those `options` names, or all.
static bool isParameter(const onnx::TensorProto &init, const ImportOptions &options) {
  auto dtype = dtypeFromOnnx(init.data_type());
  if (!dtype) {
    llvm::consumeError(dtype.takeError());
    return false;
  }
  return isFloat(*dtype) && (!options.parameters || options.parameters->contains(init.name()));
}

//===----------------------------------------------------------------------===//
// OpImporterTable
//===----------------------------------------------------------------------===//

const OpImporterTable &OpImporterTable::get() {
  static const OpImporterTable table = [] {
    OpImporterTable t;
    registerElementwiseImporters(t);
    registerShapeImporters(t);
    registerMathImporters(t);
    registerNNImporters(t);
    registerIndexingImporters(t);
    return t;
  }();
  return table;
}

llvm::SmallVector<llvm::StringRef> OpImporterTable::opTypes() const {
  llvm::SmallVector<llvm::StringRef> names;
  for (const auto &entry : entries)
    names.push_back(entry.getKey());
  llvm::sort(names);
  return names;
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

static std::string nodeName(const onnx::NodeProto &node, int index) {
  return node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
}

/// "node '<name>' (<OpType>)", both printable: how errors name a node.
static std::string nodeWhere(const onnx::NodeProto &node, int index, llvm::StringRef opType) {
  return "node '" + printable(nodeName(node, index)) + "' (" + printable(opType) + ")";
}

LogicalResult GraphImporter::checkOpset() {
  opset = model.opset();
  if (opset == 0) {
    report("file '" + printable(model.path()) + "': the model imports no ai.onnx opset");
    return failure();
  }
  if (opset < kMinOpset || opset > kMaxOpset) {
    report("file '" + printable(model.path()) + "': opset " + llvm::Twine(opset) +
           " is not supported (ppc imports opsets " + llvm::Twine(kMinOpset) + " to " +
           llvm::Twine(kMaxOpset) + ")");
    return failure();
  }
  return success();
}

LogicalResult GraphImporter::checkSupportedOps() {
  bool ok = true;
  const auto &table = OpImporterTable::get();
  for (auto [i, node] : llvm::enumerate(model.proto().graph().node())) {
    bool standard = node.domain().empty() || node.domain() == "ai.onnx";
    if (standard && table.lookup(node.op_type()))
      continue;
    std::string type = standard ? node.op_type() : node.domain() + "." + node.op_type();
    report(nodeWhere(node, i, type) + ": unsupported op");
    ok = false;
  }
  return success(ok);
}

static const char *attributeTypeName(int type) {
  switch (type) {
  case onnx::AttributeProto::FLOAT:
    return "FLOAT";
  case onnx::AttributeProto::INT:
    return "INT";
  case onnx::AttributeProto::STRING:
    return "STRING";
  case onnx::AttributeProto::TENSOR:
    return "TENSOR";
  case onnx::AttributeProto::GRAPH:
    return "GRAPH";
  case onnx::AttributeProto::FLOATS:
    return "FLOATS";
  case onnx::AttributeProto::INTS:
    return "INTS";
  case onnx::AttributeProto::STRINGS:
    return "STRINGS";
  case onnx::AttributeProto::TENSORS:
    return "TENSORS";
  case onnx::AttributeProto::GRAPHS:
    return "GRAPHS";
  case onnx::AttributeProto::SPARSE_TENSOR:
    return "SPARSE_TENSOR";
  case onnx::AttributeProto::SPARSE_TENSORS:
    return "SPARSE_TENSORS";
  case onnx::AttributeProto::TYPE_PROTO:
    return "TYPE_PROTO";
  case onnx::AttributeProto::TYPE_PROTOS:
    return "TYPE_PROTOS";
  default:
    return "UNDEFINED";
  }
}

// What the file says is checked against ONNX before any of it is read as
// meaning something: every name defined once (initializers, inputs that are
// not initializers, node outputs), every node input defined before its node
// (SSA, in order), each op defined at the declared opset, and each attribute
// one of its op's with the type ONNX gives it (a FLOAT `axis` read as an INT
// would silently be 0).
LogicalResult GraphImporter::checkGraph() {
  const onnx::GraphProto &graph = model.proto().graph();
  llvm::StringSet<> defined, initializers;
  for (const auto &init : graph.initializer())
    if (!initializers.insert(init.name()).second) {
      report("initializer '" + printable(init.name()) + "': defined twice");
      return failure();
    }
  defined = initializers;
  for (const auto &input : graph.input())
    if (!defined.insert(input.name()).second && !initializers.contains(input.name())) {
      report("input '" + printable(input.name()) + "': defined twice");
      return failure();
    }
  // Attributes ops gained after the newest opset this ONNX library knows
  // cannot be checked against it.
  const auto &ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto known = ranges.find("");
  int64_t newestKnown = known == ranges.end() ? 0 : known->second.second;
  llvm::StringMap<std::string> producer;
  for (auto [i, node] : llvm::enumerate(graph.node()))
    for (const std::string &out : node.output())
      producer.try_emplace(out, nodeName(node, i));
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    std::string where = nodeWhere(node, i, node.op_type());
    for (const std::string &in : node.input())
      if (!in.empty() && !defined.contains(in)) {
        auto later = producer.find(in);
        report(where + ": input '" + printable(in) + "' is " +
               (later == producer.end()
                    ? std::string("not defined by any node, initializer or graph input")
                    : "defined after it, by node '" + printable(later->second) +
                          "' (nodes must be in topological order)"));
        return failure();
      }
    for (const std::string &out : node.output())
      if (!out.empty() && !defined.insert(out).second) {
        report(where + ": output '" + printable(out) + "' is already defined" +
               (initializers.contains(out) ? " (an initializer)" : ""));
        return failure();
      }
    std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    const onnx::OpSchema *schema =
        onnx::OpSchemaRegistry::Schema(node.op_type(), int(opset), domain);
    const onnx::OpSchema *latest = onnx::OpSchemaRegistry::Schema(node.op_type(), INT_MAX, domain);
    // An op newer than the ONNX library ppc was built with is checked by
    // its importer alone.
    if (!latest)
      continue;
    if (!schema) {
      int first = int(opset) + 1;
      while (!onnx::OpSchemaRegistry::Schema(node.op_type(), first, domain))
        ++first;
      report(where + ": not an op of opset " + llvm::Twine(opset) + " (it is defined from opset " +
             llvm::Twine(first) + " on)");
      return failure();
    }
    llvm::StringSet<> seen;
    for (const auto &a : node.attribute()) {
      if (!seen.insert(a.name()).second) {
        report(where + ": attribute '" + printable(a.name()) + "' given twice");
        return failure();
      }
      auto expected = schema->attributes().find(a.name());
      if (expected == schema->attributes().end() && opset > newestKnown)
        continue;
      if (expected == schema->attributes().end()) {
        report(where + ": '" + printable(a.name()) + "' is not an attribute of " +
               printable(node.op_type()) + " at opset " + llvm::Twine(schema->since_version()));
        return failure();
      }
      if (int(a.type()) != int(expected->second.type)) {
        report(where + ": attribute '" + printable(a.name()) + "' is " +
               attributeTypeName(a.type()) + "; " + printable(node.op_type()) + "'s '" +
               printable(a.name()) + "' is " + attributeTypeName(expected->second.type));
        return failure();
      }
    }
  }
  return success();
}

LogicalResult GraphImporter::checkInitializers() {
  bool ok = true;
  for (const auto &init : model.proto().graph().initializer()) {
    if (llvm::Error e = validateTensorProto(init, model.directory())) {
      report(llvm::toString(std::move(e)));
      ok = false;
    }
  }
  return success(ok);
}

FailureOr<RankedTensorType> GraphImporter::inputType(const onnx::ValueInfoProto &info) {
  auto fail = [&](const llvm::Twine &message) {
    report("input '" + printable(info.name()) + "': " + message);
    return failure();
  };
  if (!info.type().has_tensor_type())
    return fail("is not a tensor");
  const auto &tensorType = info.type().tensor_type();
  auto dtype = dtypeFromOnnx(tensorType.elem_type());
  if (!dtype)
    return fail(llvm::toString(dtype.takeError()));
  if (!tensorType.has_shape())
    return fail("has no shape; ppc needs static shapes");
  Shape shape;
  for (auto [i, dim] : llvm::enumerate(tensorType.shape().dim())) {
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
    } else if (dim.has_dim_param()) {
      auto it = options.dimSizes.find(dim.dim_param());
      if (it == options.dimSizes.end())
        return fail("dimension " + llvm::Twine(i) + " is symbolic ('" + printable(dim.dim_param()) +
                    "'); set its size with --dim " + printable(dim.dim_param()) + "=N");
      shape.push_back(it->second);
    } else {
      return fail("dimension " + llvm::Twine(i) + " has no size");
    }
  }
  // Declared sizes (and --dim values) are checked like any other, in the
  // element type the input is imported as.
  auto type = RankedTensorType::get(shape, elementType(*dtype));
  if (auto bytes = tensorTypeBytes(type); !bytes)
    return fail(llvm::toString(bytes.takeError()));
  return type;
}

LogicalResult GraphImporter::createFunction(ModuleOp module) {
  const auto &graph = model.proto().graph();
  llvm::SmallVector<Type> argTypes;
  llvm::SmallVector<DictionaryAttr> argAttrs;
  llvm::SmallVector<std::string> argNames;
  bool ok = true;
  for (const auto &info : graph.input()) {
    if (model.initializer(info.name()))
      continue; // Old exporters list initializers among the inputs.
    if (auto it = options.constantInputs.find(info.name()); it != options.constantInputs.end()) {
      auto type = inputType(info);
      if (failed(type)) {
        ok = false;
        continue;
      }
      auto dtype = *dtypeOf(type->getElementType());
      if (imported(it->second).dtype() != dtype || it->second.shape() != type->getShape()) {
        report("input '" + printable(info.name()) +
               "': the constant given for it does not "
               "match its declared type");
        ok = false;
      }
      continue;
    }
    auto type = inputType(info);
    if (failed(type)) {
      ok = false;
      continue;
    }
    argTypes.push_back(*type);
    argAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr(PpcDialect::kInputAttrName, builder.getStringAttr(info.name()))));
    argNames.push_back(info.name());
  }
  for (const auto &init : graph.initializer()) {
    if (!isParameter(init.name()))
      continue;
    DType dtype = *dtypeFromOnnx(init.data_type());
    auto type = RankedTensorType::get(*tensorProtoShape(init), elementType(dtype));
    // Checked in its file's dtype already; promoted to f64 it doubles.
    if (auto bytes = tensorTypeBytes(type); !bytes) {
      report("initializer '" + printable(init.name()) + "': " + llvm::toString(bytes.takeError()));
      ok = false;
      continue;
    }
    argTypes.push_back(type);
    argAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr(PpcDialect::kParamAttrName, builder.getStringAttr(init.name()))));
    argNames.push_back(init.name());
  }
  if (!ok)
    return failure();

  builder.setInsertionPointToEnd(module.getBody());
  auto loc = FileLineColLoc::get(&context, model.path(), 0, 0);
  func = builder.create<func::FuncOp>(loc, "forward", builder.getFunctionType(argTypes, {}));
  func.setAllArgAttrs(argAttrs);
  Block *entry = func.addEntryBlock();
  for (auto [name, arg] : llvm::zip(argNames, entry->getArguments()))
    define(name, arg);
  builder.setInsertionPointToEnd(entry);
  return success();
}

bool GraphImporter::isParameter(llvm::StringRef name) const {
  const onnx::TensorProto *init = model.initializer(name);
  return init && ppc::isParameter(*init, options);
}

Value GraphImporter::lookup(llvm::StringRef name) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  if (auto bound = options.constantInputs.find(name); bound != options.constantInputs.end()) {
    auto loc = NameLoc::get(builder.getStringAttr(name));
    Value v = builder.create<ConstantOp>(loc, imported(bound->second).toAttr(&context));
    define(name, v);
    return v;
  }
  const onnx::TensorProto *init = model.initializer(name);
  if (!init)
    return {};
  auto tensor = decodeTensorProto(*init, model.directory());
  if (!tensor) {
    report(llvm::toString(tensor.takeError()));
    return {};
  }
  auto loc = NameLoc::get(builder.getStringAttr(name));
  Value v = builder.create<ConstantOp>(loc, imported(*tensor).toAttr(&context));
  define(name, v);
  return v;
}

Type GraphImporter::elementType(DType dtype) {
  return mlirType(options.promoteToF64 && isFloat(dtype) ? DType::F64 : dtype, &context);
}

Tensor GraphImporter::imported(const Tensor &tensor) {
  if (options.promoteToF64 && tensor.isFloat() && tensor.dtype() != DType::F64)
    return tensor.castTo(DType::F64);
  return tensor;
}

LogicalResult GraphImporter::importNodes() {
  const auto &graph = model.proto().graph();
  for (const auto &node : graph.node())
    for (const auto &in : node.input())
      readNames.insert(in);
  for (const auto &out : graph.output())
    readNames.insert(out.name());

  const auto &table = OpImporterTable::get();
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    const auto *entry = table.lookup(node.op_type());
    NodeImporter importer(*this, node, nodeName(node, i), builder, opset);
    int n = node.input_size();
    if (n < entry->minInputs || n > entry->maxInputs) {
      std::string expected =
          entry->minInputs == entry->maxInputs
              ? std::to_string(entry->minInputs)
              : std::to_string(entry->minInputs) + " to " + std::to_string(entry->maxInputs);
      return importer.error("expects " + expected + " inputs, got " + llvm::Twine(n));
    }
    if (failed(entry->fn(importer)))
      return failure();
    for (int o = 0; o < node.output_size(); ++o) {
      const std::string &out = node.output(o);
      if (!out.empty() && !values.count(out) && isRead(out))
        return importer.error("output " + llvm::Twine(o) + " ('" + printable(out) +
                              "') is not supported by ppc");
    }
  }
  return success();
}

LogicalResult GraphImporter::createReturn() {
  llvm::SmallVector<Value> results;
  llvm::SmallVector<DictionaryAttr> resultAttrs;
  for (const auto &out : model.proto().graph().output()) {
    Value v = lookup(out.name());
    if (!v) {
      report("graph output '" + printable(out.name()) + "' is not produced by any node");
      return failure();
    }
    results.push_back(v);
    resultAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr(PpcDialect::kOutputAttrName, builder.getStringAttr(out.name()))));
  }
  builder.create<func::ReturnOp>(func.getLoc(), results);
  func.setType(builder.getFunctionType(func.getArgumentTypes(), ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  if (failed(checkSupportedOps()) || failed(checkOpset()) || failed(checkGraph()) ||
      failed(checkInitializers()))
    return nullptr;
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(FileLineColLoc::get(&context, model.path(), 0, 0));
  (*module)->setAttr(PpcDialect::kSourceAttrName,
                     builder.getStringAttr(llvm::sys::path::filename(model.path())));
  (*module)->setAttr(PpcDialect::kOpsetAttrName, builder.getI64IntegerAttr(opset));
  if (failed(createFunction(*module)) || failed(importNodes()) || failed(createReturn()))
    return nullptr;
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (diagnostic.empty())
      diagnostic = d.str();
    return success();
  });
  if (failed(verify(*module))) {
    report("file '" + printable(model.path()) + "': imported IR is invalid: " + diagnostic);
    return nullptr;
  }
  return module;
}

OwningOpRef<ModuleOp> importOnnxModel(const OnnxModel &model, MLIRContext &context,
                                      const ImportOptions &options,
                                      llvm::function_ref<void(const llvm::Twine &)> emitError) {
  loadImportDialects(context);
  return GraphImporter(model, context, options, emitError).run();
}

void loadImportDialects(MLIRContext &context) {
  context.loadDialect<PpcDialect, func::FuncDialect>();
}

} // namespace ppc
