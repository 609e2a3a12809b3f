//===- TrainedModel.cpp - trained weights back into the ONNX model --------===//

#include "runtime/TrainedModel.h"
#include "runtime/RegularFile.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <optional>
#include <set>
#include <vector>

namespace ppcrt {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The runtime's float type of an ONNX element type, if it is one.
std::optional<DType> floatType(int onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return DType::F32;
  case onnx::TensorProto::DOUBLE:
    return DType::F64;
  case onnx::TensorProto::FLOAT16:
    return DType::F16;
  case onnx::TensorProto::BFLOAT16:
    return DType::BF16;
  default:
    return std::nullopt;
  }
}

const llvm::fltSemantics &semanticsOf(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return llvm::APFloat::IEEEdouble();
  case DType::F16:
    return llvm::APFloat::IEEEhalf();
  case DType::BF16:
    return llvm::APFloat::BFloat();
  default:
    return llvm::APFloat::IEEEsingle();
  }
}

/// `data` (elements of float type `from`, little-endian) as elements of
/// float type `to`, each rounded to nearest even.
std::string convertFloats(const std::vector<char> &data, DType from, DType to) {
  size_t inBytes = dtypeBytes(from), outBytes = dtypeBytes(to), n = data.size() / inBytes;
  std::string out(n * outBytes, '\0');
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = 0;
    std::memcpy(&bits, data.data() + i * inBytes, inBytes);
    llvm::APFloat value(semanticsOf(from), llvm::APInt(unsigned(inBytes * 8), bits));
    bool lost;
    value.convert(semanticsOf(to), llvm::APFloat::rmNearestTiesToEven, &lost);
    uint64_t result = value.bitcastToAPInt().getZExtValue();
    std::memcpy(out.data() + i * outBytes, &result, outBytes);
  }
  return out;
}

} // namespace

bool isMergedParameterName(llvm::StringRef name) {
  return !name.empty() && !name.starts_with("onnx::") && !name.starts_with("/");
}

std::vector<std::string> untieMergedInitializers(onnx::GraphProto &graph) {
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &init : graph.initializer())
    initializers[init.name()] = &init;
  std::vector<std::string> added;
  std::vector<bool> untie;
  std::vector<onnx::TensorProto> copies;
  for (const onnx::NodeProto &node : graph.node()) {
    auto source = node.op_type() == "Identity" && node.input_size() == 1 &&
                          node.output_size() == 1 && isMergedParameterName(node.output(0)) &&
                          !initializers.count(node.output(0))
                      ? initializers.find(node.input(0))
                      : initializers.end();
    untie.push_back(source != initializers.end() && floatType(source->second->data_type()));
    if (!untie.back())
      continue;
    copies.push_back(*source->second);
    copies.back().set_name(node.output(0));
    added.push_back(node.output(0));
  }
  if (added.empty())
    return added;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (size_t i = 0; i < untie.size(); ++i)
    if (!untie[i])
      *kept.Add() = std::move(*graph.mutable_node(int(i)));
  graph.mutable_node()->Swap(&kept);
  for (onnx::TensorProto &copy : copies)
    *graph.add_initializer() = std::move(copy);
  return added;
}

llvm::Error writeTrainedModel(llvm::StringRef modelPath, bool untie,
                              const std::map<std::string, GlobalTensor> &params,
                              llvm::StringRef path, llvm::StringRef context) {
  auto buffer = ppc::readRegularFile(modelPath);
  if (!buffer)
    return error(context + ": cannot read the model '" + llvm::Twine(modelPath) +
                 "' the training program was compiled from: " + llvm::toString(buffer.takeError()));
  onnx::ModelProto model;
  if (!model.ParseFromArray((*buffer)->getBufferStart(), int((*buffer)->getBufferSize())))
    return error(context + ": '" + llvm::Twine(modelPath) + "' is not an ONNX model");
  // Compiled with --untie, every merged parameter is an initializer of its
  // own again, as ppc compile made it: a copy of its source as the file has
  // it, replaced below when it trained.
  onnx::GraphProto &graph = *model.mutable_graph();
  if (untie)
    untieMergedInitializers(graph);
  std::set<std::string> written;
  for (onnx::TensorProto &init : *graph.mutable_initializer()) {
    auto it = params.find(init.name());
    if (it == params.end())
      continue;
    written.insert(init.name());
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    if (dims != it->second.shape)
      return error(context + ": initializer '" + init.name() +
                   "' has another shape than the trained value (another model?)");
    DType dtype = it->second.dtype;
    std::optional<DType> target = floatType(init.data_type());
    bool isFloat =
        dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16;
    if (!target || !isFloat)
      return error(context + ": initializer '" + init.name() +
                   "' has an element type the trained value cannot be written as");
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int32_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    if (*target == dtype)
      init.set_raw_data(it->second.data.data(), it->second.data.size());
    else
      init.set_raw_data(convertFloats(it->second.data, dtype, *target));
  }
  for (const auto &[name, full] : params)
    if (!written.count(name))
      return error(context + ": the model '" + llvm::Twine(modelPath) + "' has no initializer '" +
                   name + "' for the trained parameter");
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return error(context + ": file '" + path + "': the model is too large for one ONNX file");
  return llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    os << bytes;
    return llvm::Error::success();
  });
}

} // namespace ppcrt
