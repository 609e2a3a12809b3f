//===- StridedViewsTest.cpp - attention operands read and written in place ===//
//
// codegen/StridedViews.h on programs written by hand: the heads of a fused
// QKV projection read where it wrote them, the output and the gradients
// written where their transposes, reshapes and concat would have put them,
// and the cases where that must not happen (another reader of a slice, a
// concat with an operand no kernel writes in place, strides that are not
// rows).
//
//===----------------------------------------------------------------------===//

#include "codegen/Emitter.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace ppc;
using namespace ppc::codegen;

namespace {

class StridedViewsTest : public ::testing::Test {
protected:
  StridedViewsTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  ProgramLayout layOut(llvm::StringRef source) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    program = *module->getOps<func::FuncOp>().begin();
    FailureOr<ProgramLayout> layout = layOutProgram(program);
    EXPECT_TRUE(succeeded(layout));
    return std::move(*layout);
  }

  /// The n-th op of kind Op in `program` (from 0, in program order).
  template <typename Op> Op nth(unsigned n) {
    for (Op op : program.getBody().front().getOps<Op>())
      if (n-- == 0)
        return op;
    return Op();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  func::FuncOp program;
};

/// A GPT block's attention at B 2, T 8, 4 heads of 8: the QKV projection
/// [2, 8, 96] sliced, split into heads and transposed; the output
/// transposed back into [2, 8, 32] for the projection; the gradient's dq,
/// dk and dv back into the QKV gradient's concat. `%extra` is read by the
/// return where a test needs another reader.
constexpr const char *kBlock = R"mlir(
  func.func @f(%qkv: tensor<2x8x96xf32>, %w: tensor<32x32xf32>, %do: tensor<2x4x8x8xf32>)
      -> (tensor<2x8x32xf32>, tensor<2x8x96xf32>RESULT_TYPE) {
    %q0 = ppc.slice %qkv starts = [0, 0, 0] limits = [2, 8, 32] steps = [1, 1, 1] : (tensor<2x8x96xf32>) -> tensor<2x8x32xf32>
    %k0 = ppc.slice %qkv starts = [0, 0, 32] limits = [2, 8, 64] steps = [1, 1, 1] : (tensor<2x8x96xf32>) -> tensor<2x8x32xf32>
    %v0 = ppc.slice %qkv starts = [0, 0, 64] limits = [2, 8, 96] steps = [1, 1, 1] : (tensor<2x8x96xf32>) -> tensor<2x8x32xf32>
    %q1 = ppc.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
    %k1 = ppc.reshape %k0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
    %v1 = ppc.reshape %v0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
    %q = ppc.transpose %q1 perm = [0, 2, 1, 3] : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
    %k = ppc.transpose %k1 perm = [0, 2, 1, 3] : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
    %v = ppc.transpose %v1 perm = [0, 2, 1, 3] : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
    %o, %lse = ppc.attention %q, %k, %v scale = 0.35 causal : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
    %o1 = ppc.transpose %o perm = [0, 2, 1, 3] : (tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
    %o2 = ppc.reshape %o1 : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
    %y = ppc.matmul %o2, %w : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
    %dq, %dk, %dv = ppc.attention_grad %q, %k, %v, %o, %lse, %do scale = 0.35 causal : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>)
    %dq1 = ppc.transpose %dq perm = [0, 2, 1, 3] : (tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
    %dk1 = ppc.transpose %dk perm = [0, 2, 1, 3] : (tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
    %dv1 = ppc.transpose %dv perm = [0, 2, 1, 3] : (tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
    %dq2 = ppc.reshape %dq1 : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
    %dk2 = ppc.reshape %dk1 : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
    %dv2 = ppc.reshape %dv1 : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
    %dqkv = ppc.concat CONCAT_OPERANDS axis = 2 : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x96xf32>
    return %y, %dqkv RESULTS : tensor<2x8x32xf32>, tensor<2x8x96xf32>RESULT_TYPE
  })mlir";

std::string block(llvm::StringRef concatOperands = "%dq2, %dk2, %dv2",
                  llvm::StringRef extraResult = "", llvm::StringRef extraType = "") {
  std::string source = kBlock;
  auto replace = [&](llvm::StringRef what, llvm::StringRef with) {
    size_t at;
    while ((at = source.find(what.str())) != std::string::npos)
      source.replace(at, what.size(), with.str());
  };
  replace("CONCAT_OPERANDS", concatOperands);
  replace("RESULTS", extraResult);
  replace("RESULT_TYPE", extraType);
  return source;
}

TEST_F(StridedViewsTest, HeadsAreReadAndWrittenInPlace) {
  ProgramLayout layout = layOut(block());
  const StridedViews &strided = layout.strided;
  Value qkv = program.getArgument(0);
  // q, k and v: 32 elements apart in rows of 96, heads 8 apart.
  for (unsigned h = 0; h < 3; ++h) {
    Value head = nth<TransposeOp>(h).getResult();
    ASSERT_TRUE(strided.views.count(head)) << "head " << h;
    const StridedView &view = strided.views.lookup(head);
    EXPECT_EQ(view.stored, qkv);
    EXPECT_EQ(view.offset, 32 * h);
    EXPECT_EQ(view.strides, (llvm::SmallVector<int64_t>{768, 8, 96, 1}));
    EXPECT_TRUE(strided.inPlace.count(nth<SliceOp>(h)));
    EXPECT_TRUE(layout.isView(nth<SliceOp>(h)));
  }
  // The output, written into the projection's [2, 8, 32] operand.
  auto attention = nth<AttentionOp>(0);
  Value merged = nth<ReshapeOp>(3).getResult();
  const StridedView &o = strided.views.lookup(attention.getOutput());
  EXPECT_EQ(o.stored, merged);
  EXPECT_EQ(o.strides, (llvm::SmallVector<int64_t>{256, 8, 32, 1}));
  EXPECT_TRUE(strided.inPlace.count(nth<TransposeOp>(3)));
  // dq, dk and dv, written into the concat's result, which lives from the
  // attention_grad that writes it on, not from the concat.
  auto grad = nth<AttentionGradOp>(0);
  auto concat = nth<ConcatOp>(0);
  for (unsigned i = 0; i < 3; ++i) {
    const StridedView &d = strided.views.lookup(grad->getResult(i));
    EXPECT_EQ(d.stored, concat.getResult());
    EXPECT_EQ(d.offset, 32 * i);
    EXPECT_EQ(d.strides, (llvm::SmallVector<int64_t>{768, 8, 96, 1}));
  }
  EXPECT_TRUE(layout.isView(concat));
  int64_t gradAt = -1, concatBegin = -2, position = 0;
  for (Operation &op : program.getBody().front()) {
    if (&op == grad.getOperation())
      gradAt = position;
    ++position;
  }
  for (const Buffer &b : layout.memory.buffers)
    if (b.value == concat.getResult())
      concatBegin = b.begin;
  EXPECT_EQ(concatBegin, gradAt);
}

TEST_F(StridedViewsTest, AnotherReaderKeepsTheCopy) {
  // The QKV projection's first slice is also returned: it stays a copy,
  // whose own buffer q is read from (its transpose still a view); the
  // other two heads are still read in the projection's buffer.
  ProgramLayout layout = layOut(block("%dq2, %dk2, %dv2", ", %q0", ", tensor<2x8x32xf32>"));
  SliceOp first = nth<SliceOp>(0);
  EXPECT_FALSE(layout.strided.inPlace.count(first));
  EXPECT_FALSE(layout.isView(first));
  const StridedView &q = layout.strided.views.lookup(nth<TransposeOp>(0).getResult());
  EXPECT_EQ(q.stored, first.getResult());
  EXPECT_EQ(q.offset, 0);
  EXPECT_EQ(q.strides, (llvm::SmallVector<int64_t>{256, 8, 32, 1}));
  EXPECT_TRUE(layout.strided.inPlace.count(nth<SliceOp>(1)));
}

// An axis-0 concat's first operand, computed by a kernel and at least half
// the concat (a padded vocabulary's bf16 copy), is written where the concat
// puts it (its holder is the concat), though another op reads it too; not
// one that a transpose computes (whose view would write nothing), nor a
// small one (a gradient bucket's first gradient).
TEST_F(StridedViewsTest, AConcatsFirstOperandIsWrittenInPlace) {
  ProgramLayout layout = layOut(R"mlir(
    func.func @f(%w: tensor<7x4xf32>, %z: tensor<1x4xbf16>, %x: tensor<4x6xbf16>,
                 %b: tensor<2xbf16>, %g: tensor<30xbf16>)
        -> (tensor<8x4xbf16>, tensor<7x4xbf16>, tensor<7x4xbf16>, tensor<32xbf16>) {
      %c = ppc.cast %w : tensor<7x4xf32> -> tensor<7x4xbf16>
      %p = ppc.concat %c, %z axis = 0 : (tensor<7x4xbf16>, tensor<1x4xbf16>) -> tensor<8x4xbf16>
      %t = ppc.transpose %x perm = [1, 0] : (tensor<4x6xbf16>) -> tensor<6x4xbf16>
      %q = ppc.concat %t, %z axis = 0 : (tensor<6x4xbf16>, tensor<1x4xbf16>) -> tensor<7x4xbf16>
      %n = ppc.neg %b : tensor<2xbf16>
      %u = ppc.concat %n, %g axis = 0 : (tensor<2xbf16>, tensor<30xbf16>) -> tensor<32xbf16>
      return %p, %c, %q, %u : tensor<8x4xbf16>, tensor<7x4xbf16>, tensor<7x4xbf16>, tensor<32xbf16>
    })mlir");
  ConcatOp padded = nth<ConcatOp>(0), transposed = nth<ConcatOp>(1), bucket = nth<ConcatOp>(2);
  EXPECT_EQ(layout.holders.lookup(padded.getInputs()[0]), padded.getResult());
  EXPECT_FALSE(layout.holders.count(transposed.getInputs()[0]));
  EXPECT_FALSE(layout.holders.count(bucket.getInputs()[0]));
  // The cast's buffer is the concat's, live from the cast on.
  const Buffer *held = nullptr;
  for (const Buffer &b : layout.memory.buffers)
    if (b.value == padded.getResult())
      held = &b;
  ASSERT_TRUE(held);
  EXPECT_EQ(held->begin, 0);
}

TEST_F(StridedViewsTest, AConcatOfOtherValuesIsStillCopied) {
  // dv2 twice: the concat's operands are not three values written in place,
  // so it runs; dq's and dk's transposes still write into their reshapes.
  ProgramLayout layout = layOut(block("%dq2, %dk2, %dq2"));
  auto concat = nth<ConcatOp>(0);
  EXPECT_FALSE(layout.isView(concat));
  auto grad = nth<AttentionGradOp>(0);
  EXPECT_NE(layout.strided.views.lookup(grad->getResult(0)).stored, concat.getResult());
  EXPECT_TRUE(layout.strided.views.count(grad->getResult(1)));
}

TEST_F(StridedViewsTest, StridesThatAreNotRowsAreNotViews) {
  // A transpose that moves the last dimension: the kernels' rows are one
  // element apart, so it stays a copy.
  module = parseSourceString<ModuleOp>(R"mlir(
    func.func @f(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
      %t = ppc.transpose %x perm = [0, 1, 3, 2] : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
      %o, %lse = ppc.attention %t, %x, %x scale = 0.35 : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
      return %o : tensor<2x4x8x8xf32>
    })mlir",
                                       &context);
  ASSERT_TRUE(module);
  program = *module->getOps<func::FuncOp>().begin();
  FailureOr<ProgramLayout> layout = layOutProgram(program);
  ASSERT_TRUE(succeeded(layout));
  EXPECT_TRUE(layout->strided.views.empty());
  EXPECT_TRUE(layout->strided.inPlace.empty());
}

TEST_F(StridedViewsTest, AConcatReadsItsSlicesInPlace) {
  // Rotary embedding's rotated halves (ppc-hoist-concat-negations): the
  // concat reads x's halves where they lie, 8 elements of each 16-element
  // row; a slice also read by an elementwise op stays a copy, and so does
  // one whose pieces along the concat's axis are not dense (a slice of the
  // rows, concatenated along them).
  ProgramLayout layout = layOut(R"mlir(
    func.func @f(%x: tensor<2x4x8x16xbf16>, %s: tensor<8x16xbf16>, %y: tensor<6x4xf32>)
        -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x8xbf16>, tensor<6x4xf32>) {
      %x2 = ppc.slice %x starts = [0, 0, 0, 8] limits = [2, 4, 8, 16] steps = [1, 1, 1, 1] : (tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
      %x1 = ppc.slice %x starts = [0, 0, 0, 0] limits = [2, 4, 8, 8] steps = [1, 1, 1, 1] : (tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
      %r = ppc.concat %x2, %x1 axis = 3 : (tensor<2x4x8x8xbf16>, tensor<2x4x8x8xbf16>) -> tensor<2x4x8x16xbf16>
      %m = ppc.mul %r, %s : (tensor<2x4x8x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8x16xbf16>
      %n = ppc.neg %x1 : tensor<2x4x8x8xbf16>
      %y0 = ppc.slice %y starts = [0, 1] limits = [6, 3] steps = [1, 1] : (tensor<6x4xf32>) -> tensor<6x2xf32>
      %y1 = ppc.slice %y starts = [0, 0] limits = [6, 2] steps = [1, 1] : (tensor<6x4xf32>) -> tensor<6x2xf32>
      %c = ppc.concat %y0, %y1 axis = 1 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x4xf32>
      %r0 = ppc.slice %y starts = [0, 0] limits = [3, 4] steps = [1, 1] : (tensor<6x4xf32>) -> tensor<3x4xf32>
      %r1 = ppc.slice %y starts = [3, 0] limits = [6, 4] steps = [1, 1] : (tensor<6x4xf32>) -> tensor<3x4xf32>
      %rows = ppc.concat %r1, %r0 axis = 0 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
      %sum = ppc.add %c, %rows : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
      return %m, %n, %sum : tensor<2x4x8x16xbf16>, tensor<2x4x8x8xbf16>, tensor<6x4xf32>
    })mlir");
  const StridedViews &strided = layout.strided;
  SliceOp x2 = nth<SliceOp>(0), x1 = nth<SliceOp>(1);
  EXPECT_TRUE(strided.inPlace.count(x2));
  EXPECT_FALSE(strided.inPlace.count(x1));
  const StridedView &half = strided.views.lookup(x2.getResult());
  EXPECT_EQ(half.stored, program.getArgument(0));
  EXPECT_EQ(half.offset, 8);
  EXPECT_EQ(concatRows({2, 4, 8, 8}, half, 3), 16);
  // %y's columns 1..2 and 0..1: pieces of 2, rows 4 apart.
  EXPECT_TRUE(strided.inPlace.count(nth<SliceOp>(2)));
  EXPECT_TRUE(strided.inPlace.count(nth<SliceOp>(3)));
  EXPECT_EQ(concatRows({6, 2}, strided.views.lookup(nth<SliceOp>(2).getResult()), 1), 4);
  // Row blocks are whole pieces already: in place too (one piece, pitch
  // irrelevant), the second starting 12 elements in.
  EXPECT_TRUE(strided.inPlace.count(nth<SliceOp>(5)));
  EXPECT_EQ(strided.views.lookup(nth<SliceOp>(5).getResult()).offset, 12);
}

TEST_F(StridedViewsTest, ConcatPiecesMustBeDenseAndOnePitchApart) {
  Value none;
  // Dense: pieces of the whole operand, one after another.
  EXPECT_EQ(concatRows({3, 4}, StridedView{none, 0, {4, 1}}, 1), 4);
  // A window of 2 columns of 6-element rows.
  EXPECT_EQ(concatRows({3, 2}, StridedView{none, 0, {6, 1}}, 1), 6);
  // Two outer dimensions one pitch apart: [2, 3] rows of 6.
  EXPECT_EQ(concatRows({2, 3, 2}, StridedView{none, 0, {18, 6, 1}}, 2), 6);
  // ... but not when they are not ([2, 3] rows 6 apart, batches 20 apart).
  EXPECT_FALSE(concatRows({2, 3, 2}, StridedView{none, 0, {20, 6, 1}}, 2));
  // A piece that is not one run: along axis 1 of [3, 2, 4] with rows of 4
  // elements 6 apart.
  EXPECT_FALSE(concatRows({3, 2, 4}, StridedView{none, 0, {12, 6, 1}}, 1));
  // Elements not one apart (a transposed operand).
  EXPECT_FALSE(concatRows({3, 2}, StridedView{none, 0, {1, 3}}, 1));
}

} // namespace
