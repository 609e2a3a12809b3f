//===- Ops.cpp - emitters of the ops that are not fused -------------------===//
//
// One emitter per op class for every target, registered in a table as the
// executor's kernels are. Each writes, after a comment naming the ONNX
// node, a call of the target's kernel library (runtime/ppcrt/CpuKernels.h,
// runtime/ppcrt/cuda/Kernels.cuh: same names, same arguments) with every
// size a constant; what a target spells its own way goes through its
// TargetSpelling (the library's namespace, failure reporting, GEMMs and
// einsums).
//
//===----------------------------------------------------------------------===//

#include "codegen/EmitContext.h"
#include "codegen/Emitter.h"
#include "codegen/FusedKernel.h"
#include "codegen/TargetSpelling.h"
#include "executor/Tensor.h"
#include "ir/ShapeRules.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>

using namespace mlir;

namespace ppc::codegen {

static void comment(EmitContext &ctx, Operation *op) { ctx.comment(op); }

static std::string bytes(Value value, EmitContext &ctx) {
  return std::to_string(numElements(shapeOf(value))) + " * sizeof(" + ctx.elementType(value) + ")";
}

/// A ppcrt::Dims literal: a strided view (runtime/ppcrt/Program.h).
static std::string dims(ArrayRef<int64_t> sizes, ArrayRef<int64_t> strides) {
  return llvm::formatv("ppcrt::Dims{{{0}, {1}, {2}}", sizes.size(),
                       sizes.empty() ? "{}" : braces(sizes),
                       strides.empty() ? "{}" : braces(strides))
      .str();
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
    ctx.body() << llvm::formatv("  {0}::fill({1}, {2}, {3}({4}));\n", ctx.kernelLibrary(), out, n,
                                type, cppLiteral(dense.getSplatValue<Attribute>(), element));
    return success();
  }
  // bf16 has no literals: its elements are converted from float ones.
  std::string name = ctx.freshName("constant", op);
  ctx.file() << "static const " << type << " " << name << "[] = {";
  int64_t i = 0;
  for (Attribute value : dense.getValues<Attribute>())
    ctx.file() << (i++ % 8 ? ", " : (i == 1 ? "\n    " : ",\n    "))
               << (element.isBF16() ? type + "(" + cppLiteral(value, element) + ")"
                                    : cppLiteral(value, element));
  ctx.file() << "};\n";
  ctx.body() << llvm::formatv("  {0}::upload({1}, {2}, sizeof({2}));\n", ctx.kernelLibrary(), out,
                              name);
  return success();
}

static LogicalResult emitReshape(Operation *op, EmitContext &ctx) {
  Value input = op->getOperand(0), result = op->getResult(0);
  if (ctx.holder(result) == ctx.holder(input))
    return success(); // A view of its operand's buffer.
  std::string in = ctx.ptr(input), out = ctx.ptr(result);
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::copy({1}, {2}, {3});\n", ctx.kernelLibrary(), out, in,
                              bytes(result, ctx));
  return success();
}

/// A strided copy of `input` into `result` (transpose, slice, expand).
static void stridedCopy(Operation *op, EmitContext &ctx, Value input, Value result, int64_t offset,
                        ArrayRef<int64_t> strides) {
  std::string in = ctx.ptr(input), out = ctx.ptr(result);
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::stridedCopy({1}, {2}, {3}, {4});\n", ctx.kernelLibrary(), in,
                              out, dims(shapeOf(result), strides), offset);
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
    ctx.body() << llvm::formatv("  {0}::transpose2d({1}, {2}, {3}, {4}, {5});\n",
                                ctx.kernelLibrary(), in, out, numElements(inShape.drop_back(2)),
                                inShape[rank - 2], inShape[rank - 1]);
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
  if (ctx.holder(slice.getResult()) == ctx.holder(slice.getInput()))
    return success(); // The first elements of its operand's buffer.
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
  int64_t offset = sliceStrides(shapeOf(result), insert.getStarts(), insert.getSteps(), strides);
  std::string source = ctx.ptr(insert.getSource()), dest = ctx.ptr(insert.getDest()),
              out = ctx.ptr(result);
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::copy({1}, {2}, {3});\n", ctx.kernelLibrary(), out, dest,
                              bytes(result, ctx));
  ctx.body() << llvm::formatv("  {0}::stridedStore({1}, {2}, {3}, {4});\n", ctx.kernelLibrary(),
                              source, out, dims(shapeOf(insert.getSource()), strides), offset);
  return success();
}

