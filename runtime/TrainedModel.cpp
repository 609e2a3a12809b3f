//===- TrainedModel.cpp - trained weights back into the ONNX model --------===//

#include "runtime/TrainedModel.h"
#include "runtime/RegularFile.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <set>
#include <vector>

namespace ppcrt {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace

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
  // Compiled with --untie, every Identity of a float initializer (a
  // parameter torch's eval-mode export merged into another) is an
  // initializer of its own again, as ppc compile made it: a copy of its
  // source as the file has it, replaced below when it trained.
  onnx::GraphProto &graph = *model.mutable_graph();
  if (untie) {
    std::map<std::string, const onnx::TensorProto *> initializers;
    for (const onnx::TensorProto &init : graph.initializer())
      initializers[init.name()] = &init;
    auto isFloat = [](const onnx::TensorProto &t) {
      return t.data_type() == onnx::TensorProto::FLOAT ||
             t.data_type() == onnx::TensorProto::DOUBLE ||
             t.data_type() == onnx::TensorProto::FLOAT16 ||
             t.data_type() == onnx::TensorProto::BFLOAT16;
    };
    std::vector<bool> untie;
    std::vector<onnx::TensorProto> copies;
    for (const onnx::NodeProto &node : graph.node()) {
      // As ppc::isMergedParameterName decides at compile time.
      llvm::StringRef out =
          node.output_size() == 1 ? llvm::StringRef(node.output(0)) : llvm::StringRef();
      bool named = !out.empty() && !out.starts_with("onnx::") && !out.starts_with("/");
      auto source = node.op_type() == "Identity" && node.input_size() == 1 && named &&
                            !initializers.count(out.str())
                        ? initializers.find(node.input(0))
                        : initializers.end();
      untie.push_back(source != initializers.end() && isFloat(*source->second));
      if (!untie.back())
        continue;
      copies.push_back(*source->second);
      copies.back().set_name(node.output(0));
    }
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (size_t i = 0; i < untie.size(); ++i)
      if (!untie[i])
        *kept.Add() = std::move(*graph.mutable_node(int(i)));
    graph.mutable_node()->Swap(&kept);
    for (onnx::TensorProto &copy : copies)
      *graph.add_initializer() = std::move(copy);
  }
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
    bool matches = (dtype == DType::F32 && init.data_type() == onnx::TensorProto::FLOAT) ||
                   (dtype == DType::F64 && init.data_type() == onnx::TensorProto::DOUBLE);
    if (!matches)
      return error(context + ": initializer '" + init.name() +
                   "' has an element type the trained value cannot be written as");
    init.clear_float_data();
    init.clear_double_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(it->second.data.data(), it->second.data.size());
  }
  for (const auto &[name, full] : params)
    if (!written.count(name))
      return error(context + ": the model '" + llvm::Twine(modelPath) +
                   "' has no initializer '" + name + "' for the trained parameter");
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return error(context + ": file '" + path + "': the model is too large for one ONNX file");
  return llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    os << bytes;
    return llvm::Error::success();
  });
}

} // namespace ppcrt
