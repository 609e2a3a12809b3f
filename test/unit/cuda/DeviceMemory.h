//===- DeviceMemory.h - host vectors to and from device memory --*- C++ -*-===//
//
// What the CUDA tests share: a device copy of a host vector; a host copy of
// device memory as it is now (cudaMemcpy: on the emulator, work queued on
// streams other than the compute stream has not run yet), and one once a
// stream's queued work has run.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_CUDA_DEVICEMEMORY_H
#define PPC_TEST_UNIT_CUDA_DEVICEMEMORY_H

#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include <vector>

namespace ppc::test {

template <typename T> T *deviceCopy(const std::vector<T> &values) {
  void *memory = nullptr;
  EXPECT_EQ(cudaMalloc(&memory, values.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(memory, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T *>(memory);
}

template <typename T> std::vector<T> hostCopy(const T *device, size_t count) {
  std::vector<T> values(count);
  EXPECT_EQ(cudaMemcpy(values.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return values;
}

/// The host copy once `stream`'s work has run, checking the last launch.
template <typename T> std::vector<T> result(const T *device, size_t count, cudaStream_t stream) {
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<T> values(count);
  EXPECT_EQ(cudaMemcpy(values.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return values;
}

} // namespace ppc::test

#endif // PPC_TEST_UNIT_CUDA_DEVICEMEMORY_H