/// concat: each operand's pieces (its elements from the axis on) copied
/// into the result's rows; an operand held as a view (StridedViews.h: a
/// slice read in place) gives its pieces' pitch in its buffer.
static LogicalResult emitConcat(Operation *op, EmitContext &ctx) {
  auto concat = llvm::cast<ConcatOp>(op);
  int64_t axis = concat.getAxis();
  auto shape = shapeOf(concat.getResult());
  std::string out = ctx.ptr(concat.getResult()), type = ctx.elementType(concat.getResult());
  comment(ctx, op);
  int64_t outer = numElements(shape.take_front(axis));
  int64_t row = numElements(shape.drop_front(axis)), at = 0;
  for (Value input : concat.getInputs()) {
    int64_t chunk = numElements(shapeOf(input).drop_front(axis)), pitch = chunk;
    if (at == 0 && ctx.holder(input) == ctx.holder(concat.getResult())) {
      at += chunk; // written in place by the op that computed it (layOutProgram)
      continue;
    }
    std::string in = ctx.ptr(input);
    if (const StridedView *view = ctx.stridedView(input)) {
      std::optional<int64_t> pieces = concatRows(shapeOf(input), *view, axis);
      if (!pieces)
        return ctx.unsupported(op, "an operand's strides are not a concat's pieces");
      pitch = *pieces;
      in = ctx.ptr(view->stored);
      if (view->offset)
        in = "(" + in + " + " + std::to_string(view->offset) + ")";
    }
    ctx.body() << llvm::formatv("  {0}::concatPart({1}, {2}, {3}, {4} * sizeof({5}), {6} * "
                                "sizeof({5}), {7} * sizeof({5}), {8} * sizeof({5}));\n",
                                ctx.kernelLibrary(), out, in, outer, row, type, at, chunk, pitch);
    at += chunk;
  }
  return success();
}

/// gather and scatter_add: (outer, n, inner) views with numRows indices.
template <typename OpT> static LogicalResult emitIndexed(Operation *op, EmitContext &ctx) {
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
  std::string failure = ctx.target().failure(ctx, op, "an index is out of range");
  ctx.body() << llvm::formatv("  {0}::{1}({2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});\n",
                              ctx.kernelLibrary(), isGather ? "gather" : "scatterAdd", data, idx,
                              out, outer, n, inner, rows, failure);
  return success();
}

static LogicalResult emitTrilu(Operation *op, EmitContext &ctx) {
  auto trilu = llvm::cast<TriluOp>(op);
  auto shape = shapeOf(trilu.getResult());
  int64_t rank = shape.size();
  std::string in = ctx.ptr(trilu.getInput()), out = ctx.ptr(trilu.getResult());
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::trilu({1}, {2}, {3}, {4}, {5}, {6}, {7});\n",
                              ctx.kernelLibrary(), in, out, numElements(shape), shape[rank - 2],
                              shape[rank - 1], trilu.getUpper() ? "true" : "false",
                              trilu.getKAttr().getInt());
  return success();
}

static LogicalResult emitTopKIndices(Operation *op, EmitContext &ctx) {
  auto topK = llvm::cast<TopKIndicesOp>(op);
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::topKIndices({1}, {2}, {3}, {4}, {5});\n", ctx.kernelLibrary(),
                              ctx.ptr(topK.getInput()), ctx.ptr(topK.getResult()),
                              linesAlong(shapeOf(topK.getInput()), topK.getAxis()), topK.getK(),
                              topK.getLargest() ? "true" : "false");
  return success();
}

