//===- PpcDialect.h - the ppc dialect ---------------------------*- C++ -*-===//

#ifndef PPC_IR_PPCDIALECT_H
#define PPC_IR_PPCDIALECT_H

#include "mlir/IR/Dialect.h"

#include "ir/PpcDialect.h.inc"

#endif // PPC_IR_PPCDIALECT_H
