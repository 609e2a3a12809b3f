//===- PpcOps.td - tensor ops of the ppc dialect -----------*- tablegen -*-===//
//
// Ops are grouped by family; each family shares a base class so that its
// format, traits and shape rule are written once.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_OPS_TD
#define PPC_OPS_TD

include "ir/PpcAttrs.td"
include "ir/PpcBase.td"
include "ir/PpcEnums.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "ir/PpcInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants and casts
//===----------------------------------------------------------------------===//

def Ppc_ConstantOp : Ppc_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor whose value is known at compile time: non-float ONNX
    initializers, `Constant` nodes and everything the importer folded.

    Example:
    ```mlir
    %0 = ppc.constant dense<[1, 2]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

/// Linearity, which partitioning lets partial sums (a value each rank holds
/// one summand of) flow through, reducing them once after the op
/// (passes/sharding/Layout.cpp). `Ppc_LinearInFirst`: linear in operand 0,
/// the others fixed (`ppc::LinearInFirstTrait`). `Ppc_LinearInEach`: linear
/// in each operand, the others fixed (a product). `Ppc_Additive`: linear in
/// all operands together, f(a + a', b + b') = f(a, b) + f(a', b') (a sum,
/// concatenation). A cast is linear only to a float type, which the pass
/// asks of the instance.
def Ppc_LinearInFirst : NativeOpTrait<"LinearInFirstTrait"> { let cppNamespace = "::ppc"; }
def Ppc_LinearInEach : NativeOpTrait<"LinearInEachTrait"> { let cppNamespace = "::ppc"; }
def Ppc_Additive : NativeOpTrait<"AdditiveTrait"> { let cppNamespace = "::ppc"; }

/// Marks an op elementwise (Ppc_ElementwiseOpInterface) with its scalar
/// function, `ppcrt::scalar::<fn>`.
class Ppc_ScalarFunction<string fn> {
  code scalarFunctionDecl = [{
    /// ppcrt::scalar's function for one element (ElementwiseOpInterface).
    static ::llvm::StringRef getScalarFunction() { return "}] # fn # [{"; }
  }];
}

def Ppc_CastOp : Ppc_Op<"cast", [Pure, SameOperandsAndResultShape,
                                 Ppc_ElementwiseOpInterface]>, Ppc_ScalarFunction<""> {
  let summary = "element type conversion";
  let description = [{
    Converts every element to the result's element type with ONNX `Cast`
    semantics: float to integer truncates toward zero, anything to `i1` is
    `x != 0`.

    Example:
    ```mlir
    %1 = ppc.cast %0 : tensor<2x3xi64> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$input);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let extraClassDeclaration = scalarFunctionDecl;
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

class Ppc_UnaryOp<string mnemonic, Type tensorType, string formula,
                  string scalarFn = mnemonic, list<Trait> traits = []>
    : Ppc_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                    Ppc_ElementwiseOpInterface], traits)>,
      Ppc_ScalarFunction<scalarFn> {
  let summary = "elementwise " # formula;
  let description = [{
    Computes `}] # formula # [{` for every element.

    Example:
    ```mlir
    %1 = ppc.}] # mnemonic # [{ %0 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let extraClassDeclaration = scalarFunctionDecl;
}

def Ppc_NegOp : Ppc_UnaryOp<"neg", Ppc_NumericTensor, "-x", "neg", [Ppc_LinearInFirst]>;
def Ppc_AbsOp : Ppc_UnaryOp<"abs", Ppc_NumericTensor, "|x|">;
def Ppc_SqrtOp : Ppc_UnaryOp<"sqrt", Ppc_FloatTensor, "sqrt(x)">;
def Ppc_ReciprocalOp : Ppc_UnaryOp<"reciprocal", Ppc_FloatTensor, "1 / x">;
def Ppc_ExpOp : Ppc_UnaryOp<"exp", Ppc_FloatTensor, "exp(x)">;
def Ppc_LogOp : Ppc_UnaryOp<"log", Ppc_FloatTensor, "log(x)">;
def Ppc_ErfOp : Ppc_UnaryOp<"erf", Ppc_FloatTensor, "erf(x)">;
def Ppc_TanhOp : Ppc_UnaryOp<"tanh", Ppc_FloatTensor, "tanh(x)">;
def Ppc_SigmoidOp : Ppc_UnaryOp<"sigmoid", Ppc_FloatTensor, "1 / (1 + exp(-x))">;
def Ppc_ReluOp : Ppc_UnaryOp<"relu", Ppc_NumericTensor, "max(x, 0)">;
def Ppc_SinOp : Ppc_UnaryOp<"sin", Ppc_FloatTensor, "sin(x)">;
def Ppc_CosOp : Ppc_UnaryOp<"cos", Ppc_FloatTensor, "cos(x)">;
def Ppc_FloorOp : Ppc_UnaryOp<"floor", Ppc_FloatTensor, "floor(x)">;
def Ppc_CeilOp : Ppc_UnaryOp<"ceil", Ppc_FloatTensor, "ceil(x)">;
def Ppc_SignOp : Ppc_UnaryOp<"sign", Ppc_NumericTensor, "sign(x) (-1, 0 or 1; NaN for NaN)">;
def Ppc_NotOp : Ppc_UnaryOp<"not", Ppc_BoolTensor, "!x", "logicalNot">;

//===----------------------------------------------------------------------===//
// Elementwise binary ops with numpy broadcasting
//===----------------------------------------------------------------------===//

class Ppc_BroadcastBinaryOp<string mnemonic, Type operandType, string formula,
                            bit boolResult = 0, string scalarFn = mnemonic,
                            list<Trait> traits = []>
    : Ppc_Op<mnemonic, !listconcat([Pure, SameOperandsElementType, InferTypeOpAdaptor,
                                    Ppc_ElementwiseOpInterface], traits)>,
      Ppc_ScalarFunction<scalarFn> {
  let summary = "elementwise " # formula # " with broadcasting";
  let description = [{
    Computes `}] # formula # [{` elementwise after broadcasting both operands
    to a common shape with numpy (ONNX multidirectional) rules.}] #
    !if(boolResult, " The result is a tensor of `i1`.", "") # [{

    Example:
    ```mlir
    %2 = ppc.}] # mnemonic # [{ %0, %1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3x}] #
    !if(boolResult, "i1", "f32") # [{>
    ```
  }];
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = scalarFunctionDecl;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::ppc::inferBroadcastResult(context, location,
                                         adaptor.getOperands(), }] #
                                         !if(boolResult, "true", "false") # [{,
                                         types);
    }
  }];
}

