//===- Tensor.cpp - host tensors of the reference executor ----------------===//

#include "executor/Tensor.h"
#include "runtime/CheckedSize.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace ppc {

bool isFloat(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 || dtype == DType::F64;
}

llvm::StringRef dtypeName(DType dtype) {
  static const char *names[] = {"f16", "bf16", "f32", "f64", "i1",  "i8", "i16",
                                "i32", "i64",  "u8",  "u16", "u32", "u64"};
  return names[static_cast<int>(dtype)];
}

FailureOr<DType> dtypeOf(Type type) {
  if (type.isF16())
    return DType::F16;
  if (type.isBF16())
    return DType::BF16;
  if (type.isF32())
    return DType::F32;
  if (type.isF64())
    return DType::F64;
  auto integer = llvm::dyn_cast<IntegerType>(type);
  if (!integer)
    return failure();
  bool isUnsigned = integer.isUnsigned();
  switch (integer.getWidth()) {
  case 1:
    return DType::I1;
  case 8:
    return isUnsigned ? DType::U8 : DType::I8;
  case 16:
    return isUnsigned ? DType::U16 : DType::I16;
  case 32:
    return isUnsigned ? DType::U32 : DType::I32;
  case 64:
    return isUnsigned ? DType::U64 : DType::I64;
  default:
    return failure();
  }
}

Type mlirType(DType dtype, MLIRContext *context) {
  Builder b(context);
  switch (dtype) {
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::F32:
    return b.getF32Type();
  case DType::F64:
    return b.getF64Type();
  case DType::I1:
    return b.getI1Type();
  case DType::I8:
  case DType::I16:
  case DType::I32:
  case DType::I64:
    return b.getIntegerType(byteWidth(dtype) * 8);
  case DType::U8:
  case DType::U16:
  case DType::U32:
  case DType::U64:
    return b.getIntegerType(byteWidth(dtype) * 8, /*isSigned=*/false);
  }
  return {};
}

static const llvm::fltSemantics &semantics(DType dtype) {
  return dtype == DType::F16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat();
}

double roundFloat(DType dtype, double value) {
  switch (dtype) {
  case DType::F32:
    return static_cast<double>(static_cast<float>(value));
  case DType::F16:
  case DType::BF16: {
    llvm::APFloat f(value);
    bool lost;
    f.convert(semantics(dtype), llvm::APFloat::rmNearestTiesToEven, &lost);
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
    return f.convertToDouble();
  }
  default:
    return value;
  }
}

int64_t wrapInteger(DType dtype, int64_t value) {
  switch (dtype) {
  case DType::I1:
    return value != 0;
  case DType::I8:
    return static_cast<int8_t>(value);
  case DType::I16:
    return static_cast<int16_t>(value);
  case DType::I32:
    return static_cast<int32_t>(value);
  case DType::U8:
    return static_cast<uint8_t>(value);
  case DType::U16:
    return static_cast<uint16_t>(value);
  case DType::U32:
    return static_cast<uint32_t>(value);
  default:
    return value;
  }
}

/// Float to integer conversion that never invokes undefined behaviour:
/// NaN becomes 0 and out-of-range values saturate.
static int64_t truncateToInt(double value) {
  if (std::isnan(value))
    return 0;
  if (value >= 9.2233720368547758e18)
    return INT64_MAX;
  if (value <= -9.2233720368547758e18)
    return INT64_MIN;
  return static_cast<int64_t>(value);
}

