//===- NN.cpp - importers of normalization, activation and loss ops -------===//

#include "frontend/NodeImporter.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcOps.h"
#include "runtime/Printable.h"

#include <cmath>

using namespace mlir;

namespace ppc {

/// LayerNormalization whose Mean and InvStdDev outputs are read: its defining
/// composition, computed in `stash_type` (float by default) as ONNX
/// specifies, with Y cast back to the input's type.
static LogicalResult importLayerNormWithStatistics(NodeImporter &n, Value x, Value scale,
                                                   Value bias, int64_t axis) {
  auto stash = dtypeFromOnnx(n.intAttr("stash_type", onnx::TensorProto::FLOAT));
  if (!stash)
    return n.error(llvm::toString(stash.takeError()));
  Type inputElement = NodeImporter::typeOf(x).getElementType();
  auto cx = n.castElements(x, n.elementType(*stash));
  if (failed(cx))
    return failure();
  llvm::SmallVector<int64_t> axes;
  for (int64_t d = axis; d < NodeImporter::typeOf(x).getRank(); ++d)
    axes.push_back(d);
  auto mean = n.create<ReduceMeanOp>(*cx, axes, true);
  if (failed(mean))
    return failure();
  auto centered = n.create<SubOp>(*cx, *mean);
  if (failed(centered))
    return failure();
  auto squared = n.create<MulOp>(*centered, *centered);
  if (failed(squared))
    return failure();
  auto variance = n.create<ReduceMeanOp>(*squared, axes, true);
  if (failed(variance))
    return failure();
  auto shifted = n.create<AddOp>(*variance, n.scalarLike(*variance, n.floatAttr("epsilon", 1e-5f)));
  if (failed(shifted))
    return failure();
  auto stddev = n.create<SqrtOp>(*shifted);
  if (failed(stddev))
    return failure();
  auto invStdDev = n.create<ReciprocalOp>(*stddev);
  if (failed(invStdDev))
    return failure();
  auto normalized = n.create<MulOp>(*centered, *invStdDev);
  if (failed(normalized))
    return failure();
  auto y = n.castElements(*normalized, inputElement);
  if (succeeded(y))
    y = n.create<MulOp>(*y, scale);
  if (succeeded(y) && bias)
    y = n.create<AddOp>(*y, bias);
  if (failed(y))
    return failure();
  n.setOutput(1, *mean);
  n.setOutput(2, *invStdDev);
  return n.result(y);
}

static LogicalResult importLayerNorm(NodeImporter &n) {
  auto x = n.input(0), scale = n.input(1);
  if (failed(x) || failed(scale))
    return failure();
  Value bias;
  if (n.hasInput(2)) {
    auto b = n.input(2);
    if (failed(b))
      return failure();
    bias = *b;
  }
  auto axis = n.normalizeAxis(n.intAttr("axis", -1), NodeImporter::typeOf(*x).getRank());
  if (failed(axis))
    return failure();
  if (n.outputUsed(1) || n.outputUsed(2))
    return importLayerNormWithStatistics(n, *x, *scale, bias, *axis);
  return n.result(
      n.create<LayerNormOp>(*x, *scale, bias, static_cast<uint64_t>(*axis),
                            llvm::APFloat(static_cast<double>(n.floatAttr("epsilon", 1e-5f)))));
}

static FailureOr<LossReduction> lossReduction(NodeImporter &n) {
  std::string name = n.stringAttr("reduction", "mean");
  if (auto r = symbolizeLossReduction(name))
    return *r;
  return n.error("reduction '" + printable(name) + "' is not one of none, sum, mean");
}

static IntegerAttr ignoreIndex(NodeImporter &n) {
  if (!n.hasAttr("ignore_index"))
    return {};
  return n.builder().getI64IntegerAttr(n.intAttr("ignore_index", 0));
}

static FailureOr<Value> optionalInput(NodeImporter &n, int i) {
  if (!n.hasInput(i))
    return Value();
  return n.input(i);
}

static LogicalResult importNllLoss(NodeImporter &n) {
  auto input = n.input(0), target = n.input(1);
  auto weight = optionalInput(n, 2);
  auto reduction = lossReduction(n);
  if (failed(input) || failed(target) || failed(weight) || failed(reduction))
    return failure();
  return n.result(n.create<NllLossOp>(*input, *target, *weight, *reduction, ignoreIndex(n)));
}

/// SoftmaxCrossEntropyLoss = nll_loss(log_softmax(scores, axis 1)); the
/// optional second output is the log-probabilities.
static LogicalResult importSoftmaxCrossEntropy(NodeImporter &n) {
  auto scores = n.input(0), labels = n.input(1);
  auto weight = optionalInput(n, 2);
  auto reduction = lossReduction(n);
  if (failed(scores) || failed(labels) || failed(weight) || failed(reduction))
    return failure();
  if (NodeImporter::typeOf(*scores).getRank() < 2)
    return n.error("scores need rank >= 2 [N, C, ...]");
  auto logProbs = n.create<LogSoftmaxOp>(*scores, 1);
  if (failed(logProbs))
    return failure();
  n.setOutput(1, *logProbs);
  return n.result(n.create<NllLossOp>(*logProbs, *labels, *weight, *reduction, ignoreIndex(n)));
}

/// Gelu (opset 20) as its defining formula.
static LogicalResult importGelu(NodeImporter &n) {
  auto x = n.input(0);
  if (failed(x))
    return failure();
  std::string approximate = n.stringAttr("approximate", "none");
  auto half = n.create<MulOp>(*x, n.scalarLike(*x, 0.5));
  FailureOr<Value> inner;
  if (approximate == "none") {
    auto scaled = n.create<MulOp>(*x, n.scalarLike(*x, M_SQRT1_2));
    if (failed(scaled))
      return failure();
    inner = n.create<ErfOp>(*scaled);
  } else if (approximate == "tanh") {
    auto cube = n.create<MulOp>(*x, n.scalarLike(*x, 0.044715));
    if (succeeded(cube))
      cube = n.create<MulOp>(*cube, *x);
    if (succeeded(cube))
      cube = n.create<MulOp>(*cube, *x);
    if (succeeded(cube))
      cube = n.create<AddOp>(*x, *cube);
    if (succeeded(cube))
      cube = n.create<MulOp>(*cube, n.scalarLike(*x, std::sqrt(2.0 / M_PI)));
    if (failed(cube))
      return failure();
    inner = n.create<TanhOp>(*cube);
  } else {
    return n.error("approximate '" + printable(approximate) + "' is not one of none, tanh");
  }
  if (failed(inner) || failed(half))
    return failure();
  auto onePlus = n.create<AddOp>(*inner, n.scalarLike(*x, 1.0));
  if (failed(onePlus))
    return failure();
  return n.result(n.create<MulOp>(*half, *onePlus));
}

void registerNNImporters(OpImporterTable &table) {
  table.add("LayerNormalization", importLayerNorm, 2, 3);
  table.add("NegativeLogLikelihoodLoss", importNllLoss, 2, 3);
  table.add("SoftmaxCrossEntropyLoss", importSoftmaxCrossEntropy, 2, 3);
  table.add("Gelu", importGelu, 1, 1);
}

} // namespace ppc
