//===- DType.h - the element types of ppc, compiler and runtime alike -*- C++ -*-===//
//
// One enum for the whole project: the reference executor's tensors
// (ppc::DType is this type), the tensors of generated programs, checkpoint
// shards and safetensors files. Plain C++17, since generated code includes
// it (through Program.h); header-only, so that every library may use it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_DTYPE_H
#define PPC_RUNTIME_PPCRT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ppcrt {

/// Element types. I1 is one byte (0 or 1) in memory and in files.
enum class DType : uint8_t { F16, BF16, F32, F64, I1, I8, I16, I32, I64, U8, U16, U32, U64 };

/// Every element type, in the enum's order.
constexpr DType kDTypes[] = {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I1,
                             DType::I8,  DType::I16,  DType::I32, DType::I64, DType::U8,
                             DType::U16, DType::U32,  DType::U64};

/// Bytes per element.
constexpr size_t dtypeBytes(DType dtype) {
  switch (dtype) {
  case DType::I1:
  case DType::I8:
  case DType::U8:
    return 1;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  }
  return 0;
}

/// The safetensors spelling ("F32", ..., "BOOL" for I1), which checkpoint
/// indexes and the runtime's messages use too.
constexpr const char *safetensorsName(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::I1:
    return "BOOL";
  case DType::I8:
    return "I8";
  case DType::I16:
    return "I16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::U8:
    return "U8";
  case DType::U16:
    return "U16";
  case DType::U32:
    return "U32";
  case DType::U64:
    return "U64";
  }
  return "?";
}

/// The element type that `name` spells in safetensors, if any.
inline std::optional<DType> dtypeFromSafetensorsName(std::string_view name) {
  for (DType dtype : kDTypes)
    if (name == safetensorsName(dtype))
      return dtype;
  return std::nullopt;
}

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_DTYPE_H
