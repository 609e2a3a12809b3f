//===- GemmsInBf16.cpp - --precision bf16 ---------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <functional>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_GEMMSINBF16
#include "passes/Passes.h.inc"

namespace {

RankedTensorType withElement(Type type, Type element) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), element);
}

struct GemmsInBf16Pass : impl::GemmsInBf16Base<GemmsInBf16Pass> {
  void runOnOperation() override {
    llvm::SmallVector<MatMulOp> gemms;
    getOperation().walk([&](MatMulOp op) {
      if (getElementTypeOrSelf(op.getType()).isF32())
        gemms.push_back(op);
    });
    for (MatMulOp op : gemms) {
      OpBuilder b(op);
      Type bf16 = b.getBF16Type();
      // A transposed operand is cast before its transpose, so that the
      // transpose still folds into the GEMM (read in place, transposed).
      std::function<Value(Value)> toBf16 = [&](Value v) -> Value {
        if (auto transpose = v.getDefiningOp<TransposeOp>())
          return b.create<TransposeOp>(op.getLoc(), withElement(v.getType(), bf16),
                                       toBf16(transpose.getInput()), transpose.getPermAttr());
        return b.create<CastOp>(op.getLoc(), withElement(v.getType(), bf16), v);
      };
      Value lhs = toBf16(op.getLhs()), rhs = toBf16(op.getRhs());
      auto product = b.create<MatMulOp>(op.getLoc(), withElement(op.getType(), bf16), lhs, rhs);
      auto back = b.create<CastOp>(op.getLoc(), op.getType(), product.getResult());
      op.getResult().replaceAllUsesWith(back.getResult());
      op.erase();
    }
  }
};

} // namespace
} // namespace ppc
