//===- OnnxTensor.h - ONNX TensorProto decoding ------------------*- C++ -*-===//
//
// Decodes ONNX tensors (typed fields, raw_data, external data) into executor
// tensors, validating every size against the declared shape. External data
// must resolve to a regular file inside the model's directory: absolute
// paths, `..` components and symbolic links are refused.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_FRONTEND_ONNXTENSOR_H
#define PPC_FRONTEND_ONNXTENSOR_H

#include "executor/Tensor.h"
#include "llvm/Support/Error.h"

#include <optional>

#include <onnx/onnx_pb.h>

namespace ppc {

/// The executor dtype of an ONNX `TensorProto::DataType`.
llvm::Expected<DType> dtypeFromOnnx(int32_t dataType);
/// The executor dtype of an ONNX data type, or none when unsupported.
std::optional<DType> dtypeFromOnnxOrNull(int32_t dataType);
/// The ONNX `TensorProto::DataType` of an executor dtype.
int32_t onnxDataType(DType dtype);

/// Where an external tensor's bytes live, after validation.
struct ExternalLocation {
  std::string path;
  /// The location as written in the model, relative to its directory.
  std::string relative;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// Validates the external-data entries of `proto` against `modelDir` and
/// returns the resolved file range (whose length is checked against the
/// file's size and the tensor's shape).
llvm::Expected<ExternalLocation> resolveExternalData(const onnx::TensorProto &proto,
                                                     llvm::StringRef modelDir);

/// Checks that `proto`'s data has exactly as many bytes or elements as its
/// dtype and shape need, without loading external data.
llvm::Error validateTensorProto(const onnx::TensorProto &proto, llvm::StringRef modelDir);

/// Decodes `proto` into a tensor. `modelDir` anchors external data.
llvm::Expected<Tensor> decodeTensorProto(const onnx::TensorProto &proto, llvm::StringRef modelDir);

/// The shape of `proto` (dims), checked to be non-negative.
llvm::Expected<Shape> tensorProtoShape(const onnx::TensorProto &proto);

/// Encodes `tensor` as a TensorProto with raw_data.
void encodeTensorProto(const Tensor &tensor, onnx::TensorProto &proto);

} // namespace ppc

#endif // PPC_FRONTEND_ONNXTENSOR_H
