//===- Elementwise.cpp - importers of elementwise ONNX ops ----------------===//

#include "frontend/NodeImporter.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcOps.h"

using namespace mlir;

namespace ppc {

template <typename OpT> static LogicalResult importUnary(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  return n.result(n.create<OpT>(*x));
}

/// Before opset 7, binary ops broadcast only when asked to, along `axis`.
static LogicalResult checkNoLegacyBroadcast(NodeImporter &n) {
  if (n.hasAttr("broadcast") || n.hasAttr("axis"))
    return n.error("the legacy 'broadcast'/'axis' attributes (opset < 7) are not "
                   "supported");
  return success();
}

template <typename OpT> static LogicalResult importBinary(NodeImporter &n) {
  if (failed(checkNoLegacyBroadcast(n)))
    return failure();
  auto lhs = n.input(0), rhs = n.input(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  return n.result(n.create<OpT>(*lhs, *rhs));
}

/// `not(op(lhs, rhs))`: LessOrEqual and GreaterOrEqual.
template <typename OpT> static LogicalResult importNegatedCompare(NodeImporter &n) {
  auto lhs = n.input(0), rhs = n.input(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  auto compare = n.create<OpT>(*lhs, *rhs);
  if (failed(compare))
    return failure();
  return n.result(n.create<NotOp>(*compare));
}

/// Max, Min and Sum take any number of inputs; they fold left.
template <typename OpT> static FailureOr<Value> foldInputs(NodeImporter &n) {
  auto acc = n.input(0);
  for (int i = 1; i < n.numInputs() && succeeded(acc); ++i) {
    auto next = n.input(i);
    if (failed(next))
      return failure();
    acc = n.create<OpT>(*acc, *next);
  }
  return acc;
}

template <typename OpT> static LogicalResult importVariadic(NodeImporter &n) {
  return n.result(foldInputs<OpT>(n));
}

static LogicalResult importMean(NodeImporter &n) {
  auto sum = foldInputs<AddOp>(n);
  if (failed(sum))
    return failure();
  return n.result(n.create<DivOp>(*sum, n.scalarLike(*sum, n.numInputs())));
}

static LogicalResult importPow(NodeImporter &n) {
  if (failed(checkNoLegacyBroadcast(n)))
    return failure();
  auto base = n.input(0), exponent = n.input(1);
  if (failed(base) || failed(exponent))
    return failure();
  // ONNX lets the exponent have another type; ppc.pow takes one.
  auto cast = n.castElements(*exponent, NodeImporter::typeOf(*base).getElementType());
  if (failed(cast))
    return failure();
  return n.result(n.create<PowOp>(*base, *cast));
}

static LogicalResult importWhere(NodeImporter &n) {
  auto c = n.input(0), x = n.input(1), y = n.input(2);
  if (failed(c) || failed(x) || failed(y))
    return failure();
  return n.result(n.create<WhereOp>(*c, *x, *y));
}

static LogicalResult importCast(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  if (!n.hasAttr("to"))
    return n.error("attribute 'to' is required");
  auto dtype = dtypeFromOnnx(n.intAttr("to", 0));
  if (!dtype)
    return n.error(llvm::toString(dtype.takeError()));
  return n.result(n.castElements(*x, n.elementType(*dtype)));
}

static LogicalResult importCastLike(NodeImporter &n) {
  auto x = n.input(0), like = n.input(1);
  if (failed(x) || failed(like))
    return failure();
  return n.result(n.castElements(*x, NodeImporter::typeOf(*like).getElementType()));
}

static LogicalResult importIdentity(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  n.setOutput(0, *x);
  return success();
}

void registerElementwiseImporters(OpImporterTable &table) {
  table.add("Neg", importUnary<NegOp>, 1, 1);
  table.add("Abs", importUnary<AbsOp>, 1, 1);
  table.add("Sqrt", importUnary<SqrtOp>, 1, 1);
  table.add("Reciprocal", importUnary<ReciprocalOp>, 1, 1);
  table.add("Exp", importUnary<ExpOp>, 1, 1);
  table.add("Log", importUnary<LogOp>, 1, 1);
  table.add("Erf", importUnary<ErfOp>, 1, 1);
  table.add("Tanh", importUnary<TanhOp>, 1, 1);
  table.add("Sigmoid", importUnary<SigmoidOp>, 1, 1);
  table.add("Relu", importUnary<ReluOp>, 1, 1);
  table.add("Sin", importUnary<SinOp>, 1, 1);
  table.add("Cos", importUnary<CosOp>, 1, 1);
  table.add("Floor", importUnary<FloorOp>, 1, 1);
  table.add("Ceil", importUnary<CeilOp>, 1, 1);
  table.add("Sign", importUnary<SignOp>, 1, 1);
  table.add("Not", importUnary<NotOp>, 1, 1);
  table.add("Identity", importIdentity, 1, 1);

  table.add("Add", importBinary<AddOp>, 2, 2);
  table.add("Sub", importBinary<SubOp>, 2, 2);
  table.add("Mul", importBinary<MulOp>, 2, 2);
  table.add("Div", importBinary<DivOp>, 2, 2);
  table.add("Pow", importPow, 2, 2);
  table.add("Equal", importBinary<EqualOp>, 2, 2);
  table.add("Less", importBinary<LessOp>, 2, 2);
  table.add("Greater", importBinary<GreaterOp>, 2, 2);
  table.add("LessOrEqual", importNegatedCompare<GreaterOp>, 2, 2);
  table.add("GreaterOrEqual", importNegatedCompare<LessOp>, 2, 2);
  table.add("And", importBinary<AndOp>, 2, 2);
  table.add("Or", importBinary<OrOp>, 2, 2);
  table.add("Xor", importBinary<XorOp>, 2, 2);
  table.add("Max", importVariadic<MaxOp>, 1, INT32_MAX);
  table.add("Min", importVariadic<MinOp>, 1, INT32_MAX);
  table.add("Sum", importVariadic<AddOp>, 1, INT32_MAX);
  table.add("Mean", importMean, 1, INT32_MAX);
  table.add("Where", importWhere, 3, 3);
  table.add("Cast", importCast, 1, 1);
  table.add("CastLike", importCastLike, 2, 2);
}

} // namespace ppc
