//===- Communication.cpp - collectives and messages as ppcrt::Rank calls --===//
//
// Each collective names its group by index (the communicators ppcrt creates
// at start-up) and describes itself for the watchdog; all_slice and
// axis_index need no communication, only the rank's position in its group.
// Shared by both targets: on CUDA a call returns a ticket (EmitContext::ticket).
//
//===----------------------------------------------------------------------===//

#include "codegen/EmitContext.h"
#include "executor/Tensor.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc::codegen {

static llvm::SmallVector<llvm::StringRef> axesOf(Operation *op) {
  llvm::SmallVector<llvm::StringRef> axes;
  for (Attribute a : op->getAttrOfType<ArrayAttr>("axes"))
    axes.push_back(llvm::cast<StringAttr>(a).getValue());
  return axes;
}

/// The group index and description of a collective.
static std::pair<int, std::string> groupOf(Operation *op, EmitContext &ctx) {
  auto axes = axesOf(op);
  return {ctx.group(axes), ctx.what(op, "[" + llvm::join(axes, ",") + "]")};
}

static std::string reductionName(ReductionKind kind) {
  return kind == ReductionKind::Sum ? "ppcrt::Reduction::Sum" : "ppcrt::Reduction::Max";
}

static std::string dtype(Value value) {
  auto name = runtimeDType(llvm::cast<ShapedType>(value.getType()).getElementType());
  return succeeded(name) ? *name : "?";
}

static LogicalResult emitAllReduce(Operation *op, EmitContext &ctx) {
  auto reduce = llvm::cast<AllReduceOp>(op);
  auto [g, what] = groupOf(op, ctx);
  std::string in = ctx.ptr(reduce.getInput()), out = ctx.ptr(reduce.getResult());
  ctx.body() << "  " << ctx.ticket()
             << llvm::formatv("rt.allReduce({0}, {1}, {2}, {3}, {4}, {5}, {6});\n", g,
                              dtype(reduce.getInput()), in, out,
                              numElements(shapeOf(reduce.getInput())),
                              reductionName(reduce.getReduction()), what);
  return success();
}

static LogicalResult emitAllGather(Operation *op, EmitContext &ctx) {
  auto gather = llvm::cast<AllGatherOp>(op);
  auto [g, what] = groupOf(op, ctx);
  auto shape = shapeOf(gather.getInput());
  int64_t dim = gather.getDim();
  std::string in = ctx.ptr(gather.getInput()), out = ctx.ptr(gather.getResult());
  ctx.body() << "  " << ctx.ticket()
             << llvm::formatv("rt.allGather({0}, {1}, {2}, {3}, {4}, {5}, {6});\n", g,
                              dtype(gather.getInput()), in, out, numElements(shape.take_front(dim)),
                              numElements(shape.drop_front(dim)), what);
  return success();
}

static LogicalResult emitReduceScatter(Operation *op, EmitContext &ctx) {
  auto scatter = llvm::cast<ReduceScatterOp>(op);
  auto [g, what] = groupOf(op, ctx);
  auto shape = shapeOf(scatter.getResult());
  int64_t dim = scatter.getDim();
  std::string in = ctx.ptr(scatter.getInput()), out = ctx.ptr(scatter.getResult());
  ctx.body() << "  " << ctx.ticket()
             << llvm::formatv("rt.reduceScatter({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7});\n", g,
                              dtype(scatter.getInput()), in, out,
                              numElements(shape.take_front(dim)),
                              numElements(shape.drop_front(dim)),
                              reductionName(scatter.getReduction()), what);
  return success();
}

static LogicalResult emitAllToAll(Operation *op, EmitContext &ctx) {
  auto exchange = llvm::cast<AllToAllOp>(op);
  auto [g, what] = groupOf(op, ctx);
  auto shape = shapeOf(exchange.getInput());
  std::string dims = ctx.freshName("dims", op);
  ctx.file() << "static const int64_t " << dims << "[] = " << braces(shape) << ";\n";
  std::string in = ctx.ptr(exchange.getInput()), out = ctx.ptr(exchange.getResult());
  ctx.body() << "  " << ctx.ticket()
             << llvm::formatv("rt.allToAll({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8});\n", g,
                              dtype(exchange.getInput()), in, out, dims, shape.size(),
                              exchange.getSplit(), exchange.getConcat(), what);
  return success();
}

