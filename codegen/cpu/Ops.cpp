//===- Ops.cpp - CPU emitters of the ops that are not fused ---------------===//
//
// One emitter per op class, registered in a table as the executor's kernels
// are. Each writes a call of a ppcrt/CpuKernels.h kernel (or BLAS through
// it) with every size a constant, after a comment naming the ONNX node.
//
//===----------------------------------------------------------------------===//

#include "codegen/Emitter.h"
#include "codegen/EmitContext.h"
#include "codegen/Fusion.h"
#include "executor/Tensor.h"
#include "ir/ShapeRules.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>

using namespace mlir;

namespace ppc::codegen {

/// "static const int64_t name[] = {...};" at file level; returns the name
/// (or "nullptr" for no values).
static std::string constArray(EmitContext &ctx, Operation *op, ArrayRef<int64_t> values) {
  if (values.empty())
    return "nullptr";
  std::string name = ctx.freshName("dims", op);
  ctx.file() << "static const int64_t " << name << "[] = " << braces(values) << ";\n";
  return name;
}

static void comment(EmitContext &ctx, Operation *op) { ctx.comment(op); }

static std::string bytes(Value value, EmitContext &ctx) {
  return std::to_string(numElements(shapeOf(value))) + " * sizeof(" + ctx.elementType(value) + ")";
}

//===----------------------------------------------------------------------===//
// Constants and data movement
//===----------------------------------------------------------------------===//

static LogicalResult emitConstant(Operation *op, EmitContext &ctx) {
  auto constant = llvm::cast<ConstantOp>(op);
  auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense)
    return ctx.unsupported(op, "the constant is not dense");
  Value result = constant.getResult();
  Type element = dense.getElementType();
  std::string type = ctx.elementType(result), out = ctx.ptr(result);
  comment(ctx, op);
  int64_t n = numElements(shapeOf(result));
  if (dense.isSplat()) {
    ctx.body() << llvm::formatv("  std::fill_n({0}, {1}, {2}({3}));\n", out, n, type,
                                cppLiteral(dense.getSplatValue<Attribute>(), element));
    return success();
  }
  std::string name = ctx.freshName("constant", op);
  ctx.file() << "static const " << type << " " << name << "[] = {";
  int64_t i = 0;
  for (Attribute value : dense.getValues<Attribute>())
    ctx.file() << (i++ % 8 ? ", " : (i == 1 ? "\n    " : ",\n    "))
               << cppLiteral(value, element);
  ctx.file() << "};\n";
  ctx.body() << llvm::formatv("  std::memcpy({0}, {1}, sizeof({1}));\n", out, name);
  return success();
}

static LogicalResult emitReshape(Operation *op, EmitContext &ctx) {
  Value input = op->getOperand(0), result = op->getResult(0);
  if (ctx.holder(result) == ctx.holder(input))
    return success(); // A view of its operand's buffer.
  std::string in = ctx.ptr(input), out = ctx.ptr(result);
  comment(ctx, op);
  ctx.body() << llvm::formatv("  std::memcpy({0}, {1}, {2});\n", out, in, bytes(result, ctx));
  return success();
}

/// A strided copy of `input` into `result` (transpose, slice, expand).
static void stridedCopy(Operation *op, EmitContext &ctx, Value input, Value result,
                        int64_t offset, ArrayRef<int64_t> strides,
                        const std::string &offsetExpr = "") {
  std::string in = ctx.ptr(input), out = ctx.ptr(result);
  comment(ctx, op);
  auto shape = shapeOf(result);
  ctx.body() << llvm::formatv(
      "  ppcrt::cpu::stridedCopy({0}, {1}, {2}, {3}, {4}, {5});\n", in, out, shape.size(),
      constArray(ctx, op, shape), offsetExpr.empty() ? std::to_string(offset) : offsetExpr,
      constArray(ctx, op, strides));
}

