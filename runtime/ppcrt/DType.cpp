//===- DType.cpp - element types of program tensors ----------------------===//

#include "runtime/ppcrt/Program.h"

namespace ppcrt {

size_t dtypeBytes(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::I1:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::BF16:
    return "BF16";
  case DType::F16:
    return "F16";
  case DType::I64:
    return "I64";
  case DType::I32:
    return "I32";
  case DType::I8:
    return "I8";
  case DType::U8:
    return "U8";
  case DType::I1:
    return "BOOL";
  }
  return "?";
}

} // namespace ppcrt
