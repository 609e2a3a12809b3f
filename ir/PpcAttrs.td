//===- PpcAttrs.td - attributes of the ppc dialect ---------*- tablegen -*-===//

#ifndef PPC_ATTRS_TD
#define PPC_ATTRS_TD

include "ir/PpcBase.td"
include "mlir/IR/AttrTypeBase.td"

class Ppc_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Ppc_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

/// One list of mesh axis names per tensor dimension. The lists live in the
/// attribute's storage, so the nested arrays are copied into its allocator.
def Ppc_AxesPerDimParameter : AttrParameter<
    "::llvm::ArrayRef<::llvm::ArrayRef<::mlir::StringAttr>>",
    "mesh axes per tensor dimension, major to minor"> {
  let allocator = [{
    ::llvm::SmallVector<::llvm::ArrayRef<::mlir::StringAttr>> copied;
    for (::llvm::ArrayRef<::mlir::StringAttr> axes : $_self)
      copied.push_back($_allocator.copyInto(axes));
    $_dst = $_allocator.copyInto(
        ::llvm::ArrayRef<::llvm::ArrayRef<::mlir::StringAttr>>(copied));
  }];
}

def Ppc_ShardingAttr : Ppc_Attr<"Sharding", "sharding"> {
  let summary = "how a tensor is split over the axes of a device mesh";
  let description = [{
    For each tensor dimension, the mesh axes it is split over, major to
    minor: a dimension split over `[dp, tp]` is cut into `DP * TP` equal
    blocks and rank `r` holds block `dp_i * TP + tp_i`, where `dp_i` and
    `tp_i` are `r`'s coordinates on those axes. A dimension with no axes is
    whole on every rank. `partial` lists axes over which the local values are
    partial sums: the full value is the sum of the local values over the
    ranks of such an axis. Axes mentioned nowhere replicate the value. No
    axis appears twice.

    A dimension written `3 * [tp]` is viewed as 3 equal blocks, each split
    over `tp`: rank `r` holds part `tp_i` of every block, in block order. A
    fused QKV projection's output `[b, s, 3h]` split so holds the same heads
    of q, k and v on each rank (Megatron's column split of a fused weight);
    slicing q, k and v out of it needs no communication.

    Function arguments and results carry one as `ppc.sharding`, ops one per
    result in the array `ppc.shardings`.

    Example:
    ```mlir
    #ppc.sharding<@mesh, [[dp], [], [tp]]>
    #ppc.sharding<@mesh, [[], []], partial = [tp]>
    #ppc.sharding<@mesh, [[dp], [], 3 * [tp]]>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::FlatSymbolRefAttr", "the ppc.mesh">:$mesh,
    Ppc_AxesPerDimParameter:$dimAxes,
    OptionalArrayRefParameter<"::mlir::StringAttr",
                              "axes of a pending sum">:$partialAxes,
    OptionalArrayRefParameter<"int64_t",
                              "blocks per dimension (empty: all 1)">:$dimBlocks);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::llvm::StringRef":$mesh,
                     "::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef>>":$dimAxes,
                     CArg<"::llvm::ArrayRef<::llvm::StringRef>", "{}">:$partialAxes,
                     CArg<"::llvm::ArrayRef<int64_t>", "{}">:$dimBlocks)>
  ];
  let extraClassDeclaration = [{
    /// The number of tensor dimensions this sharding describes.
    unsigned getRank() const { return getDimAxes().size(); }
    /// The blocks dimension `dim` is viewed as (1: split contiguously).
    int64_t getBlocks(unsigned dim) const {
      return getDimBlocks().empty() ? 1 : getDimBlocks()[dim];
    }
    /// True when no dimension is split and no axis is partial.
    bool isReplicated() const;
    /// The dimension `axis` splits, or none.
    std::optional<unsigned> getDimOfAxis(::llvm::StringRef axis) const;
    /// Whether the value is a partial sum over `axis`.
    bool isPartialOver(::llvm::StringRef axis) const;
    /// The shape a rank holds of a tensor of `globalShape` on `mesh`;
    /// fails (emitting nothing) when the rank differs, an axis is not on the
    /// mesh, or a dimension does not divide by its number of blocks.
    ::mlir::FailureOr<::llvm::SmallVector<int64_t>>
    getLocalShape(::ppc::MeshOp mesh, ::llvm::ArrayRef<int64_t> globalShape) const;
  }];
}

#endif // PPC_ATTRS_TD