static LogicalResult emitAllSlice(Operation *op, EmitContext &ctx) {
  auto slice = llvm::cast<AllSliceOp>(op);
  auto [g, what] = groupOf(op, ctx);
  (void)what;
  auto inShape = shapeOf(slice.getInput()), shape = shapeOf(slice.getResult());
  int64_t dim = slice.getDim();
  Shape strides = stridesOf(inShape);
  std::string in = ctx.ptr(slice.getInput()), out = ctx.ptr(slice.getResult());
  ctx.body() << llvm::formatv(
      "  {0}::stridedCopy({1}, {2}, ppcrt::Dims{{{3}, {4}, {5}}, rt.position({6}) * {7});\n",
      ctx.kernelLibrary(), in, out, shape.size(), braces(shape), braces(strides), g,
      shape[dim] * strides[dim]);
  return success();
}

static LogicalResult emitAxisIndex(Operation *op, EmitContext &ctx) {
  auto [g, what] = groupOf(op, ctx);
  (void)what;
  std::string out = ctx.ptr(op->getResult(0));
  ctx.body() << llvm::formatv("  {0}::fill({1}, 1, int64_t(rt.position({2})));\n",
                              ctx.kernelLibrary(), out, g);
  return success();
}

static LogicalResult emitSend(Operation *op, EmitContext &ctx) {
  auto send = llvm::cast<SendOp>(op);
  std::string in = ctx.ptr(send.getInput());
  // A send is made from a copy on every target: nothing waits for it.
  ctx.body() << "  "
             << llvm::formatv("rt.send({0}, {1}, {2}, {3}, {4}, {5});\n", quote(send.getAxis()),
                              send.getPeer(), dtype(send.getInput()), in,
                              numElements(shapeOf(send.getInput())), ctx.what(op, send.getAxis()));
  return success();
}

static LogicalResult emitRecv(Operation *op, EmitContext &ctx) {
  auto recv = llvm::cast<RecvOp>(op);
  std::string out = ctx.ptr(recv.getResult());
  ctx.body() << "  " << ctx.ticket()
             << llvm::formatv("rt.recv({0}, {1}, {2}, {3}, {4}, {5});\n", quote(recv.getAxis()),
                              recv.getPeer(), dtype(recv.getResult()), out,
                              numElements(shapeOf(recv.getResult())), ctx.what(op, recv.getAxis()));
  return success();
}

/// A copy between device and host memory (offload) is a call too: on CUDA
/// it runs on a copy stream and hands a ticket.
static LogicalResult emitTransfer(Operation *op, EmitContext &ctx) {
  auto transfer = llvm::cast<TransferOp>(op);
  std::string in = ctx.ptr(transfer.getInput()), out = ctx.ptr(transfer.getResult());
  std::string node = nodeName(op);
  std::string what = quote((transfer.toHost() ? "transfer to the host" : "transfer to the device") +
                           (node.empty() ? "" : " for '" + node + "'"));
  ctx.body() << "  " << ctx.ticket()
             << llvm::formatv("rt.transfer({0}, {1}, {2}, {3}, {4});\n", out, in,
                              boundedTensorBytes(transfer.getType()),
                              transfer.toHost() ? "true" : "false", what);
  return success();
}

void registerCommunicationEmitters(llvm::DenseMap<TypeID, OpEmitter> &table) {
  table[TypeID::get<TransferOp>()] = emitTransfer;
  table[TypeID::get<AllReduceOp>()] = emitAllReduce;
  table[TypeID::get<AllGatherOp>()] = emitAllGather;
  table[TypeID::get<ReduceScatterOp>()] = emitReduceScatter;
  table[TypeID::get<AllToAllOp>()] = emitAllToAll;
  table[TypeID::get<AllSliceOp>()] = emitAllSlice;
  table[TypeID::get<AxisIndexOp>()] = emitAxisIndex;
  table[TypeID::get<SendOp>()] = emitSend;
  table[TypeID::get<RecvOp>()] = emitRecv;
}

} // namespace ppc::codegen
