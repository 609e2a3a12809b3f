//===- PpcEnums.td - enums of the ppc dialect --------------*- tablegen -*-===//

#ifndef PPC_ENUMS_TD
#define PPC_ENUMS_TD

include "mlir/IR/EnumAttr.td"

def Ppc_LossReduction : I32EnumAttr<"LossReduction",
    "how a per-element loss is reduced", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Sum", 1, "sum">,
      I32EnumAttrCase<"Mean", 2, "mean">
    ]> {
  let cppNamespace = "::ppc";
}

def Ppc_ReductionKind : I32EnumAttr<"ReductionKind",
    "how a collective combines the values of a group", [
      I32EnumAttrCase<"Sum", 0, "sum">,
      I32EnumAttrCase<"Max", 1, "max">
    ]> {
  let cppNamespace = "::ppc";
}

#endif // PPC_ENUMS_TD