def Ppc_AddOp : Ppc_BroadcastBinaryOp<"add", Ppc_NumericTensor, "x + y", 0, "add",
                                      [Ppc_Additive]>;
def Ppc_SubOp : Ppc_BroadcastBinaryOp<"sub", Ppc_NumericTensor, "x - y", 0, "sub",
                                      [Ppc_Additive]>;
def Ppc_MulOp : Ppc_BroadcastBinaryOp<"mul", Ppc_NumericTensor, "x * y", 0, "mul",
                                      [Ppc_LinearInEach]>;
def Ppc_DivOp : Ppc_BroadcastBinaryOp<"div", Ppc_NumericTensor,
                                      "x / y (integers truncate toward zero)", 0, "div",
                                      [Ppc_LinearInFirst]>;
def Ppc_PowOp : Ppc_BroadcastBinaryOp<"pow", Ppc_NumericTensor, "x ^ y">;
def Ppc_MaxOp : Ppc_BroadcastBinaryOp<"max", Ppc_NumericTensor, "max(x, y)">;
def Ppc_MinOp : Ppc_BroadcastBinaryOp<"min", Ppc_NumericTensor, "min(x, y)">;
def Ppc_EqualOp : Ppc_BroadcastBinaryOp<"equal", Ppc_Tensor, "x == y", 1>;
def Ppc_LessOp : Ppc_BroadcastBinaryOp<"less", Ppc_NumericTensor, "x < y", 1>;
def Ppc_GreaterOp : Ppc_BroadcastBinaryOp<"greater", Ppc_NumericTensor, "x > y", 1>;
def Ppc_AndOp : Ppc_BroadcastBinaryOp<"and", Ppc_BoolTensor, "x && y", 1, "logicalAnd">;
def Ppc_OrOp : Ppc_BroadcastBinaryOp<"or", Ppc_BoolTensor, "x || y", 1, "logicalOr">;
def Ppc_XorOp : Ppc_BroadcastBinaryOp<"xor", Ppc_BoolTensor, "x != y", 1, "logicalXor">;

def Ppc_WhereOp : Ppc_Op<"where", [Pure, InferTypeOpAdaptor,
                                   AllElementTypesMatch<["x", "y", "result"]>,
                                   Ppc_ElementwiseOpInterface]>,
                  Ppc_ScalarFunction<"where"> {
  let summary = "elementwise select with broadcasting";
  let description = [{
    `condition ? x : y` elementwise, the three operands broadcast together.

    Example:
    ```mlir
    %3 = ppc.where %c, %a, %b : (tensor<1x1x4x4xi1>, tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
    ```
  }];
  let arguments = (ins Ppc_BoolTensor:$condition, Ppc_Tensor:$x, Ppc_Tensor:$y);
  let results = (outs Ppc_Tensor:$result);
  let extraClassDeclaration = scalarFunctionDecl;
  let assemblyFormat = [{
    $condition `,` $x `,` $y attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Ppc_MatMulOp : Ppc_Op<"matmul", [Pure, SameOperandsElementType,
                                     InferTypeOpAdaptor, Ppc_LinearInEach,
                                     DeclareOpInterfaceMethods<Ppc_ContractionOpInterface>]> {
  let summary = "batched matrix product";
  let description = [{
    `lhs[..., m, k] @ rhs[..., k, n]` with numpy broadcasting of the batch
    dimensions. Both operands have rank >= 2 (the importer reshapes ONNX's
    1-D operands).

    Example:
    ```mlir
    %2 = ppc.matmul %0, %1 : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins Ppc_NumericTensor:$lhs, Ppc_NumericTensor:$rhs);
  let results = (outs Ppc_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Ppc_EinsumOp : Ppc_Op<"einsum", [Pure, InferTypeOpAdaptor, Ppc_LinearInEach,
                                     DeclareOpInterfaceMethods<Ppc_ContractionOpInterface>]> {
  let summary = "Einstein summation";
  let description = [{
    Sums products of the operands over the labels missing from the output.
    The equation is explicit (`->` present), without ellipsis, one lower- or
    upper-case letter per dimension; the importer rewrites ONNX's implicit and
    ellipsis forms into this one.

    Example:
    ```mlir
    %2 = ppc.einsum "bhqd,bhkd->bhqk" (%q, %k) : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins StrAttr:$equation, Variadic<Ppc_NumericTensor>:$inputs);
  let results = (outs Ppc_NumericTensor:$result);
  let assemblyFormat = [{
    $equation `(` $inputs `)` attr-dict `:` functional-type($inputs, results)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Ppc_ReduceOp<string mnemonic, string what, list<Trait> traits = []>
    : Ppc_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultElementType,
                                    InferTypeOpAdaptor], traits)> {
  let summary = what # " over the given axes";
  let description = [{
    Reduces `input` with }] # what # [{ over `axes` (sorted, unique,
    non-negative). With `keepdims` the reduced dimensions stay with size 1.
    An empty `axes` is the identity.

    Example:
    ```mlir
    %1 = ppc.}] # mnemonic # [{ %0 axes = [2] keepdims = true : (tensor<2x16x64xf32>) -> tensor<2x16x1xf32>
    ```
  }];
  let arguments = (ins Ppc_NumericTensor:$input, DenseI64ArrayAttr:$axes,
                       BoolAttr:$keepdims);
  let results = (outs Ppc_NumericTensor:$result);
  let assemblyFormat = [{
    $input `axes` `=` $axes `keepdims` `=` $keepdims attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::ppc::inferReduceResult(location, adaptor.getInput(),
                                      adaptor.getAxes(), adaptor.getKeepdims(),
                                      types);
    }
  }];
}

def Ppc_ReduceSumOp : Ppc_ReduceOp<"reduce_sum", "the sum", [Ppc_LinearInFirst]>;
def Ppc_ReduceMeanOp : Ppc_ReduceOp<"reduce_mean", "the mean", [Ppc_LinearInFirst]>;
def Ppc_ReduceMaxOp : Ppc_ReduceOp<"reduce_max", "the maximum">;
def Ppc_ReduceMinOp : Ppc_ReduceOp<"reduce_min", "the minimum">;
def Ppc_ReduceProdOp : Ppc_ReduceOp<"reduce_prod", "the product">;

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

class Ppc_SoftmaxOpBase<string mnemonic, string formula>
    : Ppc_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = formula # " along one axis";
  let description = [{
    `}] # formula # [{` along `axis` (non-negative), computed in the
    numerically stable max-subtracted form.

    Example:
    ```mlir
    %1 = ppc.}] # mnemonic # [{ %0 axis = 3 : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Ppc_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ppc_SoftmaxOp : Ppc_SoftmaxOpBase<"softmax", "exp(x) / sum(exp(x))">;
def Ppc_LogSoftmaxOp : Ppc_SoftmaxOpBase<"log_softmax", "x - log(sum(exp(x)))">;

def Ppc_LogSumExpOp : Ppc_Op<"log_sum_exp", [Pure, InferTypeOpAdaptor]> {
  let summary = "log(sum(exp(x))) along one axis, the axis kept with size 1";
  let description = [{
    The log of the sum of exponentials of `input` along `axis` (non-
    negative), computed in the max-subtracted form: `input`'s shape with that
    dimension 1, of its element type. log_softmax(x) is x - log_sum_exp(x);
    ppc-split-log-softmax rewrites a log-softmax that way where that
    spares writing it (the loss reads one element of each row, the gradient
    recomputes the rest).

    Example:
    ```mlir
    %1 = ppc.log_sum_exp %0 axis = 1 : (tensor<8x50257xf32>) -> tensor<8x1xf32>
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Ppc_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` functional-type(operands, results)";
}

def Ppc_LayerNormOp : Ppc_Op<"layer_norm", [Pure,
                                            InferTypeOpAdaptor]> {
  let summary = "layer normalization over the trailing dimensions";
  let description = [{
    Normalizes `input` over dimensions `[axis, rank)` to zero mean and unit
    variance (biased, `epsilon` added to the variance), then multiplies by
    `scale` and adds `bias` (optional); both have the normalized shape or
    broadcast to it.

    Example:
    ```mlir
    %y = ppc.layer_norm %x, %g, %b axis = 2 epsilon = 1.000000e-05 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$input, Ppc_FloatTensor:$scale,
                       Optional<Ppc_FloatTensor>:$bias, I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Ppc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? `axis` `=` $axis `epsilon` `=` $epsilon attr-dict
    `:` functional-type(operands, results)
  }];
}

