//===- library_types.h - CUDA library element types, emulated ----*- C++ -*-===//

#ifndef PPCRT_EMULATOR_LIBRARY_TYPES_H
#define PPCRT_EMULATOR_LIBRARY_TYPES_H

enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
};
typedef cudaDataType_t cudaDataType;

#endif // PPCRT_EMULATOR_LIBRARY_TYPES_H
