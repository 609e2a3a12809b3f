//===- Contraction.cpp - gradients of matmul, einsum and attention --------===//
//
// The adjoint of an operand of a contraction is the contraction of the
// result's adjoint with the other operands; batch dimensions that an operand
// was broadcast along are summed back with `unbroadcast`.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "ir/ShapeRules.h"
#include "passes/autodiff/Gradients.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;

namespace ppc {

static bool isFloatTensor(Value value) {
  return llvm::isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

static RankedTensorType tensorType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

/// `value` with its last two dimensions swapped.
static Value transposeLastTwo(OpBuilder &b, Location loc, Value value) {
  int64_t rank = tensorType(value).getRank();
  auto perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 2], perm[rank - 1]);
  return b.create<TransposeOp>(loc, value, perm);
}

/// d(A @ B) = dC @ B^T for A and A^T @ dC for B, summed over the batch
/// dimensions each was broadcast along.
static LogicalResult matmulGradient(const GradientRequest &request,
                                    llvm::SmallVectorImpl<Value> &operandGrads) {
  Operation *op = request.op;
  Value lhs = op->getOperand(0), rhs = op->getOperand(1), g = request.resultGrads[0];
  OpBuilder &b = request.builder;
  Location loc = op->getLoc();
  Value lhsGrad, rhsGrad;
  if (request.wanted[0] && isFloatTensor(lhs))
    lhsGrad = unbroadcast(b, loc, b.create<MatMulOp>(loc, g, transposeLastTwo(b, loc, rhs)),
                          tensorType(lhs));
  if (request.wanted[1] && isFloatTensor(rhs))
    rhsGrad = unbroadcast(b, loc, b.create<MatMulOp>(loc, transposeLastTwo(b, loc, lhs), g),
                          tensorType(rhs));
  operandGrads.push_back(lhsGrad);
  operandGrads.push_back(rhsGrad);
  return success();
}

//===----------------------------------------------------------------------===//
// EinsumOp
//===----------------------------------------------------------------------===//

/// 0, 1, ..., n-1 as an i64 tensor of shape `shape` (n elements).
static Value iota(OpBuilder &b, Location loc, llvm::ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, b.getI64Type());
  auto values = llvm::to_vector(llvm::seq<int64_t>(0, type.getNumElements()));
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, llvm::ArrayRef(values)));
}

/// The n x n identity matrix of `elementType`, built from two iotas so that
/// the constant holds O(n) elements.
static Value identity(OpBuilder &b, Location loc, int64_t n, Type elementType) {
  Value equal = b.create<EqualOp>(loc, iota(b, loc, {n, 1}), iota(b, loc, {1, n}));
  return b.create<CastOp>(loc, RankedTensorType::get({n, n}, elementType), equal);
}

/// A vector of n ones of `elementType`.
static Value ones(OpBuilder &b, Location loc, int64_t n, Type elementType) {
  auto type = RankedTensorType::get({n}, elementType);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, 1.0)));
}