static LogicalResult emitArgMax(Operation *op, EmitContext &ctx) {
  auto argMax = llvm::cast<ArgMaxOp>(op);
  comment(ctx, op);
  ctx.body() << llvm::formatv(
      "  {0}::argMax({1}, {2}, {3}, {4}, {5});\n", ctx.kernelLibrary(), ctx.ptr(argMax.getInput()),
      ctx.ptr(argMax.getResult()), linesAlong(shapeOf(argMax.getInput()), argMax.getAxis()),
      argMax.getLargest() ? "true" : "false", argMax.getLast() ? "true" : "false");
  return success();
}

static LogicalResult emitCumSum(Operation *op, EmitContext &ctx) {
  auto cumsum = llvm::cast<CumSumOp>(op);
  comment(ctx, op);
  ctx.body() << llvm::formatv(
      "  {0}::cumsum({1}, {2}, {3}, {4}, {5});\n", ctx.kernelLibrary(), ctx.ptr(cumsum.getInput()),
      ctx.ptr(cumsum.getResult()), linesAlong(shapeOf(cumsum.getResult()), cumsum.getAxis()),
      cumsum.getExclusive() ? "true" : "false", cumsum.getReverse() ? "true" : "false");
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult emitGemm(Operation *op, EmitContext &ctx, const GemmEpilogue *epilogue,
                       Operation *sums) {
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
  GemmCall call;
  call.a = stored(matmul.getLhs(), call.transA);
  call.b = stored(matmul.getRhs(), call.transB);
  call.c = ctx.ptr(epilogue ? epilogue->result() : result);
  if (epilogue && epilogue->bias)
    call.bias = ctx.ptr(epilogue->bias);
  if (epilogue && epilogue->addend)
    call.addend = ctx.ptr(epilogue->addend);
  if (sums) {
    // (The sum's operand named here, outside the fallback's block below.)
    ctx.ptr(sums->getOperand(0));
    call.sums = ctx.ptr(sums->getResult(0));
    call.sumsOfA = !ctx.fusion().sumsOfB.contains(op);
    call.sumsWritten = ctx.freshName("sums", sums);
  }
  call.batch.assign(batch.begin(), batch.end());
  call.aStrides = batchStrides(matmul.getLhs());
  call.bStrides = batchStrides(matmul.getRhs());
  call.m = m, call.n = n, call.k = k;
  comment(ctx, op);
  if (epilogue)
    for (Operation *add : epilogue->adds)
      comment(ctx, add);
  if (sums)
    comment(ctx, sums);
  ctx.target().matmul(ctx, op, call);
  if (!sums)
    return success();
  // Where cuBLASLt had no algorithm with the sums: the sum's own kernel.
  ctx.body() << "  if (!" << call.sumsWritten << ") {\n";
  LogicalResult summed = (*lookupEmitter(sums))(sums, ctx);
  ctx.body() << "  }\n";
  return summed;
}

static LogicalResult emitMatMul(Operation *op, EmitContext &ctx) {
  return emitGemm(op, ctx, nullptr);
}

static LogicalResult emitEinsum(Operation *op, EmitContext &ctx) {
  auto einsum = llvm::cast<EinsumOp>(op);
  std::string error;
  auto spec = parseEinsum(einsum.getEquation(), [&](const llvm::Twine &msg) { error = msg.str(); });
  if (failed(spec))
    return ctx.unsupported(op, error);
  std::string labels = spec->output;
  for (const std::string &term : spec->inputs)
    for (char c : term)
      if (!llvm::is_contained(labels, c))
        labels.push_back(c);
  int64_t numLabels = labels.size(), numOperands = einsum.getInputs().size();
  EinsumCall call;
  call.sizes.assign(numLabels, 0);
  call.strides.assign(numOperands + 1, llvm::SmallVector<int64_t>(numLabels, 0));
  auto addTerm = [&](llvm::StringRef term, ArrayRef<int64_t> shape, int64_t t) {
    auto dimStrides = stridesOf(shape);
    for (auto [d, c] : llvm::enumerate(term)) {
      size_t l = labels.find(c);
      call.sizes[l] = shape[d];
      call.strides[t][l] += dimStrides[d];
    }
  };
  for (auto [t, input] : llvm::enumerate(einsum.getInputs())) {
    addTerm(spec->inputs[t], shapeOf(input), t);
    call.operands.push_back(ctx.ptr(input));
  }
  addTerm(spec->output, shapeOf(einsum.getResult()), numOperands);
  call.out = ctx.ptr(einsum.getResult());
  call.elementType = ctx.elementType(einsum.getResult());
  call.outputLabels = spec->output.size();
  call.outSize = numElements(shapeOf(einsum.getResult()));
  comment(ctx, op);
  return ctx.target().einsum(ctx, op, call);
}

//===----------------------------------------------------------------------===//
// Reductions, normalizations, loss
//===----------------------------------------------------------------------===//

template <typename OpT>
static LogicalResult emitReduce(Operation *op, EmitContext &ctx, llvm::StringRef kind) {
  auto reduce = llvm::cast<OpT>(op);
  CollapsedReduction collapsed = collapseReduction(shapeOf(reduce.getInput()), reduce.getAxes());
  std::string in = ctx.ptr(reduce.getInput()), out = ctx.ptr(reduce.getResult());
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::reduce<{0}::ReduceKind::{1}>({2}, {3}, {4}, {5}, {6}u);\n",
                              ctx.kernelLibrary(), kind, in, out, collapsed.sizes.size(),
                              collapsed.sizes.empty() ? "{}" : braces(collapsed.sizes),
                              collapsed.mask);
  return success();
}

