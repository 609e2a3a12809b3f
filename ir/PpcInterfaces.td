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

def Ppc_ContractionOpInterface : OpInterface<"ContractionOpInterface"> {
  let cppNamespace = "::ppc";
  let description = [{
    An op whose work is multiply-adds, bound by compute rather than memory
    (a GEMM): what the cost model prices by FLOPs, the MFU report counts,
    and `--precision bf16` computes in bf16.
  }];
  let methods = [
    InterfaceMethod<[{
      The FLOPs (two per multiply-add) of one run on operands of shapes
      `operands`: the op's own, or one rank's local blocks of them; 0 when
      it multiplies nothing (an einsum of one operand only sums).
    }], "double", "getFlops", (ins "::llvm::ArrayRef<::llvm::ArrayRef<int64_t>>":$operands)>,
  ];
}

#endif // PPC_INTERFACES_TD
