//===- Elementwise.cpp - gradients of casts and elementwise ops -----------===//
//
// Unary rules multiply the adjoint by the derivative, written with the
// result where that is cheaper (exp, tanh, sigmoid, sqrt, reciprocal).
// Binary ops broadcast, so each operand's adjoint is summed back to its
// shape with `unbroadcast`.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/autodiff/Gradients.h"

using namespace mlir;

namespace ppc {

static constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

static bool isFloatTensor(Value value) {
  return llvm::isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

static RankedTensorType tensorType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

/// `mask` (i1) as 0/1 in the element type of `like`.
static Value maskAs(OpBuilder &b, Location loc, Value mask, Value like) {
  auto type =
      RankedTensorType::get(tensorType(mask).getShape(), getElementTypeOrSelf(like.getType()));
  return b.create<CastOp>(loc, type, mask);
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

/// The derivative of a unary op at its input `x` and result `y`, to be
/// multiplied by the adjoint.
using Derivative = std::function<Value(OpBuilder &b, Location loc, Value x, Value y)>;

/// A rule for a unary op: adjoint * derivative(x, y).
static GradientRule unaryRule(Derivative derivative) {
  return [derivative](const GradientRequest &request, llvm::SmallVectorImpl<Value> &operandGrads) {
    Operation *op = request.op;
    Value x = op->getOperand(0), y = op->getResult(0), g = request.resultGrads[0];
    if (!request.wanted[0] || !isFloatTensor(x)) {
      operandGrads.push_back(Value());
      return success();
    }
    OpBuilder &b = request.builder;
    Location loc = op->getLoc();
    operandGrads.push_back(b.create<MulOp>(loc, g, derivative(b, loc, x, y)));
    return success();
  };
}

/// A scalar constant of `like`'s element type.
static Value constantLike(OpBuilder &b, Location loc, Value like, double value) {
  return scalarConstant(b, loc, getElementTypeOrSelf(like.getType()), value);
}

static LogicalResult negGradient(const GradientRequest &request,
                                 llvm::SmallVectorImpl<Value> &operandGrads) {
  Value x = request.op->getOperand(0);
  operandGrads.push_back(
      request.wanted[0] && isFloatTensor(x)
          ? request.builder.create<NegOp>(request.op->getLoc(), request.resultGrads[0])
          : Value());
  return success();
}

/// float -> float casts pass the adjoint back in the input's type; other
/// casts have no gradient.
static LogicalResult castGradient(const GradientRequest &request,
                                  llvm::SmallVectorImpl<Value> &operandGrads) {
  Value x = request.op->getOperand(0), y = request.op->getResult(0);
  if (!request.wanted[0] || !isFloatTensor(x) || !isFloatTensor(y)) {
    operandGrads.push_back(Value());
    return success();
  }
  Value g = request.resultGrads[0];
  operandGrads.push_back(g.getType() == x.getType() ? g
                                                    : request.builder.create<CastOp>(
                                                          request.op->getLoc(), x.getType(), g));
  return success();
}

static void registerUnaryGradients(GradientRegistry &registry) {
  registry.add<NegOp>(negGradient);
  registry.add<CastOp>(castGradient);
  // d|x| = sign(x), 0 at 0 (as torch).
  registry.add<AbsOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value) {
    Value zero = constantLike(b, loc, x, 0);
    return b
        .create<SubOp>(loc, maskAs(b, loc, b.create<GreaterOp>(loc, x, zero), x),
                       maskAs(b, loc, b.create<LessOp>(loc, x, zero), x))
        .getResult();
  }));
  // d sqrt(x) = 0.5 / y.
  registry.add<SqrtOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value y) {
    return b.create<DivOp>(loc, constantLike(b, loc, x, 0.5), y).getResult();
  }));
  // d (1/x) = -y^2.
  registry.add<ReciprocalOp>(unaryRule([](OpBuilder &b, Location loc, Value, Value y) {
    return b.create<NegOp>(loc, b.create<MulOp>(loc, y, y)).getResult();
  }));
  registry.add<ExpOp>(unaryRule([](OpBuilder &, Location, Value, Value y) { return y; }));
  registry.add<LogOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value) {
    return b.create<ReciprocalOp>(loc, x).getResult();
  }));
  // d erf(x) = 2 / sqrt(pi) * exp(-x^2).
  registry.add<ErfOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value) {
    Value square = b.create<MulOp>(loc, x, x);
    Value gauss = b.create<ExpOp>(loc, b.create<NegOp>(loc, square));
    return scaleBy(b, loc, gauss, kTwoOverSqrtPi);
  }));
  // d tanh(x) = 1 - y^2.
  registry.add<TanhOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value y) {
    return b.create<SubOp>(loc, constantLike(b, loc, x, 1), b.create<MulOp>(loc, y, y)).getResult();
  }));
  // d sigmoid(x) = y (1 - y).
  registry.add<SigmoidOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value y) {
    Value oneMinus = b.create<SubOp>(loc, constantLike(b, loc, x, 1), y);
    return b.create<MulOp>(loc, y, oneMinus).getResult();
  }));
  // d relu(x) = [x > 0], 0 at 0 (as torch).
  registry.add<ReluOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value) {
    return maskAs(b, loc, b.create<GreaterOp>(loc, x, constantLike(b, loc, x, 0)), x);
  }));
  registry.add<SinOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value) {
    return b.create<CosOp>(loc, x).getResult();
  }));
  registry.add<CosOp>(unaryRule([](OpBuilder &b, Location loc, Value x, Value) {
    return b.create<NegOp>(loc, b.create<SinOp>(loc, x)).getResult();
  }));

  registry.addNonDifferentiable<ConstantOp>();
  registry.addNonDifferentiable<FloorOp>();
  registry.addNonDifferentiable<CeilOp>();
  registry.addNonDifferentiable<SignOp>();
  registry.addNonDifferentiable<NotOp>();
}

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

