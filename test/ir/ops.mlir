// RUN: ppc-opt %s | ppc-opt | FileCheck %s
// RUN: ppc-opt %s --mlir-print-op-generic | ppc-opt | FileCheck %s
// RUN: ppc-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Every op of the ppc dialect round-trips through its custom and its generic
// form: the first two RUN lines check the custom form after a round trip
// through each, the third checks what the generic form looks like.

// Tests that the ONNX name attributes on arguments and results survive.
// CHECK-LABEL: func.func @io_attributes
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3xf32> {ppc.input = "x"},
// CHECK-SAME:     %[[W:.*]]: tensor<3xf32> {ppc.param = "w"},
// CHECK-SAME:     %{{.*}}: tensor<2xi64>)
// CHECK-SAME:    -> (tensor<2x3xf32> {ppc.output = "y"}, tensor<2x3xf32>)
// CHECK:         %[[Y:.*]] = ppc.mul %[[X]], %[[W]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK:         return %[[Y]], %[[X]] : tensor<2x3xf32>, tensor<2x3xf32>
// GENERIC-LABEL: "func.func"
// GENERIC-SAME:    arg_attrs = [{ppc.input = "x"}, {ppc.param = "w"}, {}]
// GENERIC-SAME:    res_attrs = [{ppc.output = "y"}, {}]
// GENERIC-SAME:    sym_name = "io_attributes"
func.func @io_attributes(%x: tensor<2x3xf32> {ppc.input = "x"},
                         %w: tensor<3xf32> {ppc.param = "w"},
                         %unnamed: tensor<2xi64>)
    -> (tensor<2x3xf32> {ppc.output = "y"}, tensor<2x3xf32>) {
  %y = ppc.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y, %x : tensor<2x3xf32>, tensor<2x3xf32>
}

// Tests constants of integer, float, bool and 0-d types, dense and splat.
// CHECK-LABEL: func.func @constant
// CHECK:         ppc.constant dense<[1, -2]> : tensor<2xi64>
// CHECK:         ppc.constant dense<1.500000e+00> : tensor<2x3xf32>
// CHECK:         ppc.constant dense<[true, false]> : tensor<2xi1>
// CHECK:         ppc.constant dense<7> : tensor<i32>
// CHECK:         ppc.constant dense<[1.000000e+00, 2.500000e-01]> : tensor<2xbf16>
// GENERIC-LABEL: sym_name = "constant"
// GENERIC:         "ppc.constant"() <{value = dense<[1, -2]> : tensor<2xi64>}> : () -> tensor<2xi64>
func.func @constant() -> (tensor<2xi64>, tensor<2x3xf32>, tensor<2xi1>, tensor<i32>, tensor<2xbf16>) {
  %0 = ppc.constant dense<[1, -2]> : tensor<2xi64>
  %1 = ppc.constant dense<1.5> : tensor<2x3xf32>
  %2 = ppc.constant dense<[true, false]> : tensor<2xi1>
  %3 = ppc.constant dense<7> : tensor<i32>
  %4 = ppc.constant dense<[1.0, 0.25]> : tensor<2xbf16>
  return %0, %1, %2, %3, %4 : tensor<2xi64>, tensor<2x3xf32>, tensor<2xi1>, tensor<i32>, tensor<2xbf16>
}

// Tests casts between integer, float and bool element types.
// CHECK-LABEL: func.func @cast
// CHECK-SAME:    (%[[I:.*]]: tensor<2x3xi64>, %[[F:.*]]: tensor<2x3xf32>)
// CHECK:         ppc.cast %[[I]] : tensor<2x3xi64> -> tensor<2x3xf32>
// CHECK:         ppc.cast %[[F]] : tensor<2x3xf32> -> tensor<2x3xi1>
// CHECK:         ppc.cast %[[F]] : tensor<2x3xf32> -> tensor<2x3xf16>
func.func @cast(%i: tensor<2x3xi64>, %f: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf16>) {
  %0 = ppc.cast %i : tensor<2x3xi64> -> tensor<2x3xf32>
  %1 = ppc.cast %f : tensor<2x3xf32> -> tensor<2x3xi1>
  %2 = ppc.cast %f : tensor<2x3xf32> -> tensor<2x3xf16>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf16>
}

// Tests every elementwise unary op, on integers where the op allows them.
// CHECK-LABEL: func.func @unary
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[I:.*]]: tensor<4xi32>, %[[B:.*]]: tensor<4xi1>)
// CHECK:         ppc.neg %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.abs %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.sqrt %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.reciprocal %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.log %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.erf %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.tanh %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.sigmoid %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.relu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.sin %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.cos %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.floor %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.ceil %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.sign %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    ppc.neg %[[I]] : tensor<4xi32>
// CHECK-NEXT:    ppc.abs %[[I]] : tensor<4xi32>
// CHECK-NEXT:    ppc.relu %[[I]] : tensor<4xi32>
// CHECK-NEXT:    ppc.sign %[[I]] : tensor<4xi32>
// CHECK-NEXT:    ppc.not %[[B]] : tensor<4xi1>
// GENERIC-LABEL: sym_name = "unary"
// GENERIC:         "ppc.neg"(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// GENERIC:         "ppc.not"(%{{.*}}) : (tensor<4xi1>) -> tensor<4xi1>
func.func @unary(%x: tensor<4x8xf32>, %i: tensor<4xi32>, %b: tensor<4xi1>) {
  %0 = ppc.neg %x : tensor<4x8xf32>
  %1 = ppc.abs %x : tensor<4x8xf32>
  %2 = ppc.sqrt %x : tensor<4x8xf32>
  %3 = ppc.reciprocal %x : tensor<4x8xf32>
  %4 = ppc.exp %x : tensor<4x8xf32>
  %5 = ppc.log %x : tensor<4x8xf32>
  %6 = ppc.erf %x : tensor<4x8xf32>
  %7 = ppc.tanh %x : tensor<4x8xf32>
  %8 = ppc.sigmoid %x : tensor<4x8xf32>
  %9 = ppc.relu %x : tensor<4x8xf32>
  %10 = ppc.sin %x : tensor<4x8xf32>
  %11 = ppc.cos %x : tensor<4x8xf32>
  %12 = ppc.floor %x : tensor<4x8xf32>
  %13 = ppc.ceil %x : tensor<4x8xf32>
  %s0 = ppc.sign %x : tensor<4x8xf32>
  %14 = ppc.neg %i : tensor<4xi32>
  %15 = ppc.abs %i : tensor<4xi32>
  %16 = ppc.relu %i : tensor<4xi32>
  %s1 = ppc.sign %i : tensor<4xi32>
  %17 = ppc.not %b : tensor<4xi1>
  return
}