static LogicalResult emitTranspose(Operation *op, EmitContext &ctx) {
  auto transpose = llvm::cast<TransposeOp>(op);
  Value input = transpose.getInput(), result = transpose.getResult();
  if (ctx.holder(result) != result)
    return success(); // Read transposed by the GEMMs that use it.
  ArrayRef<int64_t> perm = transpose.getPerm();
  auto inShape = shapeOf(input);
  int64_t rank = perm.size();
  bool lastTwo = rank >= 2 && perm[rank - 1] == rank - 2 && perm[rank - 2] == rank - 1;
  for (int64_t d = 0; d + 2 < rank; ++d)
    lastTwo &= perm[d] == d;
  if (lastTwo) {
    std::string in = ctx.ptr(input), out = ctx.ptr(result);
    comment(ctx, op);
    ctx.body() << llvm::formatv("  ppcrt::cpu::transpose2d({0}, {1}, {2}, {3}, {4});\n", in,
                                out, numElements(inShape.drop_back(2)), inShape[rank - 2],
                                inShape[rank - 1]);
    return success();
  }
  auto inStrides = stridesOf(inShape);
  llvm::SmallVector<int64_t> strides;
  for (int64_t p : perm)
    strides.push_back(inStrides[p]);
  stridedCopy(op, ctx, input, result, 0, strides);
  return success();
}

static int64_t sliceStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> starts,
                            ArrayRef<int64_t> steps, llvm::SmallVectorImpl<int64_t> &strides) {
  int64_t offset = 0;
  for (auto [start, step, stride] : llvm::zip(starts, steps, stridesOf(shape))) {
    offset += start * stride;
    strides.push_back(step * stride);
  }
  return offset;
}

static LogicalResult emitSlice(Operation *op, EmitContext &ctx) {
  auto slice = llvm::cast<SliceOp>(op);
  llvm::SmallVector<int64_t> strides;
  int64_t offset =
      sliceStrides(shapeOf(slice.getInput()), slice.getStarts(), slice.getSteps(), strides);
  stridedCopy(op, ctx, slice.getInput(), slice.getResult(), offset, strides);
  return success();
}

static LogicalResult emitExpand(Operation *op, EmitContext &ctx) {
  Value input = op->getOperand(0), result = op->getResult(0);
  auto inShape = shapeOf(input);
  int64_t rank = shapeOf(result).size(), offset = rank - inShape.size();
  auto inStrides = stridesOf(inShape);
  llvm::SmallVector<int64_t> strides(rank, 0);
  for (int64_t d = offset; d < rank; ++d)
    if (inShape[d - offset] != 1)
      strides[d] = inStrides[d - offset];
  stridedCopy(op, ctx, input, result, 0, strides);
  return success();
}

static LogicalResult emitInsertSlice(Operation *op, EmitContext &ctx) {
  auto insert = llvm::cast<InsertSliceOp>(op);
  Value result = insert.getResult();
  llvm::SmallVector<int64_t> strides;
  int64_t offset =
      sliceStrides(shapeOf(result), insert.getStarts(), insert.getSteps(), strides);
  std::string source = ctx.ptr(insert.getSource()), dest = ctx.ptr(insert.getDest()),
              out = ctx.ptr(result);
  comment(ctx, op);
  auto sourceShape = shapeOf(insert.getSource());
  ctx.body() << llvm::formatv("  std::memcpy({0}, {1}, {2});\n", out, dest, bytes(result, ctx));
  ctx.body() << llvm::formatv("  ppcrt::cpu::stridedStore({0}, {1}, {2}, {3}, {4}, {5});\n",
                              source, out, sourceShape.size(),
                              constArray(ctx, op, sourceShape), offset,
                              constArray(ctx, op, strides));
  return success();
}

