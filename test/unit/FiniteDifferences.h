//===- FiniteDifferences.h - gradients against central differences -*- C++ -*-===//

#ifndef PPC_TEST_UNIT_FINITEDIFFERENCES_H
#define PPC_TEST_UNIT_FINITEDIFFERENCES_H

#include "executor/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cmath>

namespace ppc {

/// Runs `grad` (the autodiff pass's @f_grad: the loss, then one gradient per
/// parameter) on `args` and compares the gradient of each argument in
/// `params` with central differences (step `h`) of `forward`'s first
/// result. Returns the worst |analytic - numeric| / max(1, |numeric|), or
/// infinity when a function fails to run.
inline double worstCentralDifference(mlir::func::FuncOp forward, mlir::func::FuncOp grad,
                                     llvm::SmallVectorImpl<Tensor> &args,
                                     llvm::ArrayRef<unsigned> params, const ExecOptions &exec,
                                     double h = 1e-6) {
  auto grads = runFunction(grad, args, exec);
  if (mlir::failed(grads) || grads->size() != params.size() + 1)
    return INFINITY;
  double worst = 0;
  for (auto [k, p] : llvm::enumerate(params)) {
    Tensor &value = args[p];
    const Tensor &analytic = (*grads)[1 + k];
    for (int64_t i = 0; i < value.numElements(); ++i) {
      double saved = value.floats()[i], side[2];
      for (int s = 0; s < 2; ++s) {
        value.floats()[i] = saved + (s ? -h : h);
        auto loss = runFunction(forward, args, exec);
        if (mlir::failed(loss))
          return INFINITY;
        side[s] = (*loss)[0].floats()[0];
      }
      value.floats()[i] = saved;
      double numeric = (side[0] - side[1]) / (2 * h);
      worst = std::max(worst,
                       std::abs(analytic.floats()[i] - numeric) / std::max(1.0, std::abs(numeric)));
    }
  }
  return worst;
}

} // namespace ppc

#endif // PPC_TEST_UNIT_FINITEDIFFERENCES_H