def Ppc_LayerNormGradOp : Ppc_Op<"layer_norm_grad", [Pure,
                                                    InferTypeOpAdaptor]> {
  let summary = "the input's gradient of ppc.layer_norm, fused";
  let description = [{
    For a `ppc.layer_norm` of `input` with `scale`, `axis` and `epsilon`
    (its bias does not matter) and the adjoint `result_grad` of its result:
    `input_grad`, with xhat = (x - mean) * rstd and dxhat = result_grad *
    scale, is rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), the
    means over dimensions `[axis, rank)`. One pass per row recomputes the
    statistics (the forward keeps none) and returns them, `mean` and `rstd`
    = 1 / sqrt(var + epsilon), shaped like `input` with the normalized
    dimensions 1 and kept in f32 (f64 for f64 operands), so that the scale's
    and bias's gradients (sums over the other dimensions) are elementwise
    reductions that never store xhat. The kernels compute in f32 (f64) and
    round `input_grad` once.

    Example:
    ```mlir
    %dx, %mean, %rstd = ppc.layer_norm_grad %x, %g, %dy axis = 2 epsilon = 1.000000e-05 : (tensor<2x16x64xbf16>, tensor<64xbf16>, tensor<2x16x64xbf16>) -> (tensor<2x16x64xbf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$input, Ppc_FloatTensor:$scale,
                       Ppc_FloatTensor:$result_grad, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Ppc_FloatTensor:$input_grad, Ppc_FloatTensor:$mean,
                      Ppc_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input `,` $scale `,` $result_grad `axis` `=` $axis `epsilon` `=` $epsilon attr-dict
    `:` functional-type(operands, results)
  }];
}

def Ppc_RmsNormOp : Ppc_Op<"rms_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "RMS normalization over the trailing dimensions";
  let description = [{
    Divides `input` by the root mean square of dimensions `[axis, rank)`
    (`epsilon` added to the mean square), then multiplies by `scale`, which
    has the normalized shape or broadcasts to it: LLaMA's RMSNorm. Imports
    make it from the composition exports write (ppc-fuse-rms-norm).

    Example:
    ```mlir
    %y = ppc.rms_norm %x, %g axis = 2 epsilon = 1.000000e-06 : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$input, Ppc_FloatTensor:$scale, I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Ppc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `axis` `=` $axis `epsilon` `=` $epsilon attr-dict
    `:` functional-type(operands, results)
  }];
}

