// RUN: ppc-opt %s | ppc-opt | FileCheck %s
// RUN: ppc-opt %s --mlir-print-op-generic | ppc-opt | FileCheck %s
// RUN: ppc-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// The mesh, the sharding attribute and every collective round-trip through
// their custom and generic forms: the first two RUN lines check the custom
// form after a round trip through each, the third the generic form.

// Tests that a mesh lists its axes major to minor with their sizes.
// CHECK:       ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// CHECK:       ppc.mesh @square axes = ["x", "y"] shape = [2, 2]
// GENERIC:     "ppc.mesh"() <{axes = ["pp", "dp", "tp"], shape = array<i64: 1, 2, 4>, sym_name = "mesh"}> : () -> ()
ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
ppc.mesh @square axes = ["x", "y"] shape = [2, 2]

// Tests shardings on arguments and results: split dimensions (one and two
// axes), replicated dimensions, partial sums and quoted axis names.
// CHECK-LABEL: func.func @function_shardings
// CHECK-SAME:    tensor<8x4x16xf32> {ppc.param = "w", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}dp], [], [tp]]>}
// CHECK-SAME:    tensor<16xf32> {ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}dp, tp]]>}
// CHECK-SAME:    tensor<f32> {ppc.sharding = #ppc.sharding<@mesh, []>}
// CHECK-SAME:    -> (tensor<8x4xf32> {ppc.output = "y", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []], partial = [tp]>})
// GENERIC-LABEL: "func.func"
// GENERIC-SAME:    arg_attrs = [{ppc.param = "w", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}dp], [], [tp]]>}
// GENERIC-SAME:    res_attrs = [{ppc.output = "y", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []], partial = [tp]>}]
func.func @function_shardings(
    %w: tensor<8x4x16xf32> {ppc.param = "w", ppc.sharding = #ppc.sharding<@mesh, [[dp], [], [tp]]>},
    %b: tensor<16xf32> {ppc.sharding = #ppc.sharding<@mesh, [["dp", tp]]>},
    %s: tensor<f32> {ppc.sharding = #ppc.sharding<@mesh, []>},
    %y: tensor<8x4xf32>)
    -> (tensor<8x4xf32> {ppc.output = "y", ppc.sharding = #ppc.sharding<@mesh, [[], []], partial = [tp]>}) {
  return %y : tensor<8x4xf32>
}

// Tests the per-result shardings of an op.
// CHECK-LABEL: func.func @op_shardings
// CHECK:         ppc.matmul %{{.*}}, %{{.*}} {ppc.shardings = [#ppc.sharding<@mesh, {{\[\[}}dp], []], partial = [tp]>]}
// GENERIC-LABEL: sym_name = "op_shardings"
// GENERIC:         "ppc.matmul"(%{{.*}}, %{{.*}}) {ppc.shardings = [#ppc.sharding<@mesh, {{\[\[}}dp], []], partial = [tp]>]}
func.func @op_shardings(%a: tensor<4x2xf32>, %b: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %0 = ppc.matmul %a, %b {ppc.shardings = [#ppc.sharding<@mesh, [[dp], []], partial = [tp]>]} : (tensor<4x2xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Tests all_reduce with both reductions, on one axis and on two axes in
// either order, and on integers.
// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[I:.*]]: tensor<3xi64>)
// CHECK:         ppc.all_reduce %[[X]] on @mesh["tp"] sum : tensor<4x8xf32>
// CHECK-NEXT:    ppc.all_reduce %[[X]] on @mesh["dp", "tp"] max : tensor<4x8xf32>
// CHECK-NEXT:    ppc.all_reduce %[[X]] on @mesh["tp", "dp"] sum : tensor<4x8xf32>
// CHECK-NEXT:    ppc.all_reduce %[[I]] on @square["x"] max : tensor<3xi64>
// GENERIC-LABEL: sym_name = "all_reduce"
// GENERIC:         "ppc.all_reduce"(%{{.*}}) <{axes = ["tp"], mesh = @mesh, reduction = 0 : i32}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
// GENERIC:         "ppc.all_reduce"(%{{.*}}) <{axes = ["dp", "tp"], mesh = @mesh, reduction = 1 : i32}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @all_reduce(%x: tensor<4x8xf32>, %i: tensor<3xi64>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3xi64>) {
  %0 = ppc.all_reduce %x on @mesh["tp"] sum : tensor<4x8xf32>
  %1 = ppc.all_reduce %x on @mesh["dp", "tp"] max : tensor<4x8xf32>
  %2 = ppc.all_reduce %x on @mesh["tp", "dp"] sum : tensor<4x8xf32>
  %3 = ppc.all_reduce %i on @square["x"] max : tensor<3xi64>
  return %0, %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3xi64>
}

// Tests all_gather and its inverse all_slice, on booleans too.
// CHECK-LABEL: func.func @all_gather_and_slice
// CHECK-SAME:    (%[[X:.*]]: tensor<4x2xf32>, %[[B:.*]]: tensor<2x3xi1>)
// CHECK:         %[[G:.*]] = ppc.all_gather %[[X]] on @mesh["tp"] dim = 1 : tensor<4x2xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    ppc.all_slice %[[G]] on @mesh["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
// CHECK-NEXT:    ppc.all_gather %[[B]] on @mesh["dp", "tp"] dim = 0 : tensor<2x3xi1> -> tensor<16x3xi1>
// GENERIC-LABEL: sym_name = "all_gather_and_slice"
// GENERIC:         "ppc.all_gather"(%{{.*}}) <{axes = ["tp"], dim = 1 : i64, mesh = @mesh}> : (tensor<4x2xf32>) -> tensor<4x8xf32>
// GENERIC:         "ppc.all_slice"(%{{.*}}) <{axes = ["tp"], dim = 1 : i64, mesh = @mesh}> : (tensor<4x8xf32>) -> tensor<4x2xf32>
func.func @all_gather_and_slice(%x: tensor<4x2xf32>, %b: tensor<2x3xi1>) -> (tensor<4x2xf32>, tensor<16x3xi1>) {
  %0 = ppc.all_gather %x on @mesh["tp"] dim = 1 : tensor<4x2xf32> -> tensor<4x8xf32>
  %1 = ppc.all_slice %0 on @mesh["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  %2 = ppc.all_gather %b on @mesh["dp", "tp"] dim = 0 : tensor<2x3xi1> -> tensor<16x3xi1>
  return %1, %2 : tensor<4x2xf32>, tensor<16x3xi1>
}

// Tests reduce_scatter with both reductions.
// CHECK-LABEL: func.func @reduce_scatter
// CHECK:         ppc.reduce_scatter %{{.*}} on @mesh["dp"] dim = 0 sum : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    ppc.reduce_scatter %{{.*}} on @mesh["tp"] dim = 1 max : tensor<8x4xf32> -> tensor<8x1xf32>
// GENERIC-LABEL: sym_name = "reduce_scatter"
// GENERIC:         "ppc.reduce_scatter"(%{{.*}}) <{axes = ["dp"], dim = 0 : i64, mesh = @mesh, reduction = 0 : i32}> : (tensor<8x4xf32>) -> tensor<4x4xf32>
func.func @reduce_scatter(%x: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<8x1xf32>) {
  %0 = ppc.reduce_scatter %x on @mesh["dp"] dim = 0 sum : tensor<8x4xf32> -> tensor<4x4xf32>
  %1 = ppc.reduce_scatter %x on @mesh["tp"] dim = 1 max : tensor<8x4xf32> -> tensor<8x1xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<8x1xf32>
}

// Tests all_to_all across dimensions and within one dimension.
// CHECK-LABEL: func.func @all_to_all
// CHECK:         ppc.all_to_all %{{.*}} on @mesh["tp"] split = 1 concat = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
// CHECK-NEXT:    ppc.all_to_all %{{.*}} on @mesh["tp"] split = 1 concat = 1 : tensor<2x8xf32> -> tensor<2x8xf32>
// GENERIC-LABEL: sym_name = "all_to_all"
// GENERIC:         "ppc.all_to_all"(%{{.*}}) <{axes = ["tp"], concat = 0 : i64, mesh = @mesh, split = 1 : i64}> : (tensor<2x8xf32>) -> tensor<8x2xf32>
func.func @all_to_all(%x: tensor<2x8xf32>) -> (tensor<8x2xf32>, tensor<2x8xf32>) {
  %0 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
  %1 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 1 : tensor<2x8xf32> -> tensor<2x8xf32>
  return %0, %1 : tensor<8x2xf32>, tensor<2x8xf32>
}

// Tests axis_index on one axis, two axes and none.
// CHECK-LABEL: func.func @axis_index
// CHECK:         ppc.axis_index on @mesh["tp"] : tensor<i64>
// CHECK-NEXT:    ppc.axis_index on @mesh["dp", "tp"] : tensor<i64>
// CHECK-NEXT:    ppc.axis_index on @mesh[] : tensor<i64>
// GENERIC-LABEL: sym_name = "axis_index"
// GENERIC:         "ppc.axis_index"() <{axes = ["tp"], mesh = @mesh}> : () -> tensor<i64>
func.func @axis_index() -> (tensor<i64>, tensor<i64>, tensor<i64>) {
  %0 = ppc.axis_index on @mesh["tp"] : tensor<i64>
  %1 = ppc.axis_index on @mesh["dp", "tp"] : tensor<i64>
  %2 = ppc.axis_index on @mesh[] : tensor<i64>
  return %0, %1, %2 : tensor<i64>, tensor<i64>, tensor<i64>
}
