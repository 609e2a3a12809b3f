//===- PpcInterfaces.td - facts about ppc ops, on the ops -*- tablegen -*-===//
//
// What passes and code generation ask about an op kind, declared with the
// op in PpcOps.td rather than in lists kept beside the code that asks.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_INTERFACES_TD
#define PPC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Ppc_ElementwiseOpInterface : OpInterface<"ElementwiseOpInterface"> {
  let cppNamespace = "::ppc";
  let description = [{
    An op computed element by element, after numpy broadcasting of its
    operands: what code generation fuses into one loop nest
    (`codegen/Fusion.h`), calling one scalar function per element.
  }];
  let methods = [
    StaticInterfaceMethod<[{
      The function of `ppcrt::scalar` (runtime/ppcrt/Scalar.h) that computes
      one element from one element of each operand; empty for `ppc.cast`,
      which code generation spells by its result type.
    }], "::llvm::StringRef", "getScalarFunction">,
  ];
}

#endif // PPC_INTERFACES_TD