/// The adjoints of both operands of a broadcast binary op, before
/// unbroadcasting; `wantX` and `wantY` say which to build (the other may stay
/// null).
using BinaryPartials = std::function<std::pair<Value, Value>(
    OpBuilder &b, Location loc, Value g, Value x, Value y, Value result, bool wantX, bool wantY)>;

static GradientRule binaryRule(BinaryPartials partials) {
  return [partials](const GradientRequest &request, llvm::SmallVectorImpl<Value> &operandGrads) {
    Operation *op = request.op;
    Value x = op->getOperand(0), y = op->getOperand(1);
    bool wantX = request.wanted[0] && isFloatTensor(x),
         wantY = request.wanted[1] && isFloatTensor(y);
    if (!wantX && !wantY) {
      operandGrads.append(2, Value());
      return success();
    }
    OpBuilder &b = request.builder;
    Location loc = op->getLoc();
    auto [gx, gy] = partials(b, loc, request.resultGrads[0], x, y, op->getResult(0), wantX, wantY);
    operandGrads.push_back(wantX ? unbroadcast(b, loc, gx, tensorType(x)) : Value());
    operandGrads.push_back(wantY ? unbroadcast(b, loc, gy, tensorType(y)) : Value());
    return success();
  };
}

/// max and min: the adjoint goes to the operand that was picked, half to
/// each on ties (as torch.maximum). `Pick` is GreaterOp for max, LessOp for
/// min.
template <typename Pick>
static std::pair<Value, Value> extremumPartials(OpBuilder &b, Location loc, Value g, Value x,
                                                Value y, Value, bool, bool) {
  Value half = constantLike(b, loc, x, 0.5);
  Value tie = b.create<MulOp>(loc, maskAs(b, loc, b.create<EqualOp>(loc, x, y), x), half);
  Value xWeight = b.create<AddOp>(loc, maskAs(b, loc, b.create<Pick>(loc, x, y), x), tie);
  Value yWeight = b.create<AddOp>(loc, maskAs(b, loc, b.create<Pick>(loc, y, x), x), tie);
  return {b.create<MulOp>(loc, g, xWeight), b.create<MulOp>(loc, g, yWeight)};
}

