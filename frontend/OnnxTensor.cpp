//===- OnnxTensor.cpp - ONNX TensorProto decoding -------------------------===//

#include "frontend/OnnxTensor.h"
#include "runtime/CheckedSize.h"
#include "runtime/Printable.h"
#include "runtime/RegularFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using llvm::createStringError;
using llvm::Error;
using llvm::Expected;
using llvm::inconvertibleErrorCode;

namespace ppc {

static Error tensorError(const onnx::TensorProto &proto, const llvm::Twine &message) {
  return createStringError(inconvertibleErrorCode(),
                           "tensor '" + printable(proto.name()) + "': " + message);
}

Expected<DType> dtypeFromOnnx(int32_t dataType) {
  using T = onnx::TensorProto;
  switch (dataType) {
  case T::FLOAT:
    return DType::F32;
  case T::DOUBLE:
    return DType::F64;
  case T::FLOAT16:
    return DType::F16;
  case T::BFLOAT16:
    return DType::BF16;
  case T::BOOL:
    return DType::I1;
  case T::INT8:
    return DType::I8;
  case T::INT16:
    return DType::I16;
  case T::INT32:
    return DType::I32;
  case T::INT64:
    return DType::I64;
  case T::UINT8:
    return DType::U8;
  case T::UINT16:
    return DType::U16;
  case T::UINT32:
    return DType::U32;
  case T::UINT64:
    return DType::U64;
  default: {
    const std::string &name = T::DataType_Name(static_cast<T::DataType>(dataType));
    return createStringError(inconvertibleErrorCode(),
                             "element type " + (name.empty() ? std::to_string(dataType) : name) +
                                 " is not supported");
  }
  }
}

std::optional<DType> dtypeFromOnnxOrNull(int32_t dataType) {
  auto dtype = dtypeFromOnnx(dataType);
  if (!dtype) {
    llvm::consumeError(dtype.takeError());
    return std::nullopt;
  }
  return *dtype;
}

int32_t onnxDataType(DType dtype) {
  using T = onnx::TensorProto;
  static const int32_t types[] = {T::FLOAT16, T::BFLOAT16, T::FLOAT, T::DOUBLE, T::BOOL,
                                  T::INT8,    T::INT16,    T::INT32, T::INT64,  T::UINT8,
                                  T::UINT16,  T::UINT32,   T::UINT64};
  return types[static_cast<int>(dtype)];
}

Expected<Shape> tensorProtoShape(const onnx::TensorProto &proto) {
  Shape shape;
  for (int64_t d : proto.dims()) {
    if (d < 0)
      return tensorError(proto, "negative dimension " + llvm::Twine(d));
    shape.push_back(d);
  }
  return shape;
}

/// True when `path` (relative) has no `..` component.
static bool staysInside(llvm::StringRef path) {
  for (auto it = llvm::sys::path::begin(path), e = llvm::sys::path::end(path); it != e; ++it)
    if (*it == "..")
      return false;
  return true;
}

Expected<ExternalLocation> resolveExternalData(const onnx::TensorProto &proto,
                                               llvm::StringRef modelDir) {
  ExternalLocation result;
  std::string location;
  bool hasLength = false;
  for (const auto &entry : proto.external_data()) {
    llvm::StringRef value = entry.value();
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      // At most INT64_MAX, so that offset + length cannot wrap.
      uint64_t n;
      if (value.getAsInteger(10, n) || n > uint64_t(INT64_MAX))
        return tensorError(proto, "external data " + entry.key() + " '" + printable(value) +
                                      "' is not a non-negative integer");
      (entry.key() == "offset" ? result.offset : result.length) = n;
      hasLength |= entry.key() == "length";
    }
  }
  if (location.empty())
    return tensorError(proto, "external data has no location");
  // A NUL would end the name the kernel sees early; control characters
  // have no place in a file name.
  auto control = [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; };
  if (llvm::any_of(location, control))
    return tensorError(proto, "external data location '" + printable(location) +
                                  "' contains a NUL or control character");
  if (llvm::sys::path::is_absolute(location) || location[0] == '/' || location[0] == '\\')
    return tensorError(proto, "external data location '" + printable(location) +
                                  "' is an absolute path; it must be relative to "
                                  "the model's directory");
  if (!staysInside(location))
    return tensorError(proto, "external data location '" + printable(location) +
                                  "' escapes the model's directory");
  llvm::SmallString<256> path(modelDir);
  llvm::sys::path::append(path, location);
  result.relative = location;

  // Opened as decodeTensorProto will read it: beneath the model's directory
  // with no symbolic link on the way, a regular file with one link.
  auto size = sizeOfFileBeneath(modelDir, location);
  if (!size)
    return tensorError(proto, "external data file '" + printable(path) +
                                  "': " + llvm::toString(size.takeError()));
  uint64_t fileSize = *size;
  if (result.offset > fileSize)
    return tensorError(proto, llvm::formatv("external data offset {0} is past the "
                                            "end of '{1}' ({2} bytes)",
                                            result.offset, printable(path), fileSize));
  if (!hasLength)
    result.length = fileSize - result.offset;
  if (result.length > fileSize - result.offset)
    return tensorError(proto, llvm::formatv("external data range [{0}, {1}) is past "
                                            "the end of '{2}' ({3} bytes)",
                                            result.offset, result.offset + result.length,
                                            printable(path), fileSize));
  result.path = std::string(path);
  return result;
}

