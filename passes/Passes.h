//===- Passes.h - ppc passes ------------------------------------*- C++ -*-===//

#ifndef PPC_PASSES_PASSES_H
#define PPC_PASSES_PASSES_H

#include "ir/PpcDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace ppc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace ppc

#endif // PPC_PASSES_PASSES_H