// Tests the arithmetic broadcast ops with trailing, two-sided and 0-d
// broadcasting, on floats and integers.
// CHECK-LABEL: func.func @broadcast_arithmetic
// CHECK-SAME:    (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[C:.*]]: tensor<4x1xf32>,
// CHECK-SAME:     %[[D:.*]]: tensor<1x5xf32>, %[[S:.*]]: tensor<f32>, %[[I:.*]]: tensor<2x1x3xi64>, %[[J:.*]]: tensor<4x1xi64>)
// CHECK:         ppc.add %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    ppc.sub %[[C]], %[[D]] : (tensor<4x1xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT:    ppc.mul %[[S]], %[[A]] : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    ppc.div %[[A]], %[[S]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:    ppc.pow %[[A]], %[[A]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    ppc.max %[[B]], %[[C]] : (tensor<3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    ppc.min %[[S]], %[[S]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    ppc.add %[[I]], %[[J]] : (tensor<2x1x3xi64>, tensor<4x1xi64>) -> tensor<2x4x3xi64>
// CHECK-NEXT:    ppc.div %[[I]], %[[J]] : (tensor<2x1x3xi64>, tensor<4x1xi64>) -> tensor<2x4x3xi64>
// GENERIC-LABEL: sym_name = "broadcast_arithmetic"
// GENERIC:         "ppc.add"(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// GENERIC:         "ppc.sub"(%{{.*}}, %{{.*}}) : (tensor<4x1xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
func.func @broadcast_arithmetic(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<4x1xf32>,
                                %d: tensor<1x5xf32>, %s: tensor<f32>, %i: tensor<2x1x3xi64>,
                                %j: tensor<4x1xi64>) {
  %0 = ppc.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = ppc.sub %c, %d : (tensor<4x1xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  %2 = ppc.mul %s, %a : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = ppc.div %a, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %4 = ppc.pow %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = ppc.max %b, %c : (tensor<3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  %6 = ppc.min %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %7 = ppc.add %i, %j : (tensor<2x1x3xi64>, tensor<4x1xi64>) -> tensor<2x4x3xi64>
  %8 = ppc.div %i, %j : (tensor<2x1x3xi64>, tensor<4x1xi64>) -> tensor<2x4x3xi64>
  return
}

// Tests that comparisons broadcast and produce i1 tensors, and that equal
// also accepts bool operands.
// CHECK-LABEL: func.func @compare
// CHECK-SAME:    (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[I:.*]]: tensor<4x1xi32>,
// CHECK-SAME:     %[[J:.*]]: tensor<5xi32>, %[[P:.*]]: tensor<2x1xi1>, %[[Q:.*]]: tensor<3xi1>)
// CHECK:         ppc.equal %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT:    ppc.less %[[I]], %[[J]] : (tensor<4x1xi32>, tensor<5xi32>) -> tensor<4x5xi1>
// CHECK-NEXT:    ppc.greater %[[B]], %[[A]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT:    ppc.equal %[[P]], %[[Q]] : (tensor<2x1xi1>, tensor<3xi1>) -> tensor<2x3xi1>
// GENERIC-LABEL: sym_name = "compare"
// GENERIC:         "ppc.less"(%{{.*}}, %{{.*}}) : (tensor<4x1xi32>, tensor<5xi32>) -> tensor<4x5xi1>
func.func @compare(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<4x1xi32>,
                   %j: tensor<5xi32>, %p: tensor<2x1xi1>, %q: tensor<3xi1>) {
  %0 = ppc.equal %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %1 = ppc.less %i, %j : (tensor<4x1xi32>, tensor<5xi32>) -> tensor<4x5xi1>
  %2 = ppc.greater %b, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %3 = ppc.equal %p, %q : (tensor<2x1xi1>, tensor<3xi1>) -> tensor<2x3xi1>
  return
}

// Tests the logical broadcast ops on bool tensors.
// CHECK-LABEL: func.func @logical
// CHECK-SAME:    (%[[P:.*]]: tensor<2x1xi1>, %[[Q:.*]]: tensor<3xi1>)
// CHECK:         ppc.and %[[P]], %[[Q]] : (tensor<2x1xi1>, tensor<3xi1>) -> tensor<2x3xi1>
// CHECK-NEXT:    ppc.or %[[Q]], %[[P]] : (tensor<3xi1>, tensor<2x1xi1>) -> tensor<2x3xi1>
// CHECK-NEXT:    ppc.xor %[[Q]], %[[Q]] : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
func.func @logical(%p: tensor<2x1xi1>, %q: tensor<3xi1>) {
  %0 = ppc.and %p, %q : (tensor<2x1xi1>, tensor<3xi1>) -> tensor<2x3xi1>
  %1 = ppc.or %q, %p : (tensor<3xi1>, tensor<2x1xi1>) -> tensor<2x3xi1>
  %2 = ppc.xor %q, %q : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  return
}

// Tests where with its three operands broadcast together.
// CHECK-LABEL: func.func @where
// CHECK-SAME:    (%[[C:.*]]: tensor<1x1x4x4xi1>, %[[A:.*]]: tensor<2x4x4x4xf32>, %[[B:.*]]: tensor<f32>)
// CHECK:         ppc.where %[[C]], %[[A]], %[[B]] : (tensor<1x1x4x4xi1>, tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT:    ppc.where %[[C]], %[[B]], %[[B]] : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
// GENERIC-LABEL: sym_name = "where"
// GENERIC:         "ppc.where"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<1x1x4x4xi1>, tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
func.func @where(%c: tensor<1x1x4x4xi1>, %a: tensor<2x4x4x4xf32>, %b: tensor<f32>) {
  %0 = ppc.where %c, %a, %b : (tensor<1x1x4x4xi1>, tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
  %1 = ppc.where %c, %b, %b : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  return
}

// Tests matmul with plain, broadcast-batched and integer operands.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME:    (%[[A:.*]]: tensor<2x16x64xf32>, %[[B:.*]]: tensor<64x256xf32>, %[[C:.*]]: tensor<3x1x4x8xf32>,
// CHECK-SAME:     %[[D:.*]]: tensor<5x8x2xf32>, %[[I:.*]]: tensor<2x3xi32>, %[[J:.*]]: tensor<3x2xi32>)
// CHECK:         ppc.matmul %[[A]], %[[B]] : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
// CHECK-NEXT:    ppc.matmul %[[C]], %[[D]] : (tensor<3x1x4x8xf32>, tensor<5x8x2xf32>) -> tensor<3x5x4x2xf32>
// CHECK-NEXT:    ppc.matmul %[[I]], %[[J]] : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
func.func @matmul(%a: tensor<2x16x64xf32>, %b: tensor<64x256xf32>, %c: tensor<3x1x4x8xf32>,
                  %d: tensor<5x8x2xf32>, %i: tensor<2x3xi32>, %j: tensor<3x2xi32>) {
  %0 = ppc.matmul %a, %b : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  %1 = ppc.matmul %c, %d : (tensor<3x1x4x8xf32>, tensor<5x8x2xf32>) -> tensor<3x5x4x2xf32>
  %2 = ppc.matmul %i, %j : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
  return
}

// Tests einsum with two operands, one operand (a transpose) and a full
// reduction to a 0-d tensor.
// CHECK-LABEL: func.func @einsum
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x4x6x16xf32>, %[[M:.*]]: tensor<3x5xf32>)
// CHECK:         ppc.einsum "bhqd,bhkd->bhqk"(%[[Q]], %[[K]]) : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32>
// CHECK-NEXT:    ppc.einsum "ij->ji"(%[[M]]) : (tensor<3x5xf32>) -> tensor<5x3xf32>
// CHECK-NEXT:    ppc.einsum "ij->"(%[[M]]) : (tensor<3x5xf32>) -> tensor<f32>
// GENERIC-LABEL: sym_name = "einsum"
// GENERIC:         "ppc.einsum"(%{{.*}}, %{{.*}}) <{equation = "bhqd,bhkd->bhqk"}>
func.func @einsum(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %m: tensor<3x5xf32>) {
  %0 = ppc.einsum "bhqd,bhkd->bhqk" (%q, %k) : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32>
  %1 = ppc.einsum "ij->ji" (%m) : (tensor<3x5xf32>) -> tensor<5x3xf32>
  %2 = ppc.einsum "ij->" (%m) : (tensor<3x5xf32>) -> tensor<f32>
  return
}

// Tests every reduction, with and without keepdims, over one, several and no
// axes.
// CHECK-LABEL: func.func @reduce
// CHECK-SAME:    (%[[X:.*]]: tensor<2x16x64xf32>, %[[I:.*]]: tensor<3x4xi64>)
// CHECK:         ppc.reduce_sum %[[X]] axes = [2] keepdims = true : (tensor<2x16x64xf32>) -> tensor<2x16x1xf32>
// CHECK-NEXT:    ppc.reduce_mean %[[X]] axes = [0, 2] keepdims = false : (tensor<2x16x64xf32>) -> tensor<16xf32>
// CHECK-NEXT:    ppc.reduce_max %[[X]] axes = [0, 1, 2] keepdims = false : (tensor<2x16x64xf32>) -> tensor<f32>
// CHECK-NEXT:    ppc.reduce_min %[[X]] axes = [] keepdims = false : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
// CHECK-NEXT:    ppc.reduce_prod %[[I]] axes = [1] keepdims = true : (tensor<3x4xi64>) -> tensor<3x1xi64>
// GENERIC-LABEL: sym_name = "reduce"
// GENERIC:         "ppc.reduce_sum"(%{{.*}}) <{axes = array<i64: 2>, keepdims = true}> : (tensor<2x16x64xf32>) -> tensor<2x16x1xf32>
func.func @reduce(%x: tensor<2x16x64xf32>, %i: tensor<3x4xi64>) {
  %0 = ppc.reduce_sum %x axes = [2] keepdims = true : (tensor<2x16x64xf32>) -> tensor<2x16x1xf32>
  %1 = ppc.reduce_mean %x axes = [0, 2] keepdims = false : (tensor<2x16x64xf32>) -> tensor<16xf32>
  %2 = ppc.reduce_max %x axes = [0, 1, 2] keepdims = false : (tensor<2x16x64xf32>) -> tensor<f32>
  %3 = ppc.reduce_min %x axes = [] keepdims = false : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %4 = ppc.reduce_prod %i axes = [1] keepdims = true : (tensor<3x4xi64>) -> tensor<3x1xi64>
  return
}

// Tests softmax and log_softmax on the last and on an inner axis.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8x8xf32>)
// CHECK:         ppc.softmax %[[X]] axis = 3 : tensor<2x4x8x8xf32>
// CHECK-NEXT:    ppc.log_softmax %[[X]] axis = 1 : tensor<2x4x8x8xf32>
// GENERIC-LABEL: sym_name = "softmax"
// GENERIC:         "ppc.softmax"(%{{.*}}) <{axis = 3 : i64}> : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
func.func @softmax(%x: tensor<2x4x8x8xf32>) {
  %0 = ppc.softmax %x axis = 3 : tensor<2x4x8x8xf32>
  %1 = ppc.log_softmax %x axis = 1 : tensor<2x4x8x8xf32>
  return
}

// Tests log_sum_exp on the last and on an inner axis.
// CHECK-LABEL: func.func @log_sum_exp
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>)
// CHECK:         ppc.log_sum_exp %[[X]] axis = 2 : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
// CHECK-NEXT:    ppc.log_sum_exp %[[X]] axis = 1 : (tensor<2x4x8xf32>) -> tensor<2x1x8xf32>
// GENERIC-LABEL: sym_name = "log_sum_exp"
// GENERIC:         "ppc.log_sum_exp"(%{{.*}}) <{axis = 2 : i64}> : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
func.func @log_sum_exp(%x: tensor<2x4x8xf32>) {
  %0 = ppc.log_sum_exp %x axis = 2 : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %1 = ppc.log_sum_exp %x axis = 1 : (tensor<2x4x8xf32>) -> tensor<2x1x8xf32>
  return
}

// Tests rotary and its transpose, with tables broadcast over the heads.
// CHECK-LABEL: func.func @rotary
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8x16xbf16>, %[[C:.*]]: tensor<8x16xbf16>, %[[S:.*]]: tensor<2x1x8x16xbf16>)
// CHECK:         ppc.rotary %[[X]], %[[C]], %[[S]] : (tensor<2x4x8x16xbf16>, tensor<8x16xbf16>, tensor<2x1x8x16xbf16>) -> tensor<2x4x8x16xbf16>
// CHECK-NEXT:    ppc.rotary %[[X]], %[[C]], %[[S]] transposed : (tensor<2x4x8x16xbf16>, tensor<8x16xbf16>, tensor<2x1x8x16xbf16>) -> tensor<2x4x8x16xbf16>
// GENERIC-LABEL: sym_name = "rotary"
// GENERIC:         "ppc.rotary"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x4x8x16xbf16>, tensor<8x16xbf16>, tensor<2x1x8x16xbf16>) -> tensor<2x4x8x16xbf16>
// GENERIC:         "ppc.rotary"(%{{.*}}, %{{.*}}, %{{.*}}) <{transposed}> : (tensor<2x4x8x16xbf16>, tensor<8x16xbf16>, tensor<2x1x8x16xbf16>) -> tensor<2x4x8x16xbf16>
func.func @rotary(%x: tensor<2x4x8x16xbf16>, %c: tensor<8x16xbf16>, %s: tensor<2x1x8x16xbf16>) {
  %0 = ppc.rotary %x, %c, %s : (tensor<2x4x8x16xbf16>, tensor<8x16xbf16>, tensor<2x1x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  %1 = ppc.rotary %x, %c, %s transposed : (tensor<2x4x8x16xbf16>, tensor<8x16xbf16>, tensor<2x1x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  return
}

// Tests layer_norm with and without bias, and with a scale that broadcasts
// to the normalized shape.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME:    (%[[X:.*]]: tensor<2x16x64xf32>, %[[G:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>, %[[H:.*]]: tensor<1x64xf32>)
// CHECK:         ppc.layer_norm %[[X]], %[[G]], %[[B]] axis = 2 epsilon = 1.000000e-05 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
// CHECK-NEXT:    ppc.layer_norm %[[X]], %[[G]] axis = 2 epsilon = 1.000000e-05 : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
// CHECK-NEXT:    ppc.layer_norm %[[X]], %[[H]] axis = 1 epsilon = 2.500000e-01 : (tensor<2x16x64xf32>, tensor<1x64xf32>) -> tensor<2x16x64xf32>
// GENERIC-LABEL: sym_name = "layer_norm"
// GENERIC:         "ppc.layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}) <{axis = 2 : i64, epsilon = 1.000000e-05 : f64}>
// GENERIC:         "ppc.layer_norm"(%{{.*}}, %{{.*}}) <{axis = 2 : i64, epsilon = 1.000000e-05 : f64}>
func.func @layer_norm(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %h: tensor<1x64xf32>) {
  %0 = ppc.layer_norm %x, %g, %b axis = 2 epsilon = 1.0e-5 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %1 = ppc.layer_norm %x, %g axis = 2 epsilon = 1.0e-5 : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %2 = ppc.layer_norm %x, %h axis = 1 epsilon = 0.25 : (tensor<2x16x64xf32>, tensor<1x64xf32>) -> tensor<2x16x64xf32>
  return
}

// Tests layer_norm_grad: the input's gradient and the rows' statistics, f32
// for bf16 inputs.
// CHECK-LABEL: func.func @layer_norm_grad
// CHECK:         ppc.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} axis = 1 epsilon = 1.000000e-05 : (tensor<2x16x64xbf16>, tensor<1x64xbf16>, tensor<2x16x64xbf16>) -> (tensor<2x16x64xbf16>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
func.func @layer_norm_grad(%x: tensor<2x16x64xbf16>, %h: tensor<1x64xbf16>, %dy: tensor<2x16x64xbf16>) {
  %0:3 = ppc.layer_norm_grad %x, %h, %dy axis = 1 epsilon = 1.0e-5 : (tensor<2x16x64xbf16>, tensor<1x64xbf16>, tensor<2x16x64xbf16>) -> (tensor<2x16x64xbf16>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  return
}

// Tests rms_norm with a whole and a broadcast scale.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME:    (%[[X:.*]]: tensor<2x16x64xf32>, %[[G:.*]]: tensor<64xf32>, %[[H:.*]]: tensor<1x64xf32>)
// CHECK:         ppc.rms_norm %[[X]], %[[G]] axis = 2 epsilon = 9.9999999999999995E-7 : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
// CHECK-NEXT:    ppc.rms_norm %[[X]], %[[H]] axis = 1 epsilon = 2.500000e-01 : (tensor<2x16x64xf32>, tensor<1x64xf32>) -> tensor<2x16x64xf32>
// GENERIC-LABEL: sym_name = "rms_norm"
// GENERIC:         "ppc.rms_norm"(%{{.*}}, %{{.*}}) <{axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64}>
func.func @rms_norm(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %h: tensor<1x64xf32>) {
  %0 = ppc.rms_norm %x, %g axis = 2 epsilon = 1.0e-6 : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %1 = ppc.rms_norm %x, %h axis = 1 epsilon = 0.25 : (tensor<2x16x64xf32>, tensor<1x64xf32>) -> tensor<2x16x64xf32>
  return
}

// Tests rms_norm_grad: the input's gradient and each row's rstd, f32 for
// bf16.
// CHECK-LABEL: func.func @rms_norm_grad
// CHECK:         ppc.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} axis = 2 epsilon = 9.9999999999999995E-7 : (tensor<2x16x64xbf16>, tensor<64xbf16>, tensor<2x16x64xbf16>) -> (tensor<2x16x64xbf16>, tensor<2x16x1xf32>)
func.func @rms_norm_grad(%x: tensor<2x16x64xbf16>, %g: tensor<64xbf16>, %dy: tensor<2x16x64xbf16>) {
  %0:2 = ppc.rms_norm_grad %x, %g, %dy axis = 2 epsilon = 1.0e-6 : (tensor<2x16x64xbf16>, tensor<64xbf16>, tensor<2x16x64xbf16>) -> (tensor<2x16x64xbf16>, tensor<2x16x1xf32>)
  return
}

// Tests attention with and without bias and causal, and its gradient.
// CHECK-LABEL: func.func @attention
// CHECK:         %[[O:.*]], %[[L:.*]] = ppc.attention %[[Q:.*]], %[[K:.*]], %[[V:.*]] scale = 1.250000e-01 causal : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT:    ppc.attention %[[Q]], %[[K]], %[[V]] bias %{{.*}} scale = 5.000000e-01 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>, tensor<2x1x1x8xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT:    ppc.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[L]], %[[O]] scale = 1.250000e-01 causal : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8x32xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>)
// CHECK-NEXT:    ppc.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 : (tensor<3x5x2xbf16>, tensor<3x7x2xbf16>, tensor<3x7x4xbf16>) -> (tensor<3x5x4xbf16>, tensor<3x5xf32>)
// GENERIC-LABEL: sym_name = "attention"
// GENERIC:         "ppc.attention"(%{{.*}}, %{{.*}}, %{{.*}}) <{causal, scale = 1.250000e-01 : f64}>
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x32xf32>, %mask: tensor<2x1x1x8xf32>,
                     %a: tensor<3x5x2xbf16>, %b: tensor<3x7x2xbf16>, %c: tensor<3x7x4xbf16>) {
  %o, %lse = ppc.attention %q, %k, %v scale = 0.125 causal : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
  %o2, %lse2 = ppc.attention %q, %k, %v bias %mask scale = 0.5 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>, tensor<2x1x1x8xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
  %dq, %dk, %dv = ppc.attention_grad %q, %k, %v, %o, %lse, %o scale = 0.125 causal : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8x32xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>)
  %o3, %lse3 = ppc.attention %a, %b, %c scale = 1.0 : (tensor<3x5x2xbf16>, tensor<3x7x2xbf16>, tensor<3x7x4xbf16>) -> (tensor<3x5x4xbf16>, tensor<3x5xf32>)
  return
}

// Tests reshape, including to and from 0-d tensors.
// CHECK-LABEL: func.func @reshape
// CHECK-SAME:    (%[[X:.*]]: tensor<2x16x64xf32>, %[[S:.*]]: tensor<i64>)
// CHECK:         ppc.reshape %[[X]] : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
// CHECK-NEXT:    ppc.reshape %[[S]] : tensor<i64> -> tensor<1x1xi64>
// CHECK-NEXT:    ppc.reshape %{{.*}} : tensor<1x1xi64> -> tensor<i64>
func.func @reshape(%x: tensor<2x16x64xf32>, %s: tensor<i64>) {
  %0 = ppc.reshape %x : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  %1 = ppc.reshape %s : tensor<i64> -> tensor<1x1xi64>
  %2 = ppc.reshape %1 : tensor<1x1xi64> -> tensor<i64>
  return
}

// Tests transpose with a permutation that is not its own inverse.
// CHECK-LABEL: func.func @transpose
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK:         ppc.transpose %[[X]] perm = [1, 2, 0] : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// GENERIC-LABEL: sym_name = "transpose"
// GENERIC:         "ppc.transpose"(%{{.*}}) <{perm = array<i64: 1, 2, 0>}> : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
func.func @transpose(%x: tensor<2x3x4xf32>) {
  %0 = ppc.transpose %x perm = [1, 2, 0] : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  return
}

// Tests concat of three operands along an inner axis and of one operand.
// CHECK-LABEL: func.func @concat
// CHECK-SAME:    (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<2x5xf32>, %[[C:.*]]: tensor<2x1xf32>)
// CHECK:         ppc.concat %[[A]], %[[B]], %[[C]] axis = 1 : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x9xf32>
// CHECK-NEXT:    ppc.concat %[[A]] axis = 0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<2x1xf32>) {
  %0 = ppc.concat %a, %b, %c axis = 1 : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x9xf32>
  %1 = ppc.concat %a axis = 0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// Tests slice with forward, strided, full-reverse (limit -1) and empty
// ranges.
// CHECK-LABEL: func.func @slice
// CHECK-SAME:    (%[[X:.*]]: tensor<2x192xf32>, %[[Y:.*]]: tensor<6x7xf32>)
// CHECK:         ppc.slice %[[X]] starts = [0, 64] limits = [2, 128] steps = [1, 1] : (tensor<2x192xf32>) -> tensor<2x64xf32>
// CHECK-NEXT:    ppc.slice %[[Y]] starts = [5, 0] limits = [-1, 7] steps = [-2, 3] : (tensor<6x7xf32>) -> tensor<3x3xf32>
// CHECK-NEXT:    ppc.slice %[[Y]] starts = [5, 6] limits = [-1, 2] steps = [-1, -1] : (tensor<6x7xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    ppc.slice %[[Y]] starts = [3, 2] limits = [3, 2] steps = [1, -1] : (tensor<6x7xf32>) -> tensor<0x0xf32>
// GENERIC-LABEL: sym_name = "slice"
// GENERIC:         "ppc.slice"(%{{.*}}) <{limits = array<i64: -1, 7>, starts = array<i64: 5, 0>, steps = array<i64: -2, 3>}>
func.func @slice(%x: tensor<2x192xf32>, %y: tensor<6x7xf32>) {
  %0 = ppc.slice %x starts = [0, 64] limits = [2, 128] steps = [1, 1] : (tensor<2x192xf32>) -> tensor<2x64xf32>
  %1 = ppc.slice %y starts = [5, 0] limits = [-1, 7] steps = [-2, 3] : (tensor<6x7xf32>) -> tensor<3x3xf32>
  %2 = ppc.slice %y starts = [5, 6] limits = [-1, 2] steps = [-1, -1] : (tensor<6x7xf32>) -> tensor<6x4xf32>
  %3 = ppc.slice %y starts = [3, 2] limits = [3, 2] steps = [1, -1] : (tensor<6x7xf32>) -> tensor<0x0xf32>
  return
}

// Tests gather on axis 0 (an embedding lookup) and on an inner axis with
// i32 and 0-d indices.
// CHECK-LABEL: func.func @gather
// CHECK-SAME:    (%[[W:.*]]: tensor<256x64xf32>, %[[IDS:.*]]: tensor<2x16xi64>, %[[J:.*]]: tensor<3xi32>, %[[S:.*]]: tensor<i64>)
// CHECK:         ppc.gather %[[W]][%[[IDS]]] axis = 0 : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
// CHECK-NEXT:    ppc.gather %[[W]][%[[J]]] axis = 1 : (tensor<256x64xf32>, tensor<3xi32>) -> tensor<256x3xf32>
// CHECK-NEXT:    ppc.gather %[[W]][%[[S]]] axis = 0 : (tensor<256x64xf32>, tensor<i64>) -> tensor<64xf32>
// GENERIC-LABEL: sym_name = "gather"
// GENERIC:         "ppc.gather"(%{{.*}}, %{{.*}}) <{axis = 0 : i64}> : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
func.func @gather(%w: tensor<256x64xf32>, %ids: tensor<2x16xi64>, %j: tensor<3xi32>, %s: tensor<i64>) {
  %0 = ppc.gather %w[%ids] axis = 0 : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  %1 = ppc.gather %w[%j] axis = 1 : (tensor<256x64xf32>, tensor<3xi32>) -> tensor<256x3xf32>
  %2 = ppc.gather %w[%s] axis = 0 : (tensor<256x64xf32>, tensor<i64>) -> tensor<64xf32>
  return
}

// Tests expand of size-1 dimensions and to a higher rank.
// CHECK-LABEL: func.func @expand
// CHECK-SAME:    (%[[X:.*]]: tensor<1x16xi64>, %[[Y:.*]]: tensor<3x1xf32>)
// CHECK:         ppc.expand %[[X]] : tensor<1x16xi64> -> tensor<2x16xi64>
// CHECK-NEXT:    ppc.expand %[[Y]] : tensor<3x1xf32> -> tensor<2x3x4xf32>
func.func @expand(%x: tensor<1x16xi64>, %y: tensor<3x1xf32>) {
  %0 = ppc.expand %x : tensor<1x16xi64> -> tensor<2x16xi64>
  %1 = ppc.expand %y : tensor<3x1xf32> -> tensor<2x3x4xf32>
  return
}

// Tests trilu in both directions, with zero, positive and negative k, on a
// batched and a bool operand.
// CHECK-LABEL: func.func @trilu
// CHECK-SAME:    (%[[X:.*]]: tensor<16x16xf32>, %[[B:.*]]: tensor<2x4x5xi1>)
// CHECK:         ppc.trilu %[[X]] upper = false k = 0 : tensor<16x16xf32>
// CHECK-NEXT:    ppc.trilu %[[X]] upper = true k = 1 : tensor<16x16xf32>
// CHECK-NEXT:    ppc.trilu %[[B]] upper = false k = -2 : tensor<2x4x5xi1>
// GENERIC-LABEL: sym_name = "trilu"
// GENERIC:         "ppc.trilu"(%{{.*}}) <{k = 1 : i64, upper = true}> : (tensor<16x16xf32>) -> tensor<16x16xf32>
func.func @trilu(%x: tensor<16x16xf32>, %b: tensor<2x4x5xi1>) {
  %0 = ppc.trilu %x upper = false k = 0 : tensor<16x16xf32>
  %1 = ppc.trilu %x upper = true k = 1 : tensor<16x16xf32>
  %2 = ppc.trilu %b upper = false k = -2 : tensor<2x4x5xi1>
  return
}

// Tests arg_max, largest and smallest, first and last of equal elements.
// CHECK-LABEL: func.func @arg_max
// CHECK:         ppc.arg_max %{{.*}} axis = 1 largest = true last = false : tensor<4x8xf32> -> tensor<4x1xi64>
// CHECK-NEXT:    ppc.arg_max %{{.*}} axis = 0 largest = false last = true : tensor<2x5xi32> -> tensor<1x5xi64>
func.func @arg_max(%x: tensor<4x8xf32>, %y: tensor<2x5xi32>) {
  %0 = ppc.arg_max %x axis = 1 largest = true last = false : tensor<4x8xf32> -> tensor<4x1xi64>
  %1 = ppc.arg_max %y axis = 0 largest = false last = true : tensor<2x5xi32> -> tensor<1x5xi64>
  return
}

// Tests top_k_indices, largest and smallest, along the last and a middle axis.
// CHECK-LABEL: func.func @top_k_indices
// CHECK:         ppc.top_k_indices %{{.*}} axis = 1 k = 2 largest = true : tensor<64x8xf32> -> tensor<64x2xi64>
// CHECK-NEXT:    ppc.top_k_indices %{{.*}} axis = 1 k = 1 largest = false : tensor<2x5x3xi32> -> tensor<2x1x3xi64>
// GENERIC-LABEL: sym_name = "top_k_indices"
// GENERIC:         "ppc.top_k_indices"(%{{.*}}) <{axis = 1 : i64, k = 2 : i64, largest = true}> : (tensor<64x8xf32>) -> tensor<64x2xi64>
func.func @top_k_indices(%x: tensor<64x8xf32>, %y: tensor<2x5x3xi32>) {
  %0 = ppc.top_k_indices %x axis = 1 k = 2 largest = true : tensor<64x8xf32> -> tensor<64x2xi64>
  %1 = ppc.top_k_indices %y axis = 1 k = 1 largest = false : tensor<2x5x3xi32> -> tensor<2x1x3xi64>
  return
}

// Tests cumsum in its four forms, on integers and floats.
// CHECK-LABEL: func.func @cumsum
// CHECK-SAME:    (%[[I:.*]]: tensor<4x16xi64>, %[[F:.*]]: tensor<2x3x5xf32>)
// CHECK:         ppc.cumsum %[[I]] axis = 1 exclusive = false reverse = false : tensor<4x16xi64>
// CHECK-NEXT:    ppc.cumsum %[[F]] axis = 2 exclusive = true reverse = true : tensor<2x3x5xf32>
// GENERIC-LABEL: sym_name = "cumsum"
// GENERIC:         "ppc.cumsum"(%{{.*}}) <{axis = 2 : i64, exclusive = true, reverse = true}> : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
func.func @cumsum(%i: tensor<4x16xi64>, %f: tensor<2x3x5xf32>) {
  %0 = ppc.cumsum %i axis = 1 exclusive = false reverse = false : tensor<4x16xi64>
  %1 = ppc.cumsum %f axis = 2 exclusive = true reverse = true : tensor<2x3x5xf32>
  return
}

// Tests nll_loss in each reduction mode, with and without weight and
// ignore_index, and with a spatial dimension.
// CHECK-LABEL: func.func @nll_loss
// CHECK-SAME:    (%[[LP:.*]]: tensor<32x256xf32>, %[[T:.*]]: tensor<32xi64>, %[[W:.*]]: tensor<256xf32>,
// CHECK-SAME:     %[[LP3:.*]]: tensor<4x10x7xf32>, %[[T3:.*]]: tensor<4x7xi32>)
// CHECK:         ppc.nll_loss %[[LP]], %[[T]] mean : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
// CHECK-NEXT:    ppc.nll_loss %[[LP]], %[[T]] sum : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
// CHECK-NEXT:    ppc.nll_loss %[[LP]], %[[T]] none : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<32xf32>
// CHECK-NEXT:    ppc.nll_loss %[[LP]], %[[T]] mean ignore_index = -100 : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
// CHECK-NEXT:    ppc.nll_loss %[[LP]], %[[T]], %[[W]] sum : (tensor<32x256xf32>, tensor<32xi64>, tensor<256xf32>) -> tensor<f32>
// CHECK-NEXT:    ppc.nll_loss %[[LP]], %[[T]], %[[W]] mean ignore_index = 0 : (tensor<32x256xf32>, tensor<32xi64>, tensor<256xf32>) -> tensor<f32>
// CHECK-NEXT:    ppc.nll_loss %[[LP3]], %[[T3]] none ignore_index = 3 : (tensor<4x10x7xf32>, tensor<4x7xi32>) -> tensor<4x7xf32>
// GENERIC-LABEL: sym_name = "nll_loss"
// GENERIC:         "ppc.nll_loss"(%{{.*}}, %{{.*}}) <{reduction = 2 : i32}> : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
// GENERIC:         "ppc.nll_loss"(%{{.*}}, %{{.*}}) <{reduction = 1 : i32}>
// GENERIC:         "ppc.nll_loss"(%{{.*}}, %{{.*}}) <{reduction = 0 : i32}>
// GENERIC:         "ppc.nll_loss"(%{{.*}}, %{{.*}}) <{ignore_index = -100 : i64, reduction = 2 : i32}>
// GENERIC:         "ppc.nll_loss"(%{{.*}}, %{{.*}}, %{{.*}}) <{reduction = 1 : i32}>
func.func @nll_loss(%lp: tensor<32x256xf32>, %t: tensor<32xi64>, %w: tensor<256xf32>,
                    %lp3: tensor<4x10x7xf32>, %t3: tensor<4x7xi32>) {
  %0 = ppc.nll_loss %lp, %t mean : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
  %1 = ppc.nll_loss %lp, %t sum : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
  %2 = ppc.nll_loss %lp, %t none : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<32xf32>
  %3 = ppc.nll_loss %lp, %t mean ignore_index = -100 : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
  %4 = ppc.nll_loss %lp, %t, %w sum : (tensor<32x256xf32>, tensor<32xi64>, tensor<256xf32>) -> tensor<f32>
  %5 = ppc.nll_loss %lp, %t, %w mean ignore_index = 0 : (tensor<32x256xf32>, tensor<32xi64>, tensor<256xf32>) -> tensor<f32>
  %6 = ppc.nll_loss %lp3, %t3 none ignore_index = 3 : (tensor<4x10x7xf32>, tensor<4x7xi32>) -> tensor<4x7xf32>
  return
}

// Tests insert_slice with a forward, a strided backward and an empty region.
// CHECK-LABEL: func.func @insert_slice
// CHECK-SAME:    (%[[S:.*]]: tensor<2x64xf32>, %[[D:.*]]: tensor<2x192xf32>, %[[T:.*]]: tensor<3x3xi64>, %[[E:.*]]: tensor<6x7xi64>)
// CHECK:         ppc.insert_slice %[[S]] into %[[D]] starts = [0, 64] limits = [2, 128] steps = [1, 1] : (tensor<2x64xf32>, tensor<2x192xf32>) -> tensor<2x192xf32>
// CHECK-NEXT:    ppc.insert_slice %[[T]] into %[[E]] starts = [5, 0] limits = [-1, 7] steps = [-2, 3] : (tensor<3x3xi64>, tensor<6x7xi64>) -> tensor<6x7xi64>
// CHECK-NEXT:    %[[Z:.*]] = ppc.constant dense<0> : tensor<0x0xi64>
// CHECK-NEXT:    ppc.insert_slice %[[Z]] into %[[E]] starts = [3, 2] limits = [3, 2] steps = [1, -1] : (tensor<0x0xi64>, tensor<6x7xi64>) -> tensor<6x7xi64>
// GENERIC-LABEL: sym_name = "insert_slice"
// GENERIC:         "ppc.insert_slice"(%{{.*}}, %{{.*}}) <{limits = array<i64: 2, 128>, starts = array<i64: 0, 64>, steps = array<i64: 1, 1>}> : (tensor<2x64xf32>, tensor<2x192xf32>) -> tensor<2x192xf32>
func.func @insert_slice(%s: tensor<2x64xf32>, %d: tensor<2x192xf32>, %t: tensor<3x3xi64>, %e: tensor<6x7xi64>) {
  %0 = ppc.insert_slice %s into %d starts = [0, 64] limits = [2, 128] steps = [1, 1] : (tensor<2x64xf32>, tensor<2x192xf32>) -> tensor<2x192xf32>
  %1 = ppc.insert_slice %t into %e starts = [5, 0] limits = [-1, 7] steps = [-2, 3] : (tensor<3x3xi64>, tensor<6x7xi64>) -> tensor<6x7xi64>
  %z = ppc.constant dense<0> : tensor<0x0xi64>
  %2 = ppc.insert_slice %z into %e starts = [3, 2] limits = [3, 2] steps = [1, -1] : (tensor<0x0xi64>, tensor<6x7xi64>) -> tensor<6x7xi64>
  return
}

// Tests scatter_add on axis 0 (the adjoint of an embedding lookup), on an
// inner axis with i32 indices, and with a scalar index.
// CHECK-LABEL: func.func @scatter_add
// CHECK-SAME:    (%[[G:.*]]: tensor<2x16x64xf32>, %[[IDS:.*]]: tensor<2x16xi64>, %[[H:.*]]: tensor<256x3xf32>, %[[J:.*]]: tensor<3xi32>, %[[R:.*]]: tensor<64xi64>, %[[S:.*]]: tensor<i64>)
// CHECK:         ppc.scatter_add %[[G]][%[[IDS]]] axis = 0 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<256x64xf32>
// CHECK-NEXT:    ppc.scatter_add %[[H]][%[[J]]] axis = 1 : (tensor<256x3xf32>, tensor<3xi32>) -> tensor<256x64xf32>
// CHECK-NEXT:    ppc.scatter_add %[[R]][%[[S]]] axis = 0 : (tensor<64xi64>, tensor<i64>) -> tensor<256x64xi64>
// GENERIC-LABEL: sym_name = "scatter_add"
// GENERIC:         "ppc.scatter_add"(%{{.*}}, %{{.*}}) <{axis = 0 : i64}> : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<256x64xf32>
func.func @scatter_add(%g: tensor<2x16x64xf32>, %ids: tensor<2x16xi64>, %h: tensor<256x3xf32>, %j: tensor<3xi32>,
                       %r: tensor<64xi64>, %s: tensor<i64>) {
  %0 = ppc.scatter_add %g[%ids] axis = 0 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<256x64xf32>
  %1 = ppc.scatter_add %h[%j] axis = 1 : (tensor<256x3xf32>, tensor<3xi32>) -> tensor<256x64xf32>
  %2 = ppc.scatter_add %r[%s] axis = 0 : (tensor<64xi64>, tensor<i64>) -> tensor<256x64xi64>
  return
}

// Tests point-to-point messages along a mesh axis: sends with and without
// the name of the value they carry, and the matching receives.
// CHECK:       ppc.mesh @pipe axes = ["pp", "dp"] shape = [2, 2]
// CHECK-LABEL: func.func @send_recv
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>, %[[H:.*]]: tensor<2x3xbf16>)
// CHECK-NEXT:    ppc.send %[[X]] to @pipe["pp"] 1 : tensor<4xf32>
// CHECK-NEXT:    ppc.send %[[H]] to @pipe["dp"] 0 {ppc.value = "h"} : tensor<2x3xbf16>
// CHECK-NEXT:    %{{.*}} = ppc.recv from @pipe["pp"] 0 : tensor<4xf32>
// CHECK-NEXT:    %{{.*}} = ppc.recv from @pipe["dp"] 1 {ppc.value = "h"} : tensor<2x3xbf16>
// GENERIC:       "ppc.mesh"() <{axes = ["pp", "dp"], shape = array<i64: 2, 2>, sym_name = "pipe"}> : () -> ()
// GENERIC-LABEL: sym_name = "send_recv"
// GENERIC:         "ppc.send"(%{{.*}}) <{axis = "pp", mesh = @pipe, peer = 1 : i64}> : (tensor<4xf32>) -> ()
// GENERIC:         "ppc.send"(%{{.*}}) <{axis = "dp", mesh = @pipe, peer = 0 : i64}> {ppc.value = "h"} : (tensor<2x3xbf16>) -> ()
// GENERIC:         "ppc.recv"() <{axis = "pp", mesh = @pipe, peer = 0 : i64}> : () -> tensor<4xf32>
// GENERIC:         "ppc.recv"() <{axis = "dp", mesh = @pipe, peer = 1 : i64}> {ppc.value = "h"} : () -> tensor<2x3xbf16>
ppc.mesh @pipe axes = ["pp", "dp"] shape = [2, 2]
func.func @send_recv(%x: tensor<4xf32>, %h: tensor<2x3xbf16>) {
  ppc.send %x to @pipe["pp"] 1 : tensor<4xf32>
  ppc.send %h to @pipe["dp"] 0 {ppc.value = "h"} : tensor<2x3xbf16>
  %y = ppc.recv from @pipe["pp"] 0 : tensor<4xf32>
  %g = ppc.recv from @pipe["dp"] 1 {ppc.value = "h"} : tensor<2x3xbf16>
  return
}