/// The number of elements in the typed field that holds `dtype`'s data.
static int64_t typedFieldSize(const onnx::TensorProto &proto, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return proto.float_data_size();
  case DType::F64:
    return proto.double_data_size();
  case DType::I64:
    return proto.int64_data_size();
  case DType::U32:
  case DType::U64:
    return proto.uint64_data_size();
  default:
    return proto.int32_data_size();
  }
}

Error validateTensorProto(const onnx::TensorProto &proto, llvm::StringRef modelDir) {
  auto dtype = dtypeFromOnnx(proto.data_type());
  if (!dtype)
    return tensorError(proto, llvm::toString(dtype.takeError()));
  auto shape = tensorProtoShape(proto);
  if (!shape)
    return shape.takeError();
  // Before any length is compared: a size that wrapped could match one.
  auto size = tensorBytes(*dtype, *shape);
  if (!size)
    return tensorError(proto, llvm::toString(size.takeError()));
  int64_t n = numElements(*shape);
  uint64_t bytes = *size;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    auto location = resolveExternalData(proto, modelDir);
    if (!location)
      return location.takeError();
    if (location->length != bytes)
      return tensorError(proto, llvm::formatv("external data has {0} bytes, but "
                                              "{1} elements of {2} need {3}",
                                              location->length, n, dtypeName(*dtype), bytes));
    return Error::success();
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes)
      return tensorError(proto,
                         llvm::formatv("raw_data has {0} bytes, but {1} "
                                       "elements of {2} need {3}",
                                       proto.raw_data().size(), n, dtypeName(*dtype), bytes));
    return Error::success();
  }
  int64_t have = typedFieldSize(proto, *dtype);
  if (have != n)
    return tensorError(proto, llvm::formatv("holds {0} values, but its shape needs {1}", have, n));
  return Error::success();
}

Expected<Tensor> decodeTensorProto(const onnx::TensorProto &proto, llvm::StringRef modelDir) {
  if (Error e = validateTensorProto(proto, modelDir))
    return std::move(e);
  DType dtype = *dtypeFromOnnx(proto.data_type());
  Shape shape = *tensorProtoShape(proto);
  // The data is there, but the executor holds 8 bytes per element of it.
  if (Error e = Tensor::checkShape(dtype, shape))
    return tensorError(proto, llvm::toString(std::move(e)));
  Tensor tensor(dtype, shape);
  int64_t n = tensor.numElements();

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    auto location = resolveExternalData(proto, modelDir);
    if (!location)
      return location.takeError();
    // Opened beneath the model's directory by the kernel: a symbolic link
    // swapped in since resolveExternalData's checks is refused here.
    auto buffer =
        readFileBeneath(modelDir, location->relative,
                        std::pair<uint64_t, uint64_t>(location->offset, location->length));
    if (!buffer)
      return tensorError(proto, "cannot read external data '" + printable(location->path) +
                                    "': " + llvm::toString(buffer.takeError()));
    return Tensor::fromBytes(dtype, tensor.shape(), (*buffer)->getBufferStart());
  }
  if (proto.has_raw_data()) {
    return Tensor::fromBytes(dtype, tensor.shape(), proto.raw_data().data());
  }
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case DType::F32:
      tensor.floats()[i] = proto.float_data(i);
      break;
    case DType::F64:
      tensor.floats()[i] = proto.double_data(i);
      break;
    case DType::I64:
      tensor.ints()[i] = proto.int64_data(i);
      break;
    case DType::U32:
    case DType::U64:
      tensor.ints()[i] = static_cast<int64_t>(proto.uint64_data(i));
      break;
    case DType::F16:
    case DType::BF16: {
      uint16_t bits = static_cast<uint16_t>(proto.int32_data(i));
      tensor.floats()[i] =
          Tensor::fromBytes(dtype, {}, reinterpret_cast<const char *>(&bits)).floats()[0];
      break;
    }
    default:
      tensor.setInt(i, proto.int32_data(i));
      break;
    }
  }
  return tensor;
}

void encodeTensorProto(const Tensor &tensor, onnx::TensorProto &proto) {
  proto.set_data_type(onnxDataType(tensor.dtype()));
  proto.clear_dims();
  for (int64_t d : tensor.shape())
    proto.add_dims(d);
  proto.clear_float_data();
  proto.clear_double_data();
  proto.clear_int32_data();
  proto.clear_int64_data();
  proto.clear_uint64_data();
  proto.clear_external_data();
  proto.set_data_location(onnx::TensorProto::DEFAULT);
  proto.set_raw_data(tensor.toBytes());
}

} // namespace ppc
