//===- HoistConcatNegations.cpp - negated concat operands as a sign vector ===//
//
// Rotary embedding's rotate-half, `concat(-x2, x1)`, and the same shape in
// its gradient (`concat(g2, -g1)`, once ppc-concat-slice-sums has made the
// gradient's inserted slices a concat), negate some of a concat's operands
// in kernels of their own. Where everything that reads the concat is
// elementwise, the pass concatenates the operands themselves and multiplies
// the result by a vector of +1 and -1 along the concat's axis, which fuses
// into the readers' kernel: the negations' kernels go, and the concat's
// operands, now slices read by nothing else, can be read in place
// (codegen/StridedViews.h). Multiplying by -1 is negation, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Recognition.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_HOISTCONCATNEGATIONS
#include "passes/Passes.h.inc"

namespace {

struct HoistConcatNegations : impl::HoistConcatNegationsBase<HoistConcatNegations> {
  void runOnOperation() override {
    llvm::SmallVector<ConcatOp> concats;
    getOperation().walk([&](ConcatOp op) { concats.push_back(op); });
    for (ConcatOp concat : concats)
      hoist(concat);
  }

  void hoist(ConcatOp concat) {
    auto type = llvm::cast<RankedTensorType>(concat.getType());
    auto element = llvm::dyn_cast<FloatType>(type.getElementType());
    if (!element || !type.hasStaticShape() || concat->use_empty() ||
        !llvm::all_of(concat->getUsers(),
                      [](Operation *user) { return llvm::isa<ElementwiseOpInterface>(user); }))
      return;
    int64_t axis = concat.getAxis();
    llvm::SmallVector<Value> operands;
    llvm::SmallVector<APFloat> signs;
    llvm::SmallVector<NegOp> negations;
    for (Value input : concat.getInputs()) {
      auto neg = input.getDefiningOp<NegOp>();
      bool negated = neg && input.hasOneUse();
      if (negated)
        negations.push_back(neg);
      operands.push_back(negated ? neg.getInput() : input);
      APFloat sign(negated ? -1.0 : 1.0);
      bool losesInfo = false;
      sign.convert(element.getFloatSemantics(), APFloat::rmNearestTiesToEven, &losesInfo);
      signs.append(llvm::cast<RankedTensorType>(input.getType()).getDimSize(axis), sign);
    }
    if (negations.empty())
      return;
    OpBuilder b(concat);
    Location loc = concat.getLoc();
    auto joined = b.create<ConcatOp>(loc, operands, concat.getAxisAttr());
    llvm::SmallVector<int64_t> signShape(type.getRank(), 1);
    signShape[axis] = type.getDimSize(axis);
    auto signType = RankedTensorType::get(signShape, element);
    Value signVector = b.create<ConstantOp>(loc, DenseElementsAttr::get(signType, signs));
    auto product = b.create<MulOp>(loc, joined, signVector);
    copySchedule(concat, {joined, product});
    concat.replaceAllUsesWith(product.getResult());
    concat.erase();
    for (NegOp neg : negations)
      neg.erase();
  }
};

} // namespace
} // namespace ppc