Shape stridesOf(llvm::ArrayRef<int64_t> shape) {
  Shape strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

llvm::Expected<int64_t> tensorBytes(DType dtype, llvm::ArrayRef<int64_t> shape) {
  return checkedTensorBytes(shape, byteWidth(dtype), dtypeName(dtype));
}

llvm::Error Tensor::checkShape(DType dtype, llvm::ArrayRef<int64_t> shape) {
  if (llvm::Expected<int64_t> bytes = tensorBytes(dtype, shape); !bytes)
    return bytes.takeError();
  // Every element is a double or an int64_t here, whatever the dtype.
  std::string held = (dtypeName(dtype) + " held in 8 bytes each").str();
  if (llvm::Expected<int64_t> bytes = checkedTensorBytes(shape, 8, held); !bytes)
    return bytes.takeError();
  return llvm::Error::success();
}

llvm::Expected<Tensor> Tensor::allocate(DType dtype, llvm::ArrayRef<int64_t> shape) {
  if (llvm::Error e = checkShape(dtype, shape))
    return std::move(e);
  return Tensor(dtype, shape);
}

Tensor::Tensor(DType dtype, llvm::ArrayRef<int64_t> shape)
    : dtype_(dtype), shape_(shape), numElements_(ppc::numElements(shape)) {
  if (ppc::isFloat(dtype))
    floats_.assign(numElements_, 0.0);
  else
    ints_.assign(numElements_, 0);
}

double Tensor::getDouble(int64_t index) const {
  if (isFloat())
    return floats_[index];
  // u64 values at or above 2^63 are stored with the sign bit set.
  if (dtype_ == DType::U64)
    return static_cast<double>(static_cast<uint64_t>(ints_[index]));
  return static_cast<double>(ints_[index]);
}

void Tensor::setDouble(int64_t index, double value) {
  if (isFloat())
    floats_[index] = roundFloat(dtype_, value);
  else if (dtype_ == DType::I1)
    ints_[index] = value != 0;
  else
    ints_[index] = wrapInteger(dtype_, truncateToInt(value));
}

int64_t Tensor::getInt(int64_t index) const {
  return isFloat() ? truncateToInt(floats_[index]) : ints_[index];
}

void Tensor::setInt(int64_t index, int64_t value) {
  if (isFloat())
    floats_[index] = roundFloat(dtype_, static_cast<double>(value));
  else
    ints_[index] = wrapInteger(dtype_, value);
}

void Tensor::roundToDType() {
  if (isFloat()) {
    if (dtype_ != DType::F64)
      for (double &v : floats_)
        v = roundFloat(dtype_, v);
  } else {
    for (int64_t &v : ints_)
      v = wrapInteger(dtype_, v);
  }
}

Tensor Tensor::castTo(DType dtype) const {
  Tensor result(dtype, shape_);
  for (int64_t i = 0; i < numElements_; ++i) {
    if (isFloat() || (dtype_ == DType::U64 && ppc::isFloat(dtype)))
      result.setDouble(i, getDouble(i));
    else
      result.setInt(i, ints_[i]);
  }
  return result;
}

Tensor Tensor::reshaped(llvm::ArrayRef<int64_t> shape) const {
  Tensor result = *this;
  result.shape_.assign(shape.begin(), shape.end());
  return result;
}

Tensor Tensor::fromBytes(DType dtype, llvm::ArrayRef<int64_t> shape, const char *data) {
  Tensor tensor(dtype, shape);
  auto load = [&](int64_t i, auto zero) {
    decltype(zero) v;
    std::memcpy(&v, data + i * sizeof(v), sizeof(v));
    return v;
  };
  for (int64_t i = 0; i < tensor.numElements_; ++i) {
    switch (dtype) {
    case DType::F32:
      tensor.floats_[i] = load(i, float());
      break;
    case DType::F64:
      tensor.floats_[i] = load(i, double());
      break;
    case DType::F16:
    case DType::BF16: {
      llvm::APFloat f(semantics(dtype), llvm::APInt(16, load(i, uint16_t())));
      bool lost;
      f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
      tensor.floats_[i] = f.convertToDouble();
      break;
    }
    case DType::I1:
      tensor.ints_[i] = load(i, uint8_t()) != 0;
      break;
    case DType::I8:
      tensor.ints_[i] = load(i, int8_t());
      break;
    case DType::I16:
      tensor.ints_[i] = load(i, int16_t());
      break;
    case DType::I32:
      tensor.ints_[i] = load(i, int32_t());
      break;
    case DType::I64:
    case DType::U64:
      tensor.ints_[i] = load(i, int64_t());
      break;
    case DType::U8:
      tensor.ints_[i] = load(i, uint8_t());
      break;
    case DType::U16:
      tensor.ints_[i] = load(i, uint16_t());
      break;
    case DType::U32:
      tensor.ints_[i] = load(i, uint32_t());
      break;
    }
  }
  return tensor;
}

std::string Tensor::toBytes() const {
  std::string bytes;
  bytes.reserve(numElements_ * byteWidth(dtype_));
  auto store = [&](auto v) { bytes.append(reinterpret_cast<const char *>(&v), sizeof(v)); };
  for (int64_t i = 0; i < numElements_; ++i) {
    switch (dtype_) {
    case DType::F32:
      store(static_cast<float>(floats_[i]));
      break;
    case DType::F64:
      store(floats_[i]);
      break;
    case DType::F16:
    case DType::BF16: {
      llvm::APFloat f(floats_[i]);
      bool lost;
      f.convert(semantics(dtype_), llvm::APFloat::rmNearestTiesToEven, &lost);
      store(static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue()));
      break;
    }
    case DType::I1:
    case DType::I8:
    case DType::U8:
      store(static_cast<uint8_t>(ints_[i]));
      break;
    case DType::I16:
    case DType::U16:
      store(static_cast<uint16_t>(ints_[i]));
      break;
    case DType::I32:
    case DType::U32:
      store(static_cast<uint32_t>(ints_[i]));
      break;
    case DType::I64:
    case DType::U64:
      store(ints_[i]);
      break;
    }
  }
  return bytes;
}

