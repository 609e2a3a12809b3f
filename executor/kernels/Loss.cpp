//===- Loss.cpp - nll_loss kernel -----------------------------------------===//

#include "executor/Kernels.h"
#include "ir/PpcOps.h"

using namespace mlir;

namespace ppc {

static LogicalResult nllLossKernel(Operation *op, llvm::ArrayRef<Tensor> operands,
                                   llvm::SmallVectorImpl<Tensor> &results,
                                   const ExecOptions &options) {
  auto nllLoss = llvm::cast<NllLossOp>(op);
  const Tensor &input = operands[0], &target = operands[1];
  const Tensor *weight = nllLoss.getWeight() ? &operands[2] : nullptr;
  // ignore_index is optional; I64Attr getters are unsigned, so read it signed.
  std::optional<int64_t> ignoreIndex;
  if (IntegerAttr attr = nllLoss.getIgnoreIndexAttr())
    ignoreIndex = attr.getInt();
  // input is [N, C, d1, ...] and target [N, d1, ...]: the class dimension
  // splits the input into (batch, class, inner).
  int64_t batch = input.shape()[0], numClasses = input.shape()[1],
          inner = numElements(input.shape().drop_front(2));
  std::vector<double> losses(target.numElements(), 0.0);
  double lossSum = 0, weightSum = 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t j = 0; j < inner; ++j) {
      int64_t i = n * inner + j, t = target.ints()[i];
      if (ignoreIndex && t == *ignoreIndex)
        continue;
      if (t < 0 || t >= numClasses)
        return op->emitError() << "nll_loss target " << t << " out of range [0, " << numClasses
                               << ")";
      double w = weight ? weight->floats()[t] : 1.0;
      losses[i] = -input.floats()[(n * numClasses + t) * inner + j] * w;
      lossSum += losses[i];
      weightSum += w;
    }
  }

  Tensor result(resultDType(op, 0, options), nllLoss.getType().getShape());
  switch (nllLoss.getReduction()) {
  case LossReduction::None:
    for (auto [i, loss] : llvm::enumerate(losses))
      result.setDouble(i, loss);
    break;
  case LossReduction::Sum:
    result.setDouble(0, lossSum);
    break;
  case LossReduction::Mean:
    // As in ONNX and PyTorch, a mean over only ignored targets is NaN (0 / 0).
    result.setDouble(0, lossSum / weightSum);
    break;
  }
  results.push_back(std::move(result));
  return success();
}

void registerLossKernels(KernelRegistry &registry) { registry.add<NllLossOp>(nllLossKernel); }

} // namespace ppc