def Ppc_RmsNormGradOp : Ppc_Op<"rms_norm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "the input's gradient of ppc.rms_norm, fused";
  let description = [{
    For a `ppc.rms_norm` of `input` with `scale`, `axis` and `epsilon` and
    the adjoint `result_grad` of its result: `input_grad`, with rstd = 1 /
    sqrt(mean(x^2) + epsilon), xhat = x * rstd and dxhat = result_grad *
    scale, is rstd * (dxhat - xhat * mean(dxhat * xhat)), the means over
    dimensions `[axis, rank)`. One pass per row recomputes rstd and returns
    it, shaped like `input` with the normalized dimensions 1 and kept in f32
    (f64 for f64 operands), so that the scale's gradient is an elementwise
    reduction that never stores xhat. layer_norm_grad without the mean.

    Example:
    ```mlir
    %dx, %rstd = ppc.rms_norm_grad %x, %g, %dy axis = 2 epsilon = 1.000000e-06 : (tensor<2x16x64xbf16>, tensor<64xbf16>, tensor<2x16x64xbf16>) -> (tensor<2x16x64xbf16>, tensor<2x16x1xf32>)
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$input, Ppc_FloatTensor:$scale,
                       Ppc_FloatTensor:$result_grad, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Ppc_FloatTensor:$input_grad, Ppc_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input `,` $scale `,` $result_grad `axis` `=` $axis `epsilon` `=` $epsilon attr-dict
    `:` functional-type(operands, results)
  }];
}

def Ppc_RotaryOp : Ppc_Op<"rotary", [Pure, InferTypeOpAdaptor, Ppc_LinearInFirst]> {
  let summary = "rotary position embedding (rotate-half), or its transpose";
  let description = [{
    Rotary position embedding in the rotate-half convention (GPT-NeoX,
    LLaMA, Mistral as Hugging Face writes them): with `input` x of shape
    [..., n], n even, h = n / 2, rotate_half(x) = concat(-x[..., h:],
    x[..., :h]) and `cos` and `sin` broadcasting to x's shape with x's last
    dimension,

        result = x * cos + rotate_half(x) * sin,

    that is result[i] = x[i] cos[i] - x[i + h] sin[i] for i < h and
    x[i] cos[i] + x[i - h] sin[i] for i >= h. With `transposed`, the
    transposed linear map of x (the gradient's: input_grad = cos * g +
    rotate_half^T(sin * g)), result[i] = x[i] cos[i] + x[i + h] sin[i + h]
    for i < h and x[i] cos[i] - x[i - h] sin[i - h] for i >= h. Linear in
    x. The kernels compute in f32 or wider (the executor and the CPU in
    double, CUDA in f32, f64 for f64) and round once. The training pipeline
    makes it from the composition exports write (ppc-fuse-rotary).

    Example:
    ```mlir
    %y = ppc.rotary %x, %cos, %sin : (tensor<2x4x16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<2x4x16x64xf32>
    %dx = ppc.rotary %dy, %cos, %sin transposed : (tensor<2x4x16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<2x4x16x64xf32>
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$input, Ppc_FloatTensor:$cos, Ppc_FloatTensor:$sin,
                       UnitAttr:$transposed);
  let results = (outs Ppc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin (`transposed` $transposed^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Ppc_AttentionOp : Ppc_Op<"attention", [Pure,
    DeclareOpInterfaceMethods<Ppc_ContractionOpInterface>]> {
  let summary = "scaled dot-product attention, fused (FlashAttention)";
  let description = [{
    For queries `q[..., T, D]`, keys `k[..., S, D]` and values `v[..., S, Dv]`
    with the same batch dimensions (heads included), the scores are
    `s = scale * q k^T + bias` (`bias` optional, broadcast to `[..., T, S]`,
    never differentiated); with `causal`, key j is hidden from query i when
    j > i. `output = softmax(s) v` and `lse[..., T]` is each query's
    log-sum-exp of its scores, kept (in f32, f64 for f64 operands) so that
    the backward (`ppc.attention_grad`) recomputes the probabilities rather
    than storing `T x S` of them. `ppc-fuse-attention` makes it from the
    matmul-softmax-matmul form exported models have.

    Example:
    ```mlir
    %o, %lse = ppc.attention %q, %k, %v scale = 1.250000e-01 causal : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$q, Ppc_FloatTensor:$k, Ppc_FloatTensor:$v,
                       Optional<Ppc_FloatTensor>:$bias, F64Attr:$scale, UnitAttr:$causal);
  let results = (outs Ppc_FloatTensor:$output, Ppc_FloatTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`bias` $bias^)? `scale` `=` $scale (`causal` $causal^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Ppc_AttentionGradOp : Ppc_Op<"attention_grad", [Pure,
    DeclareOpInterfaceMethods<Ppc_ContractionOpInterface>]> {
  let summary = "the gradient of ppc.attention (FlashAttention's backward)";
  let description = [{
    The adjoints of `q`, `k` and `v` of a `ppc.attention` with the same
    operands and attributes, given its `output`, its `lse` and the output's
    adjoint `d_output`: the probabilities are recomputed from `lse`, so no
    `T x S` tensor is read or written.

    Example:
    ```mlir
    %dq, %dk, %dv = ppc.attention_grad %q, %k, %v, %o, %lse, %do scale = 1.250000e-01 causal : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$q, Ppc_FloatTensor:$k, Ppc_FloatTensor:$v,
                       Ppc_FloatTensor:$output, Ppc_FloatTensor:$lse,
                       Ppc_FloatTensor:$d_output, Optional<Ppc_FloatTensor>:$bias,
                       F64Attr:$scale, UnitAttr:$causal);
  let results = (outs Ppc_FloatTensor:$d_q, Ppc_FloatTensor:$d_k, Ppc_FloatTensor:$d_v);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $output `,` $lse `,` $d_output (`bias` $bias^)? `scale` `=` $scale
    (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Ppc_ReshapeOp : Ppc_Op<"reshape", [Pure, SameOperandsAndResultElementType,
                                       Ppc_LinearInFirst]> {
  let summary = "reinterprets a tensor with another static shape";
  let description = [{
    Row-major reshape to the result type's shape, which has the same number
    of elements. ONNX Reshape, Flatten, Squeeze and Unsqueeze import as this.

    Example:
    ```mlir
    %1 = ppc.reshape %0 : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$input);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Ppc_TransposeOp : Ppc_Op<"transpose", [Pure, InferTypeOpAdaptor, Ppc_LinearInFirst]> {
  let summary = "permutes dimensions";
  let description = [{
    `result.shape[i] = input.shape[perm[i]]`.

    Example:
    ```mlir
    %1 = ppc.transpose %0 perm = [0, 2, 1, 3] : (tensor<2x16x4x16xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $input `perm` `=` $perm attr-dict `:` functional-type(operands, results)
  }];
}

def Ppc_ConcatOp : Ppc_Op<"concat", [Pure, SameOperandsElementType,
                                     InferTypeOpAdaptor, Ppc_Additive]> {
  let summary = "concatenates tensors along one axis";
  let description = [{
    Example:
    ```mlir
    %2 = ppc.concat %0, %1 axis = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Ppc_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $inputs `axis` `=` $axis attr-dict `:` functional-type($inputs, results)
  }];
}

def Ppc_SliceOp : Ppc_Op<"slice", [Pure, InferTypeOpAdaptor, Ppc_LinearInFirst]> {
  let summary = "strided slice with one start, limit and step per dimension";
  let description = [{
    Dimension `d` takes `starts[d], starts[d]+steps[d], ...` up to but
    excluding `limits[d]`; steps are non-zero and may be negative (then
    `limits[d]` may be -1). Bounds are already clamped by the importer.
    ONNX Slice and Split import as this.

    Example:
    ```mlir
    %1 = ppc.slice %0 starts = [0, 64] limits = [2, 128] steps = [1, 1] : (tensor<2x192xf32>) -> tensor<2x64xf32>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$steps);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `limits` `=` $limits `steps` `=` $steps attr-dict
    `:` functional-type(operands, results)
  }];
}

def Ppc_InsertSliceOp : Ppc_Op<"insert_slice", [Pure,
    AllTypesMatch<["dest", "result"]>,
    AllElementTypesMatch<["source", "dest"]>]> {
  let summary = "replaces a strided slice of a tensor";
  let description = [{
    The inverse of `ppc.slice`: `dest` with the elements that
    `ppc.slice %dest` would read (same `starts`, `limits` and `steps`, steps
    non-zero and possibly negative) replaced by those of `source`, whose
    shape is the slice's shape. The adjoint of a slice is its adjoint
    inserted into zeros.

    Example:
    ```mlir
    %2 = ppc.insert_slice %0 into %1 starts = [0, 64] limits = [2, 128] steps = [1, 1] : (tensor<2x64xf32>, tensor<2x192xf32>) -> tensor<2x192xf32>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$source, Ppc_Tensor:$dest,
                       DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$limits,
                       DenseI64ArrayAttr:$steps);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $source `into` $dest `starts` `=` $starts `limits` `=` $limits `steps` `=` $steps
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Ppc_GatherOp : Ppc_Op<"gather", [Pure, InferTypeOpAdaptor, Ppc_LinearInFirst]> {
  let summary = "takes slices along one axis at the given indices";
  let description = [{
    ONNX Gather: `result` has shape `data[:axis] + indices + data[axis+1:]`;
    negative indices count from the end. Embedding lookups are gathers on
    axis 0.

    Example:
    ```mlir
    %1 = ppc.gather %wte[%ids] axis = 0 : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$data, Ppc_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $data `[` $indices `]` `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
}

def Ppc_ScatterAddOp : Ppc_Op<"scatter_add", [Pure, Ppc_LinearInFirst,
    AllElementTypesMatch<["updates", "result"]>]> {
  let summary = "adds slices into zeros along one axis at the given indices";
  let description = [{
    The inverse of `ppc.gather`: the result, of the explicit result type,
    starts as zeros; then for every position `i` (a multi-index) of
    `indices`, `result[a..., indices[i], b...] += updates[a..., i, b...]`,
    so rows named several times accumulate. `updates` has shape
    `result[:axis] + indices + result[axis+1:]`; negative indices count from
    the end and any other index outside the axis is an error. The adjoint of
    a gather with respect to its data is a scatter_add of its adjoint.

    Example:
    ```mlir
    %1 = ppc.scatter_add %g[%ids] axis = 0 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Ppc_NumericTensor:$updates, Ppc_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Ppc_NumericTensor:$result);
  let assemblyFormat = [{
    $updates `[` $indices `]` `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Ppc_ExpandOp : Ppc_Op<"expand", [Pure, SameOperandsAndResultElementType,
                                     Ppc_LinearInFirst]> {
  let summary = "broadcasts a tensor to a larger static shape";
  let description = [{
    Broadcasts `input` to the result shape with numpy rules (the result shape
    is the broadcast of the input shape and ONNX Expand's shape operand).

    Example:
    ```mlir
    %1 = ppc.expand %0 : tensor<1x16xi64> -> tensor<2x16xi64>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$input);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Ppc_TriluOp : Ppc_Op<"trilu", [Pure, SameOperandsAndResultType]> {
  let summary = "keeps the upper or lower triangle of the last two dimensions";
  let description = [{
    With `upper`, keeps elements with `col - row >= k`; otherwise those with
    `col - row <= k`; the rest become zero.

    Example:
    ```mlir
    %1 = ppc.trilu %0 upper = false k = 0 : tensor<16x16xf32>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $input `upper` `=` $upper `k` `=` $k attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Ppc_ArgMaxOp : Ppc_Op<"arg_max", [Pure, InferTypeOpAdaptor]> {
  let summary = "position of the largest (or smallest) element along one axis";
  let description = [{
    The position along `axis` of each line's largest element (smallest
    without `largest`), in a result whose `axis` has size 1. NaN counts as the
    extreme either way, as numpy's argmax and argmin (and ONNX's references)
    have it; of equal elements the first wins, the last with `last` (ONNX's
    select_last_index).

    Example:
    ```mlir
    %1 = ppc.arg_max %0 axis = 1 largest = true last = false : tensor<4x8xf32> -> tensor<4x1xi64>
    ```
  }];
  let arguments = (ins Ppc_NumericTensor:$input, I64Attr:$axis, BoolAttr:$largest,
                       BoolAttr:$last);
  let results = (outs Ppc_IndexTensor:$result);
  let assemblyFormat = [{
    $input `axis` `=` $axis `largest` `=` $largest `last` `=` $last attr-dict `:` type($input)
    `->` type($result)
  }];
}

def Ppc_TopKIndicesOp : Ppc_Op<"top_k_indices", [Pure, InferTypeOpAdaptor]> {
  let summary = "indices of the k largest (or smallest) elements along one axis";
  let description = [{
    The positions along `axis` of the `k` largest elements of each line
    (smallest without `largest`), in order from the largest; equal elements
    keep their order (lower index first), NaN counts as larger than any
    number. ONNX TopK imports as these indices and a gather of the values, so
    the values' gradient is the gather's.

    Example:
    ```mlir
    %1 = ppc.top_k_indices %0 axis = 1 k = 2 largest = true : tensor<64x8xf32> -> tensor<64x2xi64>
    ```
  }];
  let arguments = (ins Ppc_NumericTensor:$input, I64Attr:$axis, I64Attr:$k, BoolAttr:$largest);
  let results = (outs Ppc_IndexTensor:$result);
  let assemblyFormat = [{
    $input `axis` `=` $axis `k` `=` $k `largest` `=` $largest attr-dict `:` type($input)
    `->` type($result)
  }];
}

def Ppc_CumSumOp : Ppc_Op<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "running sums along one axis";
  let description = [{
    Element `i` along `axis` is the sum of elements `0..i` (with `exclusive`,
    `0..i-1`; with `reverse`, from the end: `i..n-1`, or `i+1..n-1`), added
    in that order. ONNX's CumSum with its axis as an attribute.

    Example:
    ```mlir
    %1 = ppc.cumsum %0 axis = 1 exclusive = false reverse = false : tensor<4x16xi64>
    ```
  }];
  let arguments = (ins Ppc_NumericTensor:$input, I64Attr:$axis, BoolAttr:$exclusive,
                       BoolAttr:$reverse);
  let results = (outs Ppc_NumericTensor:$result);
  let assemblyFormat = [{
    $input `axis` `=` $axis `exclusive` `=` $exclusive `reverse` `=` $reverse attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Ppc_NllLossOp : Ppc_Op<"nll_loss", [Pure, InferTypeOpAdaptor]> {
  let summary = "negative log-likelihood loss";
  let description = [{
    ONNX NegativeLogLikelihoodLoss: `input` holds log-probabilities
    `[N, C, d1, ...]`, `target` class indices `[N, d1, ...]`. Each element's
    loss is `-input[n, target[n, ...], ...] * weight[target]` (weight 1 when
    absent); targets equal to `ignore_index` (when given) contribute 0 and no
    weight; any other target outside `[0, C)` is an error.
    `mean` divides the sum by the summed weight of the non-ignored targets.
    SoftmaxCrossEntropyLoss imports as `log_softmax` + `nll_loss`.

    Example:
    ```mlir
    %l = ppc.nll_loss %lp, %t mean ignore_index = -100 : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Ppc_FloatTensor:$input, Ppc_IndexTensor:$target,
                       Optional<Ppc_FloatTensor>:$weight,
                       Ppc_LossReduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Ppc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $target (`,` $weight^)? $reduction (`ignore_index` `=` $ignore_index^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Meshes and collectives
//
// An SPMD program runs on every rank of a mesh; each value is the rank's
// local tensor. A collective over mesh axes A combines the values of the
// ranks that share this rank's coordinates on every axis not in A (its
// group), in group order: row-major over the axes of A in the order the op
// lists them, which is the order of the blocks of a dimension sharded over
// those axes.
//===----------------------------------------------------------------------===//

def Ppc_MeshOp : Ppc_Op<"mesh", [Symbol]> {
  let summary = "a named device mesh";
  let description = [{
    Declares a mesh of ranks at module level. Axes are listed major to
    minor in rank order: rank `r` has coordinates `c` with
    `r = (c[0] * shape[1] + c[1]) * shape[2] + c[2]` for three axes. With
    DESIGN.md's layout `rank = (pp_i * DP + dp_i) * TP + tp_i`, the axes are
    listed `pp`, `dp`, `tp`. Names are unique and non-empty; sizes positive.

    Example:
    ```mlir
    ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name `axes` `=` $axes `shape` `=` $shape attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The axis names, major to minor.
    ::llvm::SmallVector<::llvm::StringRef> getAxisNames();
    /// The position of `axis` in the axis list, or none.
    std::optional<unsigned> getAxisIndex(::llvm::StringRef axis);
    /// The size of `axis`, or none when the mesh has no such axis.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
    /// The number of ranks: the product of the sizes.
    int64_t getNumRanks();
    /// The coordinates of `rank`, one per axis in axis order.
    ::llvm::SmallVector<int64_t> getCoordinates(int64_t rank);
    /// The coordinate of `rank` along `axis`, or none for an unknown axis.
    std::optional<int64_t> getCoordinate(int64_t rank, ::llvm::StringRef axis);
    /// The rank at `coordinates` (one per axis).
    int64_t getRankAt(::llvm::ArrayRef<int64_t> coordinates);
    /// The number of ranks in a group over `axes`: the product of their
    /// sizes. Fails on an unknown axis.
    ::mlir::FailureOr<int64_t> getGroupSize(::llvm::ArrayRef<::llvm::StringRef> axes);
    /// The position of `rank` in its group over `axes`: its coordinates on
    /// `axes`, row-major in the listed order. It is also the block that
    /// `rank` holds of a dimension sharded over `axes`.
    ::mlir::FailureOr<int64_t> getIndexInGroup(int64_t rank,
                                               ::llvm::ArrayRef<::llvm::StringRef> axes);
    /// The ranks of the group of `rank` over `axes` (those sharing its
    /// coordinates on every other axis), in group order.
    ::mlir::FailureOr<::llvm::SmallVector<int64_t>>
    getGroup(int64_t rank, ::llvm::ArrayRef<::llvm::StringRef> axes);
  }];
}

/// Marks the ops that combine the ranks of mesh groups
/// (`op->hasTrait<ppc::CollectiveTrait>()`): they exist only in SPMD
/// programs, after partitioning.
def Ppc_Collective : NativeOpTrait<"CollectiveTrait"> {
  let cppNamespace = "::ppc";
}

/// Marks the collectives that move data between the ranks of their group
/// (`op->hasTrait<ppc::CommunicatesTrait>()`): all but `ppc.all_slice` and
/// `ppc.axis_index`, which each rank computes alone. The runtime runs them
/// asynchronously, and the communication report counts their bytes.
def Ppc_Communicates : NativeOpTrait<"CommunicatesTrait"> {
  let cppNamespace = "::ppc";
}

/// A collective on the local tensors of the ranks of each group of `mesh`
/// over `axes`. Every collective verifies its operands locally (`verify`)
/// and, against the mesh, through `verifyGroupSize`. Besides the generated
/// builders, each has one taking (result type, input, mesh, axes) and its
/// other arguments as plain C++ values (`int64_t`, `ReductionKind`).
class Ppc_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Ppc_Op<mnemonic, !listconcat([Pure, Ppc_Collective,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>], traits)> {
  dag collectiveArgs = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The axes of the group, in group order.
    ::llvm::SmallVector<::llvm::StringRef> getAxisNames();
    /// The mesh, looked up from the nearest symbol table (null if missing).
    ::ppc::MeshOp getMeshOp();
    /// Checks the shapes that depend on the group size.
    ::mlir::LogicalResult verifyGroupSize(int64_t groupSize);
  }];
  let extraClassDefinition = [{
    ::mlir::LogicalResult
    $cppClass::verifySymbolUses(::mlir::SymbolTableCollection &symbolTable) {
      ::mlir::FailureOr<int64_t> groupSize =
          ::ppc::verifyCollectiveMesh(*this, symbolTable, getMeshAttr(), getAxes());
      if (::mlir::failed(groupSize))
        return ::mlir::failure();
      return verifyGroupSize(*groupSize);
    }
    ::llvm::SmallVector<::llvm::StringRef> $cppClass::getAxisNames() {
      return ::ppc::axisNames(getAxes());
    }
    ::ppc::MeshOp $cppClass::getMeshOp() {
      return ::mlir::SymbolTable::lookupNearestSymbolFrom<::ppc::MeshOp>(
          *this, getMeshAttr());
    }
  }];
}

def Ppc_AllReduceOp : Ppc_CollectiveOp<"all_reduce", [Ppc_Communicates, SameOperandsAndResultType]> {
  let summary = "sum or maximum over the ranks of each group";
  let description = [{
    Every rank of a group receives the elementwise `reduction` (`sum` or
    `max`) of the group's tensors.

    Example:
    ```mlir
    %r = ppc.all_reduce %x on @mesh["tp"] sum : tensor<4x8xf32>
    ```
  }];
  let arguments = !con((ins Ppc_NumericTensor:$input), collectiveArgs,
                       (ins Ppc_ReductionKind:$reduction));
  let results = (outs Ppc_NumericTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `` $axes $reduction attr-dict `:` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "::mlir::FlatSymbolRefAttr":$mesh, "::mlir::ArrayAttr":$axes,
                   "::ppc::ReductionKind":$reduction), [{
      build($_builder, $_state, result, input, mesh, axes,
            ::ppc::ReductionKindAttr::get($_builder.getContext(), reduction));
    }]>
  ];
}

def Ppc_AllGatherOp : Ppc_CollectiveOp<"all_gather",
    [Ppc_Communicates, SameOperandsAndResultElementType]> {
  let summary = "concatenates the tensors of each group along one dimension";
  let description = [{
    Every rank of a group receives the group's tensors concatenated along
    `dim` in group order; the result's `dim` is the operand's times the
    group size.

    Example:
    ```mlir
    %r = ppc.all_gather %x on @mesh["tp"] dim = 1 : tensor<4x2xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = !con((ins Ppc_Tensor:$input), collectiveArgs,
                       (ins I64Attr:$dim));
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `` $axes `dim` `=` $dim attr-dict `:` type($input) `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "::mlir::FlatSymbolRefAttr":$mesh, "::mlir::ArrayAttr":$axes, "int64_t":$dim), [{
      build($_builder, $_state, result, input, mesh, axes, $_builder.getI64IntegerAttr(dim));
    }]>
  ];
}

def Ppc_ReduceScatterOp : Ppc_CollectiveOp<"reduce_scatter",
    [Ppc_Communicates, SameOperandsAndResultElementType]> {
  let summary = "reduces over each group and keeps this rank's block";
  let description = [{
    Reduces the group's tensors elementwise (`sum` or `max`), cuts the
    result into group-size equal blocks along `dim` and gives the rank at
    position `i` of the group block `i`. The operand's `dim` divides by the
    group size.

    Example:
    ```mlir
    %r = ppc.reduce_scatter %x on @mesh["dp"] dim = 0 sum : tensor<8x4xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = !con((ins Ppc_NumericTensor:$input), collectiveArgs,
                       (ins I64Attr:$dim, Ppc_ReductionKind:$reduction));
  let results = (outs Ppc_NumericTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `` $axes `dim` `=` $dim $reduction attr-dict `:` type($input) `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "::mlir::FlatSymbolRefAttr":$mesh, "::mlir::ArrayAttr":$axes, "int64_t":$dim,
                   "::ppc::ReductionKind":$reduction), [{
      build($_builder, $_state, result, input, mesh, axes, $_builder.getI64IntegerAttr(dim),
            ::ppc::ReductionKindAttr::get($_builder.getContext(), reduction));
    }]>
  ];
}

def Ppc_AllToAllOp : Ppc_CollectiveOp<"all_to_all",
    [Ppc_Communicates, SameOperandsAndResultElementType]> {
  let summary = "exchanges blocks between the ranks of each group";
  let description = [{
    Every rank cuts its tensor into group-size equal blocks along `split`
    and sends block `j` to the rank at position `j` of the group; each rank
    concatenates the blocks it receives along `concat` in group order. The
    result's `split` is divided by the group size, then its `concat`
    multiplied by it (with `split == concat` the shape is unchanged).

    Example:
    ```mlir
    %r = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
    ```
  }];
  let arguments = !con((ins Ppc_Tensor:$input), collectiveArgs,
                       (ins I64Attr:$split, I64Attr:$concat));
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `` $axes `split` `=` $split `concat` `=` $concat attr-dict
    `:` type($input) `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "::mlir::FlatSymbolRefAttr":$mesh, "::mlir::ArrayAttr":$axes, "int64_t":$split, "int64_t":$concat), [{
      build($_builder, $_state, result, input, mesh, axes, $_builder.getI64IntegerAttr(split),
            $_builder.getI64IntegerAttr(concat));
    }]>
  ];
}

def Ppc_AllSliceOp : Ppc_CollectiveOp<"all_slice",
    [SameOperandsAndResultElementType]> {
  let summary = "keeps this rank's block of a tensor replicated over a group";
  let description = [{
    The inverse of `ppc.all_gather`, without communication: cuts the tensor
    (the same on every rank of the group) into group-size equal blocks along
    `dim` and keeps the block at this rank's position in the group. It turns
    a replicated value into one sharded over `axes`.

    Example:
    ```mlir
    %r = ppc.all_slice %x on @mesh["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
    ```
  }];
  let arguments = !con((ins Ppc_Tensor:$input), collectiveArgs,
                       (ins I64Attr:$dim));
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `` $axes `dim` `=` $dim attr-dict `:` type($input) `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "::mlir::FlatSymbolRefAttr":$mesh, "::mlir::ArrayAttr":$axes, "int64_t":$dim), [{
      build($_builder, $_state, result, input, mesh, axes, $_builder.getI64IntegerAttr(dim));
    }]>
  ];
}

def Ppc_AxisIndexOp : Ppc_CollectiveOp<"axis_index"> {
  let summary = "this rank's position in its group";
  let description = [{
    The position of the executing rank in its group over `axes`: its
    coordinates on those axes, row-major in the listed order (`0` for no
    axes). It is the block this rank holds of a dimension sharded over
    `axes`, as needed to offset indices into a local shard.

    Example:
    ```mlir
    %i = ppc.axis_index on @mesh["tp"] : tensor<i64>
    ```
  }];
  let arguments = collectiveArgs;
  let results = (outs 0DTensorOf<[I64]>:$result);
  let assemblyFormat = "`on` $mesh `` $axes attr-dict `:` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::FlatSymbolRefAttr":$mesh, "::mlir::ArrayAttr":$axes), [{
      build($_builder, $_state, ::mlir::RankedTensorType::get({}, $_builder.getI64Type()),
            mesh, axes);
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// Point-to-point communication (pipeline parallelism)
//
// A pipeline stage exchanges activations and gradients with the stage before
// and after it. The peer of a send or recv is named by its coordinate on one
// mesh axis; the other coordinates are the executing rank's own, so the ranks
// of a stage talk to the ranks at the same data- and tensor-parallel position
// of another stage. Messages between two ranks arrive in the order they were
// sent. These ops are not collectives (no `CollectiveTrait`): only the two
// ranks of a message meet. Both may carry `ppc.value = "<what>"`, naming the
// message for diagnostics.
//===----------------------------------------------------------------------===//

/// A send or recv with rank `peer` on mesh axis `axis` of `mesh`. The mesh,
/// the axis and the peer's range are checked in `verifySymbolUses`.
class Ppc_PointToPointOp<string mnemonic, list<Trait> traits = []>
    : Ppc_Op<mnemonic, !listconcat([
        DeclareOpInterfaceMethods<SymbolUserOpInterface>], traits)> {
  dag peerArgs = (ins FlatSymbolRefAttr:$mesh, StrAttr:$axis, I64Attr:$peer);
  let extraClassDeclaration = [{
    /// The discardable attribute naming the message, for diagnostics.
    static constexpr ::llvm::StringLiteral kValueAttrName = "ppc.value";
    /// What the message is (`ppc.value`), or "" when unnamed.
    ::llvm::StringRef getValueName();
    /// The rank this op exchanges with when `rank` runs it: `rank` with its
    /// coordinate on `axis` replaced by `peer`. None when `mesh` has no such
    /// axis or coordinate, or no such rank.
    std::optional<int64_t> getPeerRank(::ppc::MeshOp mesh, int64_t rank);
    /// The mesh, looked up from the nearest symbol table (null if missing).
    ::ppc::MeshOp getMeshOp();
  }];
}

def Ppc_SendOp : Ppc_PointToPointOp<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "sends a tensor to one rank along a mesh axis";
  let description = [{
    Appends this rank's `input` to the messages from this rank to the rank
    whose coordinate on `axis` is `peer` and whose other coordinates are this
    rank's. The send does not wait for the receiver. It writes to the
    channel between the two ranks, so it is never erased or merged.

    Example:
    ```mlir
    ppc.send %x to @mesh["pp"] 1 : tensor<4x8xf32>
    ppc.send %h to @mesh["pp"] 1 {ppc.value = "layer3.out"} : tensor<4x8xf32>
    ```
  }];
  let arguments = !con((ins Ppc_Tensor:$input), peerArgs);
  let assemblyFormat = [{
    $input `to` $mesh `[` $axis `]` $peer attr-dict `:` type($input)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::FlatSymbolRefAttr":$mesh,
                   "::llvm::StringRef":$axis, "int64_t":$peer), [{
      build($_builder, $_state, input, mesh, $_builder.getStringAttr(axis),
            $_builder.getI64IntegerAttr(peer));
    }]>
  ];
}

def Ppc_RecvOp : Ppc_PointToPointOp<"recv",
    [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "receives the next tensor from one rank along a mesh axis";
  let description = [{
    Waits for the next message from the rank whose coordinate on `axis` is
    `peer` and whose other coordinates are this rank's, and returns it. The
    result type is the shape and element type the message must have. Each
    recv takes a message off the channel, so two recvs are never merged.

    Example:
    ```mlir
    %y = ppc.recv from @mesh["pp"] 0 : tensor<4x8xf32>
    %g = ppc.recv from @mesh["pp"] 1 {ppc.value = "layer3.out.grad"} : tensor<4x8xf32>
    ```
  }];
  let arguments = peerArgs;
  let results = (outs Ppc_Tensor:$result);
  let assemblyFormat = [{
    `from` $mesh `[` $axis `]` $peer attr-dict `:` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::FlatSymbolRefAttr":$mesh,
                   "::llvm::StringRef":$axis, "int64_t":$peer), [{
      build($_builder, $_state, result, mesh, $_builder.getStringAttr(axis),
            $_builder.getI64IntegerAttr(peer));
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// Host and device memory (offload)
//===----------------------------------------------------------------------===//

def Ppc_TransferOp : Ppc_Op<"transfer", [Pure, SameOperandsAndResultType]> {
  let summary = "copies a tensor between device and host memory";
  let description = [{
    The value of `input`, placed in host memory (`to = "host"`) or in device
    memory (`to = "device"`). Its input lives in the other one. ppc-offload
    inserts transfers where a value crosses between the ops the device runs
    and those the host runs (`ppc.place = "host"`): gradients to the host's
    optimizer step, updated parameters back. On CUDA each is an asynchronous
    copy on a stream of its own; on one memory it is a copy.

    Example:
    ```mlir
    %h = ppc.transfer %g to "host" : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Ppc_Tensor:$input, StrAttr:$to);
  let results = (outs Ppc_Tensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = "$input `to` $to attr-dict `:` type($input)";
  let extraClassDeclaration = [{
    /// Whether the result is in host memory (`to = "host"`).
    bool toHost() { return getTo() == "host"; }
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "bool":$toHost), [{
      build($_builder, $_state, input.getType(), input,
            $_builder.getStringAttr(toHost ? "host" : "device"));
    }]>
  ];
}

#endif // PPC_OPS_TD