static void registerBinaryGradients(GradientRegistry &registry) {
  registry.add<AddOp>(binaryRule([](OpBuilder &, Location, Value g, Value, Value, Value, bool,
                                    bool) { return std::pair<Value, Value>(g, g); }));
  registry.add<SubOp>(
      binaryRule([](OpBuilder &b, Location loc, Value g, Value, Value, Value, bool, bool wantY) {
        return std::pair<Value, Value>(g, wantY ? b.create<NegOp>(loc, g).getResult() : Value());
      }));
  registry.add<MulOp>(binaryRule(
      [](OpBuilder &b, Location loc, Value g, Value x, Value y, Value, bool wantX, bool wantY) {
        return std::pair<Value, Value>(wantX ? b.create<MulOp>(loc, g, y).getResult() : Value(),
                                       wantY ? b.create<MulOp>(loc, g, x).getResult() : Value());
      }));
  // d(x/y)/dx = 1/y, d(x/y)/dy = -(x/y)/y.
  registry.add<DivOp>(binaryRule([](OpBuilder &b, Location loc, Value g, Value, Value y,
                                    Value result, bool wantX, bool wantY) {
    Value gx = b.create<DivOp>(loc, g, y);
    Value gy;
    if (wantY)
      gy = b.create<NegOp>(loc, b.create<MulOp>(loc, gx, result));
    return std::pair<Value, Value>(wantX ? gx : Value(), gy);
  }));
  // d(x^y)/dx = y x^(y-1); d(x^y)/dy = x^y log(x), built only when wanted
  // (the exponent is usually a constant, and log(x) is NaN for x < 0).
  registry.add<PowOp>(binaryRule([](OpBuilder &b, Location loc, Value g, Value x, Value y,
                                    Value result, bool wantX, bool wantY) {
    Value gx, gy;
    if (wantX) {
      Value lowered = b.create<PowOp>(loc, x, b.create<SubOp>(loc, y, constantLike(b, loc, y, 1)));
      gx = b.create<MulOp>(loc, g, b.create<MulOp>(loc, y, lowered));
    }
    if (wantY)
      gy = b.create<MulOp>(loc, g, b.create<MulOp>(loc, result, b.create<LogOp>(loc, x)));
    return std::pair<Value, Value>(gx, gy);
  }));
  registry.add<MaxOp>(binaryRule(extremumPartials<GreaterOp>));
  registry.add<MinOp>(binaryRule(extremumPartials<LessOp>));

  registry.addNonDifferentiable<EqualOp>();
  registry.addNonDifferentiable<LessOp>();
  registry.addNonDifferentiable<GreaterOp>();
  registry.addNonDifferentiable<AndOp>();
  registry.addNonDifferentiable<OrOp>();
  registry.addNonDifferentiable<XorOp>();
}

/// where: the adjoint flows to x where the condition holds and to y
/// elsewhere; the condition has none.
static LogicalResult whereGradient(const GradientRequest &request,
                                   llvm::SmallVectorImpl<Value> &operandGrads) {
  Operation *op = request.op;
  Value condition = op->getOperand(0), g = request.resultGrads[0];
  OpBuilder &b = request.builder;
  Location loc = op->getLoc();
  operandGrads.push_back(Value());
  for (unsigned i : {1u, 2u}) {
    Value operand = op->getOperand(i);
    if (!request.wanted[i] || !isFloatTensor(operand)) {
      operandGrads.push_back(Value());
      continue;
    }
    Value zero = constantLike(b, loc, operand, 0);
    Value routed = i == 1 ? b.create<WhereOp>(loc, condition, g, zero)
                          : b.create<WhereOp>(loc, condition, zero, g);
    operandGrads.push_back(unbroadcast(b, loc, routed, tensorType(operand)));
  }
  return success();
}

/// rotary, y = A x with A = diag(cos) + diag(sin) R (R x = rotate_half(x);
/// transposed: A = diag(cos) + R^T diag(sin)):
///   dx   = A^T g, the same op with `transposed` flipped;
///   dcos = g * x, summed over the dimensions cos was broadcast along;
///   dsin = g * R x (transposed: x * R g), likewise, R x being rotary with
///          cos 0 and sin 1.
static LogicalResult rotaryGradient(const GradientRequest &request,
                                    llvm::SmallVectorImpl<Value> &operandGrads) {
  auto rotary = llvm::cast<RotaryOp>(request.op);
  OpBuilder &b = request.builder;
  Location loc = rotary.getLoc();
  Value x = rotary.getInput(), g = request.resultGrads[0];
  bool transposed = rotary.getTransposed();
  operandGrads.push_back(
      request.wanted[0]
          ? b.create<RotaryOp>(loc, g, rotary.getCos(), rotary.getSin(), !transposed).getResult()
          : Value());
  operandGrads.push_back(request.wanted[1] ? unbroadcast(b, loc, b.create<MulOp>(loc, g, x),
                                                         tensorType(rotary.getCos()))
                                           : Value());
  if (!request.wanted[2]) {
    operandGrads.push_back(Value());
    return success();
  }
  auto type = tensorType(x);
  auto row = RankedTensorType::get({type.getShape().back()}, type.getElementType());
  auto splat = [&](double value) -> Value {
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(row, b.getFloatAttr(row.getElementType(), value)));
  };
  auto rotated = [&](Value v) -> Value {
    return b.create<RotaryOp>(loc, v, splat(0), splat(1), /*transposed=*/false);
  };
  Value product =
      transposed ? b.create<MulOp>(loc, x, rotated(g)) : b.create<MulOp>(loc, g, rotated(x));
  operandGrads.push_back(unbroadcast(b, loc, product, tensorType(rotary.getSin())));
  return success();
}

void registerElementwiseGradients(GradientRegistry &registry) {
  registerUnaryGradients(registry);
  registerBinaryGradients(registry);
  registry.add<WhereOp>(whereGradient);
  registry.add<RotaryOp>(rotaryGradient);
}

} // namespace ppc
