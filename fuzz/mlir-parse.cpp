//===- mlir-parse.cpp - fuzz target: .mlir source with the ppc dialect ----===//
//
// Parses the input as MLIR source in a context holding the dialects ppc-opt
// registers (ppc, func; the builtin dialect is always there), with the
// verifier run after parsing as ppc-opt does, then prints what verified in
// both its custom and its generic form, so that ppc's printers see every
// attribute and op the parser and verifiers let through.
//
//===----------------------------------------------------------------------===//

#include "ir/PpcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // MLIR's lexer reads the byte after the source, which must be a NUL.
  std::string source(reinterpret_cast<const char *>(data), size);
  mlir::DialectRegistry registry;
  registry.insert<ppc::PpcDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler silence(&context,
                                        [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context, "fuzz.mlir");
  if (!module)
    return 0;
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  module->print(os, mlir::OpPrintingFlags().printGenericOpForm());
  return 0;
}