static LogicalResult emitConcat(Operation *op, EmitContext &ctx) {
  auto concat = llvm::cast<ConcatOp>(op);
  int64_t axis = concat.getAxis();
  auto shape = shapeOf(concat.getResult());
  llvm::SmallVector<std::string> ins;
  for (Value input : concat.getInputs())
    ins.push_back(ctx.ptr(input));
  std::string out = ctx.ptr(concat.getResult()), type = ctx.elementType(concat.getResult());
  comment(ctx, op);
  int64_t outer = numElements(shape.take_front(axis));
  ctx.body() << llvm::formatv("  for (int64_t o = 0, at = 0; o < {0}; ++o) {{\n", outer);
  for (auto [input, name] : llvm::zip(concat.getInputs(), ins)) {
    int64_t chunk = numElements(shapeOf(input).drop_front(axis));
    ctx.body() << llvm::formatv(
        "    std::memcpy({0} + at, {1} + o * {2}, {2} * sizeof({3}));\n    at += {2};\n", out,
        name, chunk, type);
  }
  ctx.body() << "  }\n";
  return success();
}

/// gather and scatter_add: (outer, n, inner) views with numRows indices.
template <typename OpT>
static LogicalResult emitIndexed(Operation *op, EmitContext &ctx) {
  auto indexed = llvm::cast<OpT>(op);
  Value indices = op->getOperand(1), result = op->getResult(0);
  if (!llvm::cast<ShapedType>(indices.getType()).getElementType().isInteger(64))
    return ctx.unsupported(op, "indices must be i64");
  constexpr bool isGather = std::is_same_v<OpT, GatherOp>;
  int64_t axis = indexed.getAxis();
  auto shape = isGather ? shapeOf(op->getOperand(0)) : shapeOf(result);
  int64_t outer = numElements(shape.take_front(axis)), n = shape[axis],
          inner = numElements(shape.drop_front(axis + 1)), rows = numElements(shapeOf(indices));
  std::string data = ctx.ptr(op->getOperand(0)), idx = ctx.ptr(indices), out = ctx.ptr(result);
  comment(ctx, op);
  std::string message = "node '" + nodeName(op) + "' (" +
                        op->getName().stripDialect().str() + "): an index is out of range";
  ctx.body() << llvm::formatv("  ppcrt::cpu::{0}({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8});\n",
                              isGather ? "gather" : "scatterAdd", data, idx, out, outer, n,
                              inner, rows, quote(message));
  return success();
}

static LogicalResult emitTrilu(Operation *op, EmitContext &ctx) {
  auto trilu = llvm::cast<TriluOp>(op);
  auto shape = shapeOf(trilu.getResult());
  int64_t rank = shape.size();
  std::string in = ctx.ptr(trilu.getInput()), out = ctx.ptr(trilu.getResult());
  comment(ctx, op);
  ctx.body() << llvm::formatv("  ppcrt::cpu::trilu({0}, {1}, {2}, {3}, {4}, {5}, {6});\n", in,
                              out, numElements(shape), shape[rank - 2], shape[rank - 1],
                              trilu.getUpper() ? "true" : "false", trilu.getKAttr().getInt());
  return success();
}

static LogicalResult emitTopKIndices(Operation *op, EmitContext &ctx) {
  auto topK = llvm::cast<TopKIndicesOp>(op);
  comment(ctx, op);
  ctx.body() << llvm::formatv("  ppcrt::cpu::topKIndices({0}, {1}, {2}, {3}, {4});\n",
                              ctx.ptr(topK.getInput()), ctx.ptr(topK.getResult()),
                              linesAlong(shapeOf(topK.getInput()), topK.getAxis()),
                              topK.getK(), topK.getLargest() ? "true" : "false");
  return success();
}

