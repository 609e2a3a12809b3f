//===- Kernels.h - per-op kernels of the reference executor ------*- C++ -*-===//
//
// Every ppc op the executor can run has one kernel, registered by op class in
// the kernels/ file of its op family (a table entry, not a switch). A kernel
// receives the op (for its attributes and result types), its operand values,
// and returns one tensor per result, rounded to the result's dtype.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_EXECUTOR_KERNELS_H
#define PPC_EXECUTOR_KERNELS_H

#include "executor/Tensor.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>

namespace ppc {

struct ExecOptions {
  /// Run every float tensor in f64, whatever its declared type.
  bool f64 = false;
  /// The dtype a value of MLIR type `type` is held in under these options.
  DType storage(mlir::Type type) const;
};

using Kernel = std::function<mlir::LogicalResult(
    mlir::Operation *op, llvm::ArrayRef<Tensor> operands, llvm::SmallVectorImpl<Tensor> &results,
    const ExecOptions &options)>;

class KernelRegistry {
public:
  /// The registry with every kernel of the executor.
  static const KernelRegistry &get();

  template <typename OpT> void add(Kernel kernel) {
    kernels[mlir::TypeID::get<OpT>()] = std::move(kernel);
  }
  /// The kernel of `op`, or null when the executor cannot run it.
  const Kernel *lookup(mlir::Operation *op) const;

private:
  llvm::DenseMap<mlir::TypeID, Kernel> kernels;
};

// One registration function per op family (executor/kernels/*.cpp).
void registerElementwiseKernels(KernelRegistry &registry);
void registerContractionKernels(KernelRegistry &registry);
void registerReductionKernels(KernelRegistry &registry);
void registerNormalizationKernels(KernelRegistry &registry);
void registerDataMovementKernels(KernelRegistry &registry);
void registerLossKernels(KernelRegistry &registry);

/// The storage dtype of result `index` of `op` under `options`.
DType resultDType(mlir::Operation *op, unsigned index, const ExecOptions &options);

/// Maps a flat index of a tensor of shape `outShape` to the flat index of an
/// operand of shape `inShape` that broadcasts to it.
int64_t broadcastIndex(int64_t flat, llvm::ArrayRef<int64_t> outShape,
                       llvm::ArrayRef<int64_t> outStrides, llvm::ArrayRef<int64_t> inShape,
                       llvm::ArrayRef<int64_t> inStrides);

} // namespace ppc

#endif // PPC_EXECUTOR_KERNELS_H