/// The distance between the outer indices of a kernel that reads `shape`
/// along `axis` through `source` (Fusion.h): a folded window's rows when the
/// axis is the last (only then are ops folded), else the dense size * inner.
/// (Trailing dimensions of size 1 make inner 1 without the axis being last.)
static int64_t rowStride(llvm::ArrayRef<int64_t> shape, int64_t axis, const RowSource &source) {
  if (axis + 1 == static_cast<int64_t>(shape.size()))
    return source.rowStride;
  return numElements(shape.drop_front(axis));
}

/// softmax and log_softmax; over the last dimension, through the ops folded
/// into it (Fusion.h: a widening cast, a window of the rows), which the
/// kernel reads in place.
template <typename OpT> static LogicalResult emitSoftmax(Operation *op, EmitContext &ctx) {
  auto softmax = llvm::cast<OpT>(op);
  auto shape = shapeOf(softmax.getInput());
  int64_t axis = softmax.getAxis(), inner = numElements(shape.drop_front(axis + 1));
  RowSource source = rowSourceOf(ctx.fusion(), softmax.getInput());
  std::string in = ctx.ptr(source.value), out = ctx.ptr(softmax.getResult());
  if (source.offset)
    in = "(" + in + ") + " + std::to_string(source.offset);
  comment(ctx, op);
  ctx.body() << llvm::formatv(
      "  {0}::softmax<{1}>({2}, {3}, {4}, {5}, {6}, {7});\n", ctx.kernelLibrary(),
      std::is_same_v<OpT, LogSoftmaxOp> ? "true" : "false", in, out,
      numElements(shape.take_front(axis)), shape[axis], inner, rowStride(shape, axis, source));
  return success();
}

/// log_sum_exp, through the ops folded into it as softmax reads them.
static LogicalResult emitLogSumExp(Operation *op, EmitContext &ctx) {
  auto logSumExp = llvm::cast<LogSumExpOp>(op);
  auto shape = shapeOf(logSumExp.getInput());
  int64_t axis = logSumExp.getAxis(), inner = numElements(shape.drop_front(axis + 1));
  RowSource source = rowSourceOf(ctx.fusion(), logSumExp.getInput());
  std::string in = ctx.ptr(source.value), out = ctx.ptr(logSumExp.getResult());
  if (source.offset)
    in = "(" + in + ") + " + std::to_string(source.offset);
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::logSumExp({1}, {2}, {3}, {4}, {5}, {6});\n",
                              ctx.kernelLibrary(), in, out, numElements(shape.take_front(axis)),
                              shape[axis], inner, rowStride(shape, axis, source));
  return success();
}

