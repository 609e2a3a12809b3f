//===- Gradients.h - per-op gradient rules for reverse-mode AD ---*- C++ -*-===//
//
// Every differentiable ppc op has one gradient rule, registered by op class in
// the gradients/ file of its op family (like the executor's kernels). A rule
// builds, right after the forward computation, the adjoints of the op's
// operands from the adjoints of its results.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_AUTODIFF_GRADIENTS_H
#define PPC_PASSES_AUTODIFF_GRADIENTS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

namespace ppc {

/// What a gradient rule sees.
struct GradientRequest {
  mlir::OpBuilder &builder;
  mlir::Operation *op;
  /// One adjoint per result of `op`; null when that result has none (zero).
  /// At least one is non-null.
  llvm::ArrayRef<mlir::Value> resultGrads;
  /// One flag per operand: whether its adjoint is wanted. A rule may skip
  /// operands that are not wanted (and must for non-float ones).
  llvm::ArrayRef<bool> wanted;
};

/// Fills `operandGrads` with one value per operand of the op: its adjoint,
/// with the operand's exact type, or null (no gradient / not wanted). Fails
/// with a diagnostic at the op when the rule cannot handle this instance.
using GradientRule = std::function<mlir::LogicalResult(
    const GradientRequest &request, llvm::SmallVectorImpl<mlir::Value> &operandGrads)>;

class GradientRegistry {
public:
  /// The registry with every rule.
  static const GradientRegistry &get();

  template <typename OpT> void add(GradientRule rule) {
    rules[mlir::TypeID::get<OpT>()] = std::move(rule);
  }
  /// Ops that are constant or piecewise constant in their float operands
  /// (comparisons, casts to integers, floor, ...) contribute no gradient.
  template <typename OpT> void addNonDifferentiable() {
    nonDifferentiable.insert(mlir::TypeID::get<OpT>());
  }
  /// Ops whose gradient, for bf16 or f16 operands, is computed in f32 and
  /// rounded once (as the fused backward kernels of LayerNorm and softmax
  /// in Megatron-LM and PyTorch compute it), not as its rule's several ops
  /// each rounding to the low precision.
  template <typename OpT> void addComputedInF32() {
    computedInF32.insert(mlir::TypeID::get<OpT>());
  }
  const GradientRule *lookup(mlir::Operation *op) const;
  bool isNonDifferentiable(mlir::Operation *op) const;
  bool isComputedInF32(mlir::Operation *op) const {
    return computedInF32.contains(op->getName().getTypeID());
  }

private:
  llvm::DenseMap<mlir::TypeID, GradientRule> rules;
  llvm::DenseSet<mlir::TypeID> computedInF32;
  llvm::DenseSet<mlir::TypeID> nonDifferentiable;
};

// One registration function per op family (passes/autodiff/gradients/*.cpp).
void registerElementwiseGradients(GradientRegistry &registry);
void registerContractionGradients(GradientRegistry &registry);
void registerReductionGradients(GradientRegistry &registry);
void registerNormalizationGradients(GradientRegistry &registry);
void registerDataMovementGradients(GradientRegistry &registry);
void registerLossGradients(GradientRegistry &registry);

/// Sums `grad` (of a broadcast result) over the dimensions along which a
/// value of type `target` was broadcast, and reshapes it to `target`.
mlir::Value unbroadcast(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value grad,
                        mlir::RankedTensorType target);

/// A rank-0 constant `value` of `like`'s element type.
mlir::Value scalarConstant(mlir::OpBuilder &builder, mlir::Location loc, mlir::Type elementType,
                           double value);

/// `value` (a float tensor) times the scalar `factor`, rounded once to its
/// element type. A factor that a 16-bit type cannot hold exactly (2/sqrt(pi)
/// is 1.125 in bf16) is applied in f32, as MixedPrecision runs a forward op
/// with an inexact f32 scalar: a bf16 constant would bias every such gradient.
mlir::Value scaleBy(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value value, double factor);

/// A constant of `type` filled with zeros.
mlir::Value zerosLike(mlir::OpBuilder &builder, mlir::Location loc, mlir::RankedTensorType type);

} // namespace ppc

#endif // PPC_PASSES_AUTODIFF_GRADIENTS_H
