//===- PpcBase.td - the ppc dialect and its type constraints -*- tablegen -*-===//

#ifndef PPC_BASE_TD
#define PPC_BASE_TD

include "mlir/IR/OpBase.td"

def Ppc_Dialect : Dialect {
  let name = "ppc";
  let cppNamespace = "::ppc";
  let summary = "Tensor ops of the ppc auto-parallelizing training compiler";
  let description = [{
    The `ppc` dialect holds a transformer's computation as imported from ONNX
    and, in later stages, its training step, sharding and collectives. Every
    tensor has a static shape. ONNX ops that only compute shapes (Shape,
    ConstantOfShape, Range, ...) have no counterpart: the importer folds them.
    Some ONNX ops are imported as compositions of ppc ops (Gemm, Split,
    Flatten, Squeeze, Unsqueeze, SoftmaxCrossEntropyLoss, ...), so that each
    behaviour (executor kernel, gradient, sharding rule) exists once.

    Function arguments carry one of the discardable attributes
    `ppc.input = "<onnx graph input>"` or `ppc.param = "<onnx initializer>"`;
    results carry `ppc.output = "<onnx graph output>"`. Training adds
    `ppc.grad = "<param>"` (a gradient result), `ppc.state =
    "<kind>:<param>"` (optimizer state, argument and result) and `ppc.step`
    (the step-number argument of @train_step, a unit attribute).

    Parallelization adds a `ppc.mesh` symbol naming the device mesh,
    `ppc.sharding = #ppc.sharding<...>` on function arguments and results,
    `ppc.shardings = [#ppc.sharding<...>, ...]` (one per result) on ops, and
    the collective ops that SPMD programs communicate with.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr llvm::StringLiteral kInputAttrName = "ppc.input";
    static constexpr llvm::StringLiteral kParamAttrName = "ppc.param";
    static constexpr llvm::StringLiteral kOutputAttrName = "ppc.output";
    static constexpr llvm::StringLiteral kGradAttrName = "ppc.grad";
    static constexpr llvm::StringLiteral kStateAttrName = "ppc.state";
    static constexpr llvm::StringLiteral kStepAttrName = "ppc.step";
    static constexpr llvm::StringLiteral kHyperAttrName = "ppc.hyper";
    static constexpr llvm::StringLiteral kShardingAttrName = "ppc.sharding";
    static constexpr llvm::StringLiteral kShardingsAttrName = "ppc.shardings";
    // The module: its ONNX file and opset (import), the pipeline schedule.
    static constexpr llvm::StringLiteral kSourceAttrName = "ppc.source";
    static constexpr llvm::StringLiteral kOpsetAttrName = "ppc.opset";
    static constexpr llvm::StringLiteral kScheduleAttrName = "ppc.schedule";
    // A training step: the ZeRO stage and the plan chosen for it; a
    // pipeline rank's program: its rank and the stages it runs.
    static constexpr llvm::StringLiteral kZeroAttrName = "ppc.zero";
    static constexpr llvm::StringLiteral kPlanAttrName = "ppc.plan";
    static constexpr llvm::StringLiteral kPipelineRankAttrName = "ppc.pipeline_rank";
    static constexpr llvm::StringLiteral kStagesAttrName = "ppc.stages";
    // An op: the value a collective or transfer serves (a node name), and a
    // pipeline transfer's slot.
    static constexpr llvm::StringLiteral kValueAttrName = "ppc.value";
    static constexpr llvm::StringLiteral kSlotAttrName = "ppc.slot";
    // Offload: where a function argument or result, or an op's results,
    // live ("host"; device memory when absent), and the ops of the
    // optimizer step, naming the parameter they update (BuildTrainStep
    // marks them; ppc-offload moves them).
    static constexpr llvm::StringLiteral kPlaceAttrName = "ppc.place";
    static constexpr llvm::StringLiteral kOptimizerAttrName = "ppc.optimizer";

  private:
    /// Adds the attributes (in PpcAttrs.cpp, beside their storage classes).
    void registerAttributes();

  public:
  }];
}

/// Every result of every ppc op is a tensor of at most 2^40 bytes whose
/// element count fits in an int64 (`ppc::BoundedTensorsTrait`,
/// runtime/CheckedSize.h): code after the verifier multiplies sizes freely.
def Ppc_BoundedTensors : NativeOpTrait<"BoundedTensorsTrait"> {
  let cppNamespace = "::ppc";
}

class Ppc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Ppc_Dialect, mnemonic, !listconcat([Ppc_BoundedTensors], traits)>;

def Ppc_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def Ppc_IntElement : AnyTypeOf<[I8, I16, I32, I64, UI8, UI16, UI32, UI64]>;

def Ppc_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def Ppc_NumericTensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I8, I16,
                                             I32, I64, UI8, UI16, UI32, UI64]>;
def Ppc_BoolTensor : StaticShapeTensorOf<[I1]>;
def Ppc_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Ppc_Tensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I1, I8, I16, I32,
                                      I64, UI8, UI16, UI32, UI64]>;

#endif // PPC_BASE_TD