static LogicalResult emitCumSum(Operation *op, EmitContext &ctx) {
  auto cumsum = llvm::cast<CumSumOp>(op);
  comment(ctx, op);
  ctx.body() << llvm::formatv("  ppcrt::cpu::cumsum({0}, {1}, {2}, {3}, {4});\n",
                              ctx.ptr(cumsum.getInput()), ctx.ptr(cumsum.getResult()),
                              linesAlong(shapeOf(cumsum.getResult()), cumsum.getAxis()),
                              cumsum.getExclusive() ? "true" : "false",
                              cumsum.getReverse() ? "true" : "false");
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

static LogicalResult emitMatMul(Operation *op, EmitContext &ctx) {
  auto matmul = llvm::cast<MatMulOp>(op);
  Value result = matmul.getResult();
  auto shape = shapeOf(result);
  int64_t rank = shape.size();
  int64_t m = shape[rank - 2], n = shape[rank - 1], k = shapeOf(matmul.getLhs()).back();
  auto batch = shape.drop_back(2);
  // An operand transposed only for this product is read in place: walk the
  // transposes that are not run (each a swap of the last two dimensions, or
  // the undoing of one) down to the buffer that holds the data.
  auto stored = [&](Value operand, bool &transposed) {
    transposed = false;
    while (auto transpose = operand.getDefiningOp<TransposeOp>()) {
      if (ctx.holder(operand) == operand)
        break;
      if (undoesItsOperand(transpose)) {
        operand = transpose.getInput().getDefiningOp<TransposeOp>().getInput();
        continue;
      }
      transposed = !transposed;
      operand = transpose.getInput();
    }
    return ctx.ptr(operand);
  };
  auto batchStrides = [&](Value operand) {
    auto operandBatch = shapeOf(operand).drop_back(2);
    int64_t offset = batch.size() - operandBatch.size(), stride = 1;
    llvm::SmallVector<int64_t> strides(batch.size(), 0);
    for (int64_t d = batch.size() - 1; d >= offset; --d) {
      int64_t size = operandBatch[d - offset];
      strides[d] = size == 1 ? 0 : stride;
      stride *= size;
    }
    return strides;
  };
  bool transA, transB;
  std::string a = stored(matmul.getLhs(), transA), b = stored(matmul.getRhs(), transB);
  std::string c = ctx.ptr(result);
  comment(ctx, op);
  ctx.body() << llvm::formatv(
      "  ppcrt::cpu::matmul({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11});\n",
      transA ? "true" : "false", transB ? "true" : "false", batch.size(),
      constArray(ctx, op, batch), constArray(ctx, op, batchStrides(matmul.getLhs())),
      constArray(ctx, op, batchStrides(matmul.getRhs())), m, n, k, a, b, c);
  return success();
}

static LogicalResult emitEinsum(Operation *op, EmitContext &ctx) {
  auto einsum = llvm::cast<EinsumOp>(op);
  std::string error;
  auto spec = parseEinsum(einsum.getEquation(), [&](const llvm::Twine &msg) {
    error = msg.str();
  });
  if (failed(spec))
    return ctx.unsupported(op, error);
  std::string labels = spec->output;
  for (const std::string &term : spec->inputs)
    for (char c : term)
      if (!llvm::is_contained(labels, c))
        labels.push_back(c);
  int64_t numLabels = labels.size(), numOperands = einsum.getInputs().size();
  llvm::SmallVector<int64_t> sizes(numLabels, 0), strides((numOperands + 1) * numLabels, 0);
  auto addTerm = [&](llvm::StringRef term, ArrayRef<int64_t> shape, int64_t t) {
    auto dimStrides = stridesOf(shape);
    for (auto [d, c] : llvm::enumerate(term)) {
      size_t l = labels.find(c);
      sizes[l] = shape[d];
      strides[t * numLabels + l] += dimStrides[d];
    }
  };
  llvm::SmallVector<std::string> ins;
  for (auto [t, input] : llvm::enumerate(einsum.getInputs())) {
    addTerm(spec->inputs[t], shapeOf(input), t);
    ins.push_back(ctx.ptr(input));
  }
  addTerm(spec->output, shapeOf(einsum.getResult()), numOperands);
  std::string out = ctx.ptr(einsum.getResult()), type = ctx.elementType(einsum.getResult());
  comment(ctx, op);
  ctx.body() << llvm::formatv(
      "  {{ const {0} *operands[] = {{{1}};\n    ppcrt::cpu::einsum(operands, {2}, {3}, {4}, "
      "{5}, {6}, {7}); }\n",
      type, llvm::join(ins, ", "), numOperands, out, numLabels, constArray(ctx, op, sizes),
      constArray(ctx, op, strides), numElements(shapeOf(einsum.getResult())));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions, normalizations, loss
//===----------------------------------------------------------------------===//

template <typename OpT>
static LogicalResult emitReduce(Operation *op, EmitContext &ctx, llvm::StringRef kind) {
  auto reduce = llvm::cast<OpT>(op);
  auto shape = shapeOf(reduce.getInput());
  llvm::SmallVector<bool> reduced(shape.size(), false);
  for (int64_t axis : reduce.getAxes())
    reduced[axis] = true;
  // Collapse runs of kept or reduced dimensions; size-1 ones vanish.
  llvm::SmallVector<int64_t> collapsed;
  llvm::SmallVector<bool> kinds;
  for (auto [size, r] : llvm::zip(shape, reduced)) {
    if (size == 1)
      continue;
    if (!kinds.empty() && kinds.back() == r) {
      collapsed.back() *= size;
      continue;
    }
    collapsed.push_back(size);
    kinds.push_back(r);
  }
  uint32_t mask = 0;
  for (auto [d, r] : llvm::enumerate(kinds))
    mask |= uint32_t(r) << d;
  std::string in = ctx.ptr(reduce.getInput()), out = ctx.ptr(reduce.getResult());
  comment(ctx, op);
  ctx.body() << llvm::formatv(
      "  ppcrt::cpu::reduce<ppcrt::cpu::ReduceKind::{0}>({1}, {2}, {3}, {4}, {5}u);\n", kind, in,
      out, collapsed.size(), constArray(ctx, op, collapsed), mask);
  return success();
}

template <typename OpT> static LogicalResult emitSoftmax(Operation *op, EmitContext &ctx) {
  auto softmax = llvm::cast<OpT>(op);
  auto shape = shapeOf(softmax.getInput());
  int64_t axis = softmax.getAxis();
  std::string in = ctx.ptr(softmax.getInput()), out = ctx.ptr(softmax.getResult());
  comment(ctx, op);
  ctx.body() << llvm::formatv("  ppcrt::cpu::softmax<{0}>({1}, {2}, {3}, {4}, {5});\n",
                              std::is_same_v<OpT, LogSoftmaxOp> ? "true" : "false", in, out,
                              numElements(shape.take_front(axis)), shape[axis],
                              numElements(shape.drop_front(axis + 1)));
  return success();
}

static LogicalResult emitLayerNorm(Operation *op, EmitContext &ctx) {
  auto norm = llvm::cast<LayerNormOp>(op);
  auto shape = shapeOf(norm.getInput());
  int64_t axis = norm.getAxis(), size = numElements(shape.drop_front(axis));
  auto strideOf = [&](Value param, int64_t &stride) {
    int64_t n = numElements(shapeOf(param));
    stride = n == size ? 1 : 0;
    return n == size || n == 1;
  };
  int64_t scaleStride = 0, biasStride = 0;
  if (!strideOf(norm.getScale(), scaleStride) ||
      (norm.getBias() && !strideOf(norm.getBias(), biasStride)))
    return ctx.unsupported(op, "scale and bias must have the normalized shape or one element");
  std::string x = ctx.ptr(norm.getInput()), scale = ctx.ptr(norm.getScale()),
              bias = norm.getBias() ? ctx.ptr(norm.getBias()) : "nullptr",
              y = ctx.ptr(norm.getResult()), type = ctx.elementType(norm.getResult());
  comment(ctx, op);
  char eps[64];
  std::snprintf(eps, sizeof(eps), "%a", norm.getEpsilon().convertToDouble());
  ctx.body() << llvm::formatv(
      "  ppcrt::cpu::layerNorm<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});\n", type, x,
      scale, scaleStride, bias, biasStride, y, numElements(shape.take_front(axis)), size, eps);
  return success();
}

static LogicalResult emitNllLoss(Operation *op, EmitContext &ctx) {
  auto loss = llvm::cast<NllLossOp>(op);
  auto shape = shapeOf(loss.getInput());
  if (!llvm::cast<ShapedType>(loss.getTarget().getType()).getElementType().isInteger(64))
    return ctx.unsupported(op, "targets must be i64");
  llvm::StringRef reduction = loss.getReduction() == LossReduction::None  ? "None"
                              : loss.getReduction() == LossReduction::Sum ? "Sum"
                                                                          : "Mean";
  std::optional<int64_t> ignore;
  if (IntegerAttr attr = loss.getIgnoreIndexAttr())
    ignore = attr.getInt();
  std::string in = ctx.ptr(loss.getInput()), target = ctx.ptr(loss.getTarget()),
              weight = loss.getWeight() ? ctx.ptr(loss.getWeight()) : "nullptr",
              out = ctx.ptr(loss.getResult()), type = ctx.elementType(loss.getResult());
  comment(ctx, op);
  std::string message =
      "node '" + nodeName(op) + "' (nll_loss): a target is out of range [0, " +
      std::to_string(shape[1]) + ")";
  ctx.body() << llvm::formatv(
      "  ppcrt::cpu::nllLoss<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, "
      "ppcrt::cpu::LossReduction::{8}, {9}, {10}, {11});\n",
      type, in, target, weight, out, shape[0], shape[1], numElements(shape.drop_front(2)),
      reduction, ignore ? "true" : "false", ignore.value_or(0), quote(message));
  return success();
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

void registerCommunicationEmitters(llvm::DenseMap<TypeID, OpEmitter> &table);

const OpEmitter *lookupCpuEmitter(Operation *op) {
  static const llvm::DenseMap<TypeID, OpEmitter> table = [] {
    llvm::DenseMap<TypeID, OpEmitter> t;
    t[TypeID::get<ConstantOp>()] = emitConstant;
    t[TypeID::get<ReshapeOp>()] = emitReshape;
    t[TypeID::get<TransposeOp>()] = emitTranspose;
    t[TypeID::get<SliceOp>()] = emitSlice;
    t[TypeID::get<ExpandOp>()] = emitExpand;
    t[TypeID::get<InsertSliceOp>()] = emitInsertSlice;
    t[TypeID::get<ConcatOp>()] = emitConcat;
    t[TypeID::get<GatherOp>()] = emitIndexed<GatherOp>;
    t[TypeID::get<ScatterAddOp>()] = emitIndexed<ScatterAddOp>;
    t[TypeID::get<TriluOp>()] = emitTrilu;
    t[TypeID::get<CumSumOp>()] = emitCumSum;
    t[TypeID::get<TopKIndicesOp>()] = emitTopKIndices;
    t[TypeID::get<MatMulOp>()] = emitMatMul;
    t[TypeID::get<EinsumOp>()] = emitEinsum;
    t[TypeID::get<ReduceSumOp>()] = [](Operation *op, EmitContext &ctx) {
      return emitReduce<ReduceSumOp>(op, ctx, "Sum");
    };
    t[TypeID::get<ReduceMeanOp>()] = [](Operation *op, EmitContext &ctx) {
      return emitReduce<ReduceMeanOp>(op, ctx, "Mean");
    };
    t[TypeID::get<ReduceMaxOp>()] = [](Operation *op, EmitContext &ctx) {
      return emitReduce<ReduceMaxOp>(op, ctx, "Max");
    };
    t[TypeID::get<ReduceMinOp>()] = [](Operation *op, EmitContext &ctx) {
      return emitReduce<ReduceMinOp>(op, ctx, "Min");
    };
    t[TypeID::get<ReduceProdOp>()] = [](Operation *op, EmitContext &ctx) {
      return emitReduce<ReduceProdOp>(op, ctx, "Prod");
    };
    t[TypeID::get<SoftmaxOp>()] = emitSoftmax<SoftmaxOp>;
    t[TypeID::get<LogSoftmaxOp>()] = emitSoftmax<LogSoftmaxOp>;
    t[TypeID::get<LayerNormOp>()] = emitLayerNorm;
    t[TypeID::get<NllLossOp>()] = emitNllLoss;
    registerCommunicationEmitters(t);
    return t;
  }();
  auto it = table.find(op->getName().getTypeID());
  return it == table.end() ? nullptr : &it->second;
}

} // namespace ppc::codegen
