//===- Export.cpp - trained weights back into the ONNX model --------------===//
//
// Each rank holds blocks of its stage's parameters; the full value of a
// parameter is put together from the blocks of every rank that holds one
// (ranks at the same block hold copies), then written over the model's
// initializer of that name as raw little-endian data.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/Export.h"
#include "runtime/RegularFile.h"
#include "runtime/ppcrt/Blocks.h"
#include "runtime/CheckpointDir.h"
#include "runtime/Safetensors.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <map>
#include <set>
#include <vector>

namespace ppcrt {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace

llvm::Error exportOnnx(const Program &program, const std::string &shardDir, int worldSize,
                       const std::string &path) {
  // Every parameter's full value, in the program's element type.
  struct Full {
    const TensorInfo *info;
    std::vector<char> data;
  };
  std::map<std::string, Full> params;
  for (int r = 0; r < worldSize; ++r) {
    std::vector<int64_t> coords = meshCoordinates(program, r);
    int64_t pp = coordinateOn(program, coords, "pp");
    const RankProgram &rp = program.programs[program.numPrograms == 1 ? 0 : pp];
    llvm::SmallString<256> file(shardDir);
    llvm::sys::path::append(file, shardFileName(r));
    auto shard = SafetensorsFile::open(file);
    if (!shard)
      return shard.takeError();
    for (int i = 0; i < rp.numArgs; ++i) {
      const TensorInfo &t = rp.args[i];
      llvm::StringRef key = t.key;
      if (!key.starts_with("param:"))
        continue;
      auto local = shard->lookup(key);
      if (!local)
        return local.takeError();
      Full &full = params[key.drop_front(6).str()];
      if (!full.info) {
        int64_t elements = 1;
        for (int d = 0; d < t.rank; ++d)
          elements *= t.globalShape[d];
        full.info = &t;
        full.data.assign(elements * dtypeBytes(t.dtype), 0);
      }
      size_t bytes = dtypeBytes(t.dtype);
      const char *from = static_cast<const char *>(local->data);
      char *to = full.data.data();
      forEachBlockElement(program, t, coords, [&](int64_t l, int64_t g) {
        std::memcpy(to + g * bytes, from + l * bytes, bytes);
      });
    }
  }

  auto buffer = ppc::readRegularFile(program.model);
  if (!buffer)
    return error("--export: cannot read the model '" + llvm::Twine(program.model) +
                 "' this executable was compiled from: " + llvm::toString(buffer.takeError()));
  onnx::ModelProto model;
  if (!model.ParseFromArray((*buffer)->getBufferStart(), int((*buffer)->getBufferSize())))
    return error("--export: '" + llvm::Twine(program.model) + "' is not an ONNX model");
  // Compiled with --untie, every Identity of a float initializer (a
  // parameter torch's eval-mode export merged into another) is an
  // initializer of its own again, as ppc compile made it: a copy of its
  // source as the file has it, replaced below when it trained.
  onnx::GraphProto &graph = *model.mutable_graph();
  if (program.untie) {
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
      llvm::StringRef out = node.output_size() == 1 ? node.output(0) : "";
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
    DType dtype = it->second.info->dtype;
    bool matches = (dtype == DType::F32 && init.data_type() == onnx::TensorProto::FLOAT) ||
                   (dtype == DType::F64 && init.data_type() == onnx::TensorProto::DOUBLE);
    if (!matches)
      return error("--export: initializer '" + init.name() +
                   "' has an element type the trained value cannot be written as");
    init.clear_float_data();
    init.clear_double_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(it->second.data.data(), it->second.data.size());
  }
  for (const auto &[name, full] : params)
    if (!written.count(name))
      return error("--export: the model '" + llvm::Twine(program.model) +
                   "' has no initializer '" + name + "' for the trained parameter");
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return error("--export: file '" + path + "': the model is too large for one ONNX file");
  return llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    os << bytes;
    return llvm::Error::success();
  });
}

} // namespace ppcrt