/// layer_norm and rms_norm (the kernels' Centered false: no mean, no bias).
template <typename Op> static LogicalResult emitNormalization(Operation *op, EmitContext &ctx) {
  constexpr bool centered = std::is_same_v<Op, LayerNormOp>;
  auto norm = llvm::cast<Op>(op);
  auto shape = shapeOf(norm.getInput());
  int64_t axis = norm.getAxis(), size = numElements(shape.drop_front(axis));
  Value biasValue = op->getNumOperands() > 2 ? op->getOperand(2) : Value();
  auto strideOf = [&](Value param, int64_t &stride) {
    int64_t n = numElements(shapeOf(param));
    stride = n == size ? 1 : 0;
    return n == size || n == 1;
  };
  int64_t scaleStride = 0, biasStride = 0;
  if (!strideOf(norm.getScale(), scaleStride) || (biasValue && !strideOf(biasValue, biasStride)))
    return ctx.unsupported(op, "scale and bias must have the normalized shape or one element");
  std::string x = ctx.ptr(norm.getInput()), scale = ctx.ptr(norm.getScale()),
              bias = biasValue ? ctx.ptr(biasValue) : "nullptr", y = ctx.ptr(norm.getResult()),
              type = ctx.elementType(norm.getResult());
  comment(ctx, op);
  char eps[64];
  std::snprintf(eps, sizeof(eps), "%a", norm.getEpsilon().convertToDouble());
  ctx.body() << llvm::formatv(
      "  {0}::layerNorm<{1}{11}>({2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10});\n",
      ctx.kernelLibrary(), type, x, scale, scaleStride, bias, biasStride, y,
      numElements(shape.take_front(axis)), size, eps, centered ? "" : ", false");
  return success();
}