FailureOr<Tensor> Tensor::fromAttr(ElementsAttr attr) {
  auto type = llvm::cast<ShapedType>(attr.getType());
  auto dtype = dtypeOf(type.getElementType());
  if (failed(dtype))
    return failure();
  Tensor result(*dtype, type.getShape());
  if (result.isFloat()) {
    // f32 and f64 directly (APFloat per element is most of folding a large
    // table's time); other widths through APFloat.
    if (auto dense = llvm::dyn_cast<DenseElementsAttr>(attr)) {
      if (*dtype == DType::F32) {
        auto values = dense.tryGetValues<float>();
        if (succeeded(values)) {
          llvm::copy(*values, result.floats_.begin());
          return result;
        }
      } else if (*dtype == DType::F64) {
        auto values = dense.tryGetValues<double>();
        if (succeeded(values)) {
          llvm::copy(*values, result.floats_.begin());
          return result;
        }
      }
    }
    auto values = attr.tryGetValues<llvm::APFloat>();
    if (!values)
      return failure();
    for (auto [i, v] : llvm::enumerate(*values)) {
      bool lost;
      llvm::APFloat d = v;
      d.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
      result.floats_[i] = d.convertToDouble();
    }
  } else {
    auto values = attr.tryGetValues<llvm::APInt>();
    if (!values)
      return failure();
    bool isUnsigned = type.getElementType().isUnsignedInteger() || *dtype == DType::I1;
    for (auto [i, v] : llvm::enumerate(*values))
      result.ints_[i] = isUnsigned ? static_cast<int64_t>(v.getZExtValue()) : v.getSExtValue();
  }
  return result;
}

DenseElementsAttr Tensor::toAttr(MLIRContext *context) const {
  auto type = RankedTensorType::get(shape_, mlirType(dtype_, context));
  switch (dtype_) {
  case DType::F64:
    return DenseElementsAttr::get(type, llvm::ArrayRef<double>(floats_));
  case DType::F32: {
    std::vector<float> values(floats_.begin(), floats_.end());
    return DenseElementsAttr::get(type, llvm::ArrayRef<float>(values));
  }
  case DType::F16:
  case DType::BF16: {
    std::vector<llvm::APFloat> values;
    values.reserve(numElements_);
    for (double v : floats_) {
      llvm::APFloat f(v);
      bool lost;
      f.convert(semantics(dtype_), llvm::APFloat::rmNearestTiesToEven, &lost);
      values.push_back(f);
    }
    return DenseElementsAttr::get(type, values);
  }
  case DType::I1: {
    std::vector<bool> bits(ints_.begin(), ints_.end());
    llvm::SmallVector<bool> values(bits.begin(), bits.end());
    return DenseElementsAttr::get(type, llvm::ArrayRef<bool>(values));
  }
  default: {
    std::vector<llvm::APInt> values;
    values.reserve(numElements_);
    unsigned width = byteWidth(dtype_) * 8;
    for (int64_t v : ints_)
      values.emplace_back(width, static_cast<uint64_t>(v),
                          /*isSigned=*/!type.getElementType().isUnsignedInteger());
    return DenseElementsAttr::get(type, values);
  }
  }
}

} // namespace ppc