/// The adjoint of operand `index` of an einsum: an einsum of the result's
/// adjoint with the other operands, producing that operand's labels. A label
/// repeated in the operand (a diagonal) gets a fresh letter and an identity
/// matrix linking the two; a label in no other term (summed out of this
/// operand alone) gets a vector of ones, which broadcasts the adjoint along
/// it.
static Value einsumOperandGrad(OpBuilder &b, Location loc, EinsumOp einsum, const EinsumSpec &spec,
                               unsigned index, Value g) {
  Type elementType = getElementTypeOrSelf(g.getType());
  std::map<char, int64_t> sizes;
  for (auto [term, operand] : llvm::zip(spec.inputs, einsum.getInputs()))
    for (auto [c, size] : llvm::zip(term, tensorType(operand).getShape()))
      sizes[c] = size;
  auto isUsed = [&](char c) { return sizes.count(c) > 0; };
  auto freshLabel = [&]() {
    for (char c = 'a'; c <= 'z'; ++c)
      if (!isUsed(c))
        return c;
    for (char c = 'A'; c <= 'Z'; ++c)
      if (!isUsed(c))
        return c;
    return '\0';
  };

  llvm::SmallVector<std::string> terms{spec.output};
  llvm::SmallVector<Value> operands{g};
  for (auto [j, operand] : llvm::enumerate(einsum.getInputs())) {
    if (j == index)
      continue;
    terms.push_back(spec.inputs[j]);
    operands.push_back(operand);
  }
  std::string output;
  for (char c : spec.inputs[index]) {
    if (!llvm::is_contained(output, c)) {
      output.push_back(c);
      continue;
    }
    char fresh = freshLabel();
    if (!fresh)
      return Value();
    sizes[fresh] = sizes[c];
    output.push_back(fresh);
    terms.push_back({c, fresh});
    operands.push_back(identity(b, loc, sizes[c], elementType));
  }
  for (char c : output) {
    bool elsewhere =
        llvm::any_of(terms, [&](const std::string &term) { return llvm::is_contained(term, c); });
    if (elsewhere)
      continue;
    terms.push_back(std::string(1, c));
    operands.push_back(ones(b, loc, sizes[c], elementType));
  }
  std::string equation = llvm::join(terms, ",") + "->" + output;
  return b.create<EinsumOp>(loc, equation, operands);
}

static LogicalResult einsumGradient(const GradientRequest &request,
                                    llvm::SmallVectorImpl<Value> &operandGrads) {
  auto einsum = llvm::cast<EinsumOp>(request.op);
  auto spec = parseEinsum(einsum.getEquation(),
                          [&](const llvm::Twine &msg) { (void)einsum.emitError(msg); });
  if (failed(spec))
    return failure();
  for (auto [i, operand] : llvm::enumerate(einsum.getInputs())) {
    if (!request.wanted[i] || !isFloatTensor(operand)) {
      operandGrads.push_back(Value());
      continue;
    }
    Value grad = einsumOperandGrad(request.builder, einsum.getLoc(), einsum, *spec, i,
                                   request.resultGrads[0]);
    if (!grad)
      return einsum.emitError() << "cannot differentiate einsum '" << einsum.getEquation()
                                << "': no letter is left to label a repeated dimension";
    operandGrads.push_back(grad);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// FlashAttention's backward as one op, `ppc.attention_grad`, which
/// recomputes the probabilities from the saved log-sum-exp. The bias (a
/// mask, ALiBi) has no adjoint: ppc-fuse-attention fuses only biases that
/// no parameter reaches.
static LogicalResult attentionGradient(const GradientRequest &request,
                                       llvm::SmallVectorImpl<Value> &operandGrads) {
  auto attention = llvm::cast<AttentionOp>(request.op);
  if (request.resultGrads.size() > 1 && request.resultGrads[1])
    return attention.emitOpError() << "has no gradient with respect to its log-sum-exp";
  if (attention.getBias() && request.wanted[3])
    return attention.emitOpError() << "has no gradient with respect to its bias";
  Value dOutput = request.resultGrads[0];
  if (!llvm::any_of(request.wanted.take_front(3), [](bool w) { return w; })) {
    operandGrads.append(attention->getNumOperands(), Value());
    return success();
  }
  auto grad = request.builder.create<AttentionGradOp>(
      attention.getLoc(),
      TypeRange{attention.getQ().getType(), attention.getK().getType(), attention.getV().getType()},
      attention.getQ(), attention.getK(), attention.getV(), attention.getOutput(),
      attention.getLse(), dOutput, attention.getBias(), attention.getScaleAttr(),
      attention.getCausalAttr());
  for (unsigned i = 0; i < 3; ++i)
    operandGrads.push_back(request.wanted[i] ? grad.getResult(i) : Value());
  if (attention.getBias())
    operandGrads.push_back(Value());
  return success();
}

void registerContractionGradients(GradientRegistry &registry) {
  registry.add<MatMulOp>(matmulGradient);
  registry.add<EinsumOp>(einsumGradient);
  registry.add<AttentionOp>(attentionGradient);
}

} // namespace ppc