/// layer_norm_grad and rms_norm_grad (no mean: the kernel's is null), and
/// the add of its input's gradient where the kernel computes it.
template <typename Op> static LogicalResult emitNormalizationGrad(Operation *op, EmitContext &ctx) {
  constexpr bool centered = std::is_same_v<Op, LayerNormGradOp>;
  auto grad = llvm::cast<Op>(op);
  auto shape = shapeOf(grad.getInput());
  int64_t axis = grad.getAxis(), size = numElements(shape.drop_front(axis));
  int64_t scale = numElements(shapeOf(grad.getScale()));
  if (scale != size && scale != 1)
    return ctx.unsupported(op, "scale must have the normalized shape or one element");
  Value rstd = op->getResults().back();
  // With the add that reads the input's gradient in the kernel
  // (FusionPlan::normGradAdd), the kernel writes the sum.
  Value addend = ctx.fusion().normGradAddend(op);
  Value dx =
      addend ? ctx.fusion().normGradAdd.lookup(op)->getResult(0) : Value(grad.getInputGrad());
  comment(ctx, op);
  // The sums over the rows it computes (FusionPlan::normGradSums), as the
  // kernel's last argument: ppcrt::NormGradSums (runtime/ppcrt/NormSums.h).
  std::string sums;
  if (auto planned = ctx.fusion().normGradSums.find(op);
      planned != ctx.fusion().normGradSums.end()) {
    std::string types[3] = {"float", "float", "float"};
    std::string pointers[3] = {"nullptr", "nullptr", "nullptr"};
    for (const NormGradSum &sum : planned->second) {
      Value result = sum.reduction->getResult(0);
      types[int(sum.kind)] = ctx.elementType(result);
      pointers[int(sum.kind)] = ctx.ptr(result);
    }
    sums = llvm::formatv(", ppcrt::NormGradSums<{0}, {1}, {2}>{{{3}, {4}, {5}}", types[0], types[1],
                         types[2], pointers[0], pointers[1], pointers[2]);
  }
  char eps[64];
  std::snprintf(eps, sizeof(eps), "%a", grad.getEpsilon().convertToDouble());
  ctx.body() << llvm::formatv(
      "  {0}::layerNormGrad<{1}, {2}{13}>({3}, {4}, {5}, {6}, {7}, {14}, {8}, {9}, {10}, {11}, "
      "{12}{15});\n",
      ctx.kernelLibrary(), ctx.elementType(grad.getInputGrad()), ctx.elementType(rstd),
      ctx.ptr(grad.getInput()), ctx.ptr(grad.getScale()), scale == size ? 1 : 0,
      ctx.ptr(grad.getResultGrad()), ctx.ptr(dx), centered ? ctx.ptr(op->getResult(1)) : "nullptr",
      ctx.ptr(rstd), numElements(shape.take_front(axis)), size, eps, centered ? "" : ", false",
      addend ? ctx.ptr(addend) : "nullptr", sums);
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
  // Through the ops folded into it (Fusion.h): the rows of a window of
  // wider (and narrower-typed) logits, less a shift per row.
  RowSource source = rowSourceOf(ctx.fusion(), loss.getInput());
  int64_t inner = numElements(shape.drop_front(2));
  std::string type = ctx.elementType(loss.getResult());
  std::string in = ctx.ptr(source.value), target = ctx.ptr(loss.getTarget()),
              weight = loss.getWeight() ? ctx.ptr(loss.getWeight())
                                        : "static_cast<const " + type + " *>(nullptr)",
              shift = source.shift ? ctx.ptr(source.shift)
                                   : "static_cast<const " + type + " *>(nullptr)",
              out = ctx.ptr(loss.getResult());
  if (source.offset)
    in = "(" + in + ") + " + std::to_string(source.offset);
  comment(ctx, op);
  std::string failure = ctx.target().failure(
      ctx, op, "a target is out of range [0, " + std::to_string(shape[1]) + ")");
  ctx.body() << llvm::formatv("  {0}::nllLoss({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
                              "{0}::LossReduction::{10}, {11}, {12}, {13});\n",
                              ctx.kernelLibrary(), in, rowStride(shape, 1, source), shift, target,
                              weight, out, shape[0], shape[1], inner, reduction,
                              ignore ? "true" : "false", ignore.value_or(0), failure);
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// `ppcrt::lines::AttentionShape{...}` of an attention or its gradient;
/// unsupported when its bias's broadcast over the batch dimensions is not
/// two strides (outer and inner batch) deep.
template <typename OpT> static FailureOr<std::string> attentionShape(OpT op, EmitContext &ctx) {
  auto q = shapeOf(op.getQ()), k = shapeOf(op.getK()), v = shapeOf(op.getV());
  size_t rank = q.size();
  llvm::ArrayRef<int64_t> batch = q.drop_back(2);
  int64_t queries = q[rank - 2], keys = k[rank - 2];
  int64_t inner = 1, outerStride = 0, innerStride = 0, rowStride = 0, colStride = 0;
  if (Value bias = op.getBias()) {
    // The bias's strides, padded on the left to the scores' rank, 0 where
    // it is broadcast.
    auto shape = shapeOf(bias);
    llvm::SmallVector<int64_t> padded(rank - shape.size(), 1);
    padded.append(shape.begin(), shape.end());
    llvm::SmallVector<int64_t> strides(rank, 0);
    int64_t stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      strides[d] = padded[d] == 1 ? 0 : stride;
      stride *= padded[d];
    }
    rowStride = strides[rank - 2];
    colStride = strides[rank - 1];
    std::optional<BatchStrides> runs =
        collapseBatch(batch, ArrayRef<int64_t>(strides).drop_back(2));
    if (!runs)
      return ctx.unsupported(op, "the bias must broadcast over at most two runs of batch "
                                 "dimensions");
    inner = runs->inner;
    outerStride = runs->outerStride;
    innerStride = runs->innerStride;
  }
  // Where each operand's rows lie: `{}` (dense) unless it is a strided view
  // (StridedViews.h). The forward's q, k, v and o; the gradient's dO, dq,
  // dk and dv too.
  llvm::SmallVector<Value, 8> operands{op.getQ(), op.getK(), op.getV()};
  if constexpr (std::is_same_v<OpT, AttentionOp>) {
    operands.push_back(op.getOutput());
  } else {
    operands.append({op.getOutput(), op.getDOutput(), op.getDQ(), op.getDK(), op.getDV()});
  }
  std::string rows;
  for (Value operand : operands) {
    const StridedView *view = ctx.stridedView(operand);
    std::optional<std::string> text = view ? attentionRows(shapeOf(operand), *view) : "{}";
    if (!text)
      return ctx.unsupported(op, "an operand's strides are not an attention kernel's rows");
    rows += ", " + *text;
  }
  char scale[64];
  std::snprintf(scale, sizeof(scale), "%a", op.getScale().convertToDouble());
  return llvm::formatv("ppcrt::lines::AttentionShape{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                       "{8}, {9}, {10}, {11}{12}}",
                       numElements(batch), queries, keys, q.back(), v.back(), scale,
                       op.getCausal() ? "true" : "false", inner, outerStride, innerStride,
                       rowStride, colStride, rows)
      .str();
}

