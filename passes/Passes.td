//===- Passes.td - ppc passes ------------------------------*- tablegen -*-===//

#ifndef PPC_PASSES_TD
#define PPC_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldConstants : Pass<"ppc-fold-constants", "mlir::func::FuncOp"> {
  let summary = "Evaluates ops whose operands are all constants";
  let description = [{
    Replaces every ppc op whose operands are all `ppc.constant` by constants
    computed with the reference executor's kernels, so that folding has
    exactly the semantics of execution. Results larger than
    `max-elements` stay ops (a broadcast mask is cheaper to compute than to
    store).

    Example: `ppc.add` of two constants becomes one `ppc.constant`.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"int64_t(1) << 22",
           "largest result (in elements) that is folded">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

#endif // PPC_PASSES_TD
