//===- OnnxExport.cpp - trained weights back into ONNX --------------------===//

#include "frontend/OnnxExport.h"
#include "frontend/OnnxTensor.h"

#include "llvm/Support/raw_ostream.h"

namespace ppc {

llvm::Error exportOnnxModel(const OnnxModel &model, const llvm::StringMap<Tensor> &values,
                            llvm::StringRef path) {
  onnx::ModelProto proto = model.proto();
  for (onnx::TensorProto &init : *proto.mutable_graph()->mutable_initializer()) {
    auto it = values.find(init.name());
    if (it == values.end())
      continue;
    auto dtype = dtypeFromOnnx(init.data_type());
    if (!dtype)
      return dtype.takeError();
    std::string name = init.name();
    encodeTensorProto(it->second.castTo(*dtype), init);
    init.set_name(name);
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "file '" + path +
                                       "': the model is too large for one ONNX file");
  return llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    os << bytes;
    return llvm::Error::success();
  });
}

} // namespace ppc
