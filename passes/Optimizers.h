//===- Optimizers.h - optimizer updates as ppc IR ---------------*- C++ -*-===//
//
// Optimizers are IR so that later stages can shard them (ZeRO). Each update
// follows torch.optim's single-tensor implementation operation by operation,
// with step-dependent scalars computed in f64 and applied in the parameter's
// type, as PyTorch applies Python floats to float32 tensors.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_OPTIMIZERS_H
#define PPC_PASSES_OPTIMIZERS_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace ppc {

struct OptimizerConfig {
  enum class Kind { Sgd, AdamW } kind = Kind::AdamW;
  double momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
};

/// The names of the state tensors each parameter carries ("momentum";
/// "exp_avg", "exp_avg_sq"), each zero-initialized and shaped like it.
llvm::SmallVector<llvm::StringRef> optimizerStateKinds(const OptimizerConfig &config);

/// Scalars shared by all parameter updates of one step, as rank-0 f64 values.
/// The hyper-parameters are arguments of the step (`ppc.hyper`), so that a
/// compiled executable can take other values at run time; a null one is
/// absent (its compiled value is 0 and it changes the update's structure).
struct StepScalars {
  mlir::Value lr;
  /// 1-based step count t = step + 1 (AdamW's bias correction).
  mlir::Value t;
  mlir::Value beta1, beta2, eps, weightDecay, momentum;
};

/// The factors the updates apply to tensors, each a rank-0 value of one
/// element type; a null one is absent (its scalar is).
struct UpdateFactors {
  /// SGD: d_p = g + weightDecay * p; buf = momentum * buf + d_p;
  /// p = p - lr * d_p.
  mlir::Value weightDecay, momentum, lr;
  /// AdamW: p = p * decay + m / (sqrt(v) / sqrtBiasCorrection2 + eps) *
  /// stepSize, with m = m * beta1 + g * oneMinusBeta1 and v likewise.
  mlir::Value decay, beta1, oneMinusBeta1, beta2, oneMinusBeta2, sqrtBiasCorrection2, eps, stepSize;
};

/// The factors of one step, computed once in f64 from `scalars` and cast
/// once to each of `elementTypes` (the parameters'): a step of many
/// parameters computes each scalar once, not once per parameter.
llvm::DenseMap<mlir::Type, UpdateFactors>
buildUpdateFactors(mlir::OpBuilder &builder, mlir::Location loc, const OptimizerConfig &config,
                   const StepScalars &scalars, llvm::ArrayRef<mlir::Type> elementTypes);

/// Builds the update of `param` with gradient `grad` and the state tensors
/// `state` (in optimizerStateKinds order), applying `factors` (of the
/// parameter's element type); appends the new parameter and then the new
/// state to `results`.
void buildParameterUpdate(mlir::OpBuilder &builder, mlir::Location loc,
                          const OptimizerConfig &config, const UpdateFactors &factors,
                          mlir::Value param, mlir::Value grad, llvm::ArrayRef<mlir::Value> state,
                          llvm::SmallVectorImpl<mlir::Value> &results);

/// A rank-0 f64 constant.
mlir::Value f64Scalar(mlir::OpBuilder &builder, mlir::Location loc, double value);

/// `scalar` (rank-0 f64) cast to a rank-0 tensor of `elementType`.
mlir::Value castScalar(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value scalar,
                       mlir::Type elementType);

} // namespace ppc

#endif // PPC_PASSES_OPTIMIZERS_H
