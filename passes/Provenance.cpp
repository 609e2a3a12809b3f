//===- Provenance.cpp - where the ops of @train_step come from ------------===//

#include "passes/Provenance.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace ppc {

void markGradient(Value value, llvm::StringRef name, int64_t param) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return;
  llvm::SmallVector<int64_t> params(def->getNumResults(), -1);
  if (auto existing = def->getAttrOfType<DenseI64ArrayAttr>(name))
    params.assign(existing.asArrayRef().begin(), existing.asArrayRef().end());
  params[llvm::cast<OpResult>(value).getResultNumber()] = param;
  def->setAttr(name, DenseI64ArrayAttr::get(def->getContext(), params));
}

std::optional<int64_t> gradientOf(Value value, llvm::StringRef name) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto params = def->getAttrOfType<DenseI64ArrayAttr>(name);
  if (!params)
    return std::nullopt;
  int64_t p = params[llvm::cast<OpResult>(value).getResultNumber()];
  if (p < 0)
    return std::nullopt;
  return p;
}

} // namespace ppc