/// The pointer to an attention operand's first element: its buffer's, or
/// where its view starts in the buffer holding it.
static std::string attentionOperand(Value value, EmitContext &ctx) {
  const StridedView *view = ctx.stridedView(value);
  if (!view)
    return ctx.ptr(value);
  std::string base = ctx.ptr(view->stored);
  return view->offset ? "(" + base + " + " + std::to_string(view->offset) + ")" : base;
}

/// rotary over x's shape as [batch, rows, size]: x and the result where
/// they lie (strided views, StridedViews.h), cos and sin broadcast to x's
/// shape (stride 0 along the dimensions they are broadcast along).
static LogicalResult emitRotary(Operation *op, EmitContext &ctx) {
  auto rotary = llvm::cast<RotaryOp>(op);
  Value x = rotary.getInput(), y = rotary.getResult();
  if (numElements(shapeOf(x)) == 0)
    return success();
  llvm::SmallVector<int64_t> shape(shapeOf(x));
  int64_t size = shape.back(), rows = shape.size() > 1 ? shape[shape.size() - 2] : 1;
  // As [..., rows, size] of rank 2 at least, each operand's strides aligned
  // on the right (0 where it is broadcast or has no such dimension).
  size_t rank = std::max<size_t>(shape.size(), 2);
  shape.insert(shape.begin(), rank - shape.size(), 1);
  std::string text;
  Value operands[] = {x, rotary.getCos(), rotary.getSin(), y};
  for (Value operand : operands) {
    StridedView view{operand, 0, {}};
    if (const StridedView *held = ctx.stridedView(operand)) {
      view = *held;
    } else {
      auto own = shapeOf(operand);
      Shape dense = stridesOf(own);
      for (size_t d = 0; d < own.size(); ++d)
        view.strides.push_back(own[d] == 1 ? 0 : dense[d]);
    }
    view.strides.insert(view.strides.begin(), rank - view.strides.size(), 0);
    std::optional<std::string> rowsText = attentionRows(shape, view);
    if (!rowsText)
      return ctx.unsupported(op, "an operand's strides are not rows of the rotary kernel");
    text += ", " + *rowsText;
  }
  comment(ctx, op);
  ctx.body() << llvm::formatv(
      "  {0}::rotary({1}, {2}, {3}, {4}, ppcrt::lines::RotaryShape{{{5}, {6}, {7}, {8}{9}});\n",
      ctx.kernelLibrary(), attentionOperand(x, ctx), attentionOperand(rotary.getCos(), ctx),
      attentionOperand(rotary.getSin(), ctx), attentionOperand(y, ctx),
      numElements(shapeOf(x)) / (rows * size), rows, size,
      rotary.getTransposed() ? "true" : "false", text);
  return success();
}

