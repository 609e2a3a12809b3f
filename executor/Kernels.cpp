//===- Kernels.cpp - the kernel registry ----------------------------------===//

#include "executor/Kernels.h"

using namespace mlir;

namespace ppc {

DType ExecOptions::storage(Type type) const {
  DType dtype = *dtypeOf(getElementTypeOrSelf(type));
  return f64 && isFloat(dtype) ? DType::F64 : dtype;
}

const KernelRegistry &KernelRegistry::get() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerElementwiseKernels(r);
    registerContractionKernels(r);
    registerReductionKernels(r);
    registerNormalizationKernels(r);
    registerDataMovementKernels(r);
    registerLossKernels(r);
    return r;
  }();
  return registry;
}

const Kernel *KernelRegistry::lookup(Operation *op) const {
  auto name = op->getRegisteredInfo();
  if (!name)
    return nullptr;
  auto it = kernels.find(name->getTypeID());
  return it == kernels.end() ? nullptr : &it->second;
}

DType resultDType(Operation *op, unsigned index, const ExecOptions &options) {
  return options.storage(op->getResult(index).getType());
}

int64_t broadcastIndex(int64_t flat, llvm::ArrayRef<int64_t> outShape,
                       llvm::ArrayRef<int64_t> outStrides, llvm::ArrayRef<int64_t> inShape,
                       llvm::ArrayRef<int64_t> inStrides) {
  size_t offset = outShape.size() - inShape.size();
  int64_t index = 0;
  for (size_t d = 0; d < outShape.size(); ++d) {
    int64_t coord = (flat / outStrides[d]) % outShape[d];
    if (d >= offset && inShape[d - offset] != 1)
      index += coord * inStrides[d - offset];
  }
  return index;
}

} // namespace ppc
