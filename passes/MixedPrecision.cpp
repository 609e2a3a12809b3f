//===- MixedPrecision.cpp - --precision bf16: activations in bf16 --------===//
//
// Megatron-LM's bf16 training, applied to @forward before the loss and the
// backward are built: every activation (a float value computed from the
// model's inputs or parameters) is stored in bf16, every op reads bf16 and
// rounds its result to bf16 once (kernels compute in f32), parameters are
// read through bf16 copies of the f32 masters, and the logits are handed to
// the f32 loss as f32. Autodiff then differentiates the bf16 program, so the
// backward runs in bf16 too, and each parameter's gradient is its bf16
// gradient cast to f32 (the cast's gradient rule), summed over micro-batches,
// reduced over data parallelism and applied to the master in f32. See
// docs/architecture.md, "Mixed precision".
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"

namespace {

Type withElement(Type type, Type element) {
  return llvm::cast<RankedTensorType>(type).clone(element);
}

bool isF32(Type type) { return getElementTypeOrSelf(type).isF32(); }

/// The f32 scalar operand of an elementwise binary op on an activation,
/// computed from constants alone and not exactly a `low` value (1/sqrt(2)
/// in an exported GELU, an epsilon), or null.
Value inexactScalar(Operation &op, const llvm::DenseSet<Value> &activations, Type low) {
  if (!llvm::isa<ElementwiseOpInterface>(op) || op.getNumOperands() != 2 ||
      op.getNumResults() != 1 || !isF32(op.getResult(0).getType()))
    return nullptr;
  for (Value operand : op.getOperands()) {
    auto type = llvm::cast<RankedTensorType>(operand.getType());
    if (activations.contains(operand) || !type.getElementType().isF32() ||
        type.getNumElements() != 1)
      continue;
    DenseElementsAttr value;
    if (!matchPattern(operand, m_Constant(&value)))
      return operand; // Computed: its exactness is not known here.
    return holdsExactly(llvm::cast<FloatType>(low), *value.getValues<APFloat>().begin()) ? nullptr
                                                                                         : operand;
  }
  return nullptr;
}

/// Makes `op` read its `low` operands (but `except`) through f32 casts.
void upcastLow(Operation &op, Type low, Value except = nullptr) {
  OpBuilder b(&op);
  for (OpOperand &operand : op.getOpOperands())
    if (operand.get() != except && getElementTypeOrSelf(operand.get().getType()) == low)
      operand.set(b.create<CastOp>(
          op.getLoc(), withElement(operand.get().getType(), b.getF32Type()), operand.get()));
}

/// Runs `op` (activation op scalar) in f32 and rounds its result to `low`
/// once, as torch runs a bf16 tensor op with a Python scalar: rounding the
/// scalar first would divide by 1.4140625 where the model says sqrt(2).
void computeInF32(Operation &op, Value scalar, llvm::DenseSet<Value> &activations, Type low) {
  upcastLow(op, low, scalar);
  OpBuilder b(&op);
  b.setInsertionPointAfter(&op);
  Value result = op.getResult(0);
  auto rounded = b.create<CastOp>(op.getLoc(), withElement(result.getType(), low), result);
  result.replaceAllUsesExcept(rounded, rounded);
  activations.insert(rounded);
}

struct MixedPrecisionPass : impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError() << "no @forward function";
      return signalPassFailure();
    }
    Builder types(&getContext());
    Type low;
    if (precision == "bf16")
      low = types.getBF16Type();
    else if (precision == "fp16")
      low = types.getF16Type();
    else if (precision != "fp32") {
      module.emitError() << "precision '" << precision << "' is not one of fp32, bf16, fp16";
      return signalPassFailure();
    }
    if (!low)
      return;
    Block &body = forward.getBody().front();

    // Activations: values computed from a float argument (a parameter, a
    // float input). What is computed from constants and integer inputs alone
    // (folded tables too large to fold, masks, positions and the rotary
    // angles of position ids) stays f32 and is rounded once where an
    // activation op reads it, as a model's buffers are (HF LLaMA computes
    // its rotary tables in f32 and casts them at use).
    llvm::DenseSet<Value> activations;
    for (BlockArgument arg : body.getArguments())
      if (llvm::isa<FloatType>(getElementTypeOrSelf(arg.getType())))
        activations.insert(arg);
    // A loss the model computes itself (log-softmax, NLL and what follows
    // them) stays f32, as the appended one is.
    llvm::DenseSet<Value> lossValues;
    // The low-precision copy of an f32 argument or constant, made right
    // before its first reader and shared by the later ones.
    llvm::DenseMap<Value, Value> copies;
    OpBuilder b(&getContext());
    auto lowCopy = [&](Value value, Operation *reader) {
      Value &copy = copies[value];
      if (!copy) {
        b.setInsertionPoint(reader);
        copy = b.create<CastOp>(reader->getLoc(), withElement(value.getType(), low), value);
      }
      return copy;
    };

    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      // (Copies are made before `op`, so the walk, already past it, does
      // not visit them.)
      if (llvm::none_of(op.getOperands(), [&](Value v) { return activations.contains(v); }))
        continue;
      if (llvm::isa<LogSoftmaxOp, NllLossOp>(op) ||
          llvm::any_of(op.getOperands(), [&](Value v) { return lossValues.contains(v); })) {
        upcastLow(op, low);
        for (Value result : op.getResults()) {
          activations.insert(result);
          lossValues.insert(result);
        }
        continue;
      }
      if (Value scalar = inexactScalar(op, activations, low)) {
        computeInF32(op, scalar, activations, low);
        continue;
      }
      for (OpOperand &operand : op.getOpOperands())
        if (isF32(operand.get().getType()))
          operand.set(lowCopy(operand.get(), &op));
      for (Value result : op.getResults()) {
        activations.insert(result);
        // An attention's log-sum-exp stays f32 (the statistic its backward
        // recomputes the probabilities from), as FlashAttention keeps it.
        if (auto attention = llvm::dyn_cast<AttentionOp>(op);
            attention && result == attention.getLse())
          continue;
        if (isF32(result.getType()))
          result.setType(withElement(result.getType(), low));
      }
    }
    // The function's results keep their f32 types: the logits (or the
    // model's own loss) reach the loss in f32, as Megatron's cross entropy
    // reads `logits.float()`.
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Type declared = forward.getResultTypes()[operand.getOperandNumber()];
      if (operand.get().getType() != declared)
        operand.set(b.create<CastOp>(ret.getLoc(), declared, operand.get()));
    }
  }
};

} // namespace
} // namespace ppc