static LogicalResult emitAttention(Operation *op, EmitContext &ctx) {
  auto attention = llvm::cast<AttentionOp>(op);
  FailureOr<std::string> shape = attentionShape(attention, ctx);
  if (failed(shape))
    return failure();
  std::string q = attentionOperand(attention.getQ(), ctx),
              k = attentionOperand(attention.getK(), ctx),
              v = attentionOperand(attention.getV(), ctx),
              bias = attention.getBias() ? ctx.ptr(attention.getBias()) : "nullptr",
              o = attentionOperand(attention.getOutput(), ctx), lse = ctx.ptr(attention.getLse());
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::attention<{1}, {2}>({3}, {4}, {5}, {6}, {7}, {8}, {9});\n",
                              ctx.kernelLibrary(), ctx.elementType(attention.getOutput()),
                              ctx.elementType(attention.getLse()), q, k, v, bias, o, lse, *shape);
  return success();
}

static LogicalResult emitAttentionGrad(Operation *op, EmitContext &ctx) {
  auto grad = llvm::cast<AttentionGradOp>(op);
  FailureOr<std::string> shape = attentionShape(grad, ctx);
  if (failed(shape))
    return failure();
  std::string bias = grad.getBias() ? ctx.ptr(grad.getBias()) : "nullptr";
  std::string args = llvm::join(llvm::map_range(ValueRange{grad.getQ(), grad.getK(), grad.getV()},
                                                [&](Value x) { return attentionOperand(x, ctx); }),
                                ", ");
  std::string rest =
      llvm::join(llvm::map_range(ValueRange{grad.getOutput(), grad.getLse(), grad.getDOutput(),
                                            grad.getDQ(), grad.getDK(), grad.getDV()},
                                 [&](Value x) { return attentionOperand(x, ctx); }),
                 ", ");
  // The one-kernel backward's dq sums, where the layout planned them
  // (cudaWorkspaceBytes); the two kernels otherwise.
  std::string sums = ctx.workspace(op, "float");
  comment(ctx, op);
  ctx.body() << llvm::formatv("  {0}::attentionGrad<{1}, {2}>({3}, {4}, {5}, {6}{7});\n",
                              ctx.kernelLibrary(), ctx.elementType(grad.getQ()),
                              ctx.elementType(grad.getLse()), args, bias, rest, *shape,
                              sums == "nullptr" ? "" : ", " + sums);
  return success();
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

void registerCommunicationEmitters(llvm::DenseMap<TypeID, OpEmitter> &table);

const OpEmitter *lookupEmitter(Operation *op) {
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
    t[TypeID::get<ArgMaxOp>()] = emitArgMax;
    t[TypeID::get<TopKIndicesOp>()] = emitTopKIndices;
    t[TypeID::get<MatMulOp>()] = emitMatMul;
    t[TypeID::get<EinsumOp>()] = emitEinsum;
    t[TypeID::get<AttentionOp>()] = emitAttention;
    t[TypeID::get<AttentionGradOp>()] = emitAttentionGrad;
    t[TypeID::get<RotaryOp>()] = emitRotary;
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
    t[TypeID::get<LogSumExpOp>()] = emitLogSumExp;
    t[TypeID::get<LayerNormOp>()] = emitNormalization<LayerNormOp>;
    t[TypeID::get<LayerNormGradOp>()] = emitNormalizationGrad<LayerNormGradOp>;
    t[TypeID::get<RmsNormOp>()] = emitNormalization<RmsNormOp>;
    t[TypeID::get<RmsNormGradOp>()] = emitNormalizationGrad<RmsNormGradOp>;
    t[TypeID::get<NllLossOp>()] = emitNllLoss;
    registerCommunicationEmitters(t);
    return t;
  }();
  auto it = table.find(op->getName().getTypeID());
  return it == table.end() ? nullptr : &it->second;
}

} // namespace ppc::codegen
