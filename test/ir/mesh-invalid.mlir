// RUN: ppc-opt %s -split-input-file -verify-diagnostics

// Tests that a mesh gives one size per axis.
// expected-error @+1 {{'ppc.mesh' op has 2 axes but 3 sizes}}
ppc.mesh @mesh axes = ["dp", "tp"] shape = [1, 2, 4]

// -----

// Tests that mesh axis names are unique.
// expected-error @+1 {{'ppc.mesh' op has axis 'tp' twice}}
ppc.mesh @mesh axes = ["tp", "dp", "tp"] shape = [1, 2, 4]

// -----

// Tests that mesh axis names are not empty.
// expected-error @+1 {{'ppc.mesh' op has an axis with an empty name}}
ppc.mesh @mesh axes = ["dp", ""] shape = [2, 2]

// -----

// Tests that mesh axis sizes are positive.
// expected-error @+1 {{'ppc.mesh' op axis 'dp' has size 0, expected a positive size}}
ppc.mesh @mesh axes = ["dp", "tp"] shape = [0, 2]

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that a sharding uses each axis for one dimension only.
// expected-error @+1 {{sharding uses mesh axis 'tp' more than once}}
func.func private @axis_twice(tensor<4x4xf32> {ppc.sharding = #ppc.sharding<@mesh, [[tp], [dp, tp]]>})

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that an axis is not both split and partial.
// expected-error @+1 {{sharding uses mesh axis 'dp' more than once}}
func.func private @split_and_partial(tensor<4x4xf32> {ppc.sharding = #ppc.sharding<@mesh, [[dp], []], partial = [dp]>})

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that a sharding has one entry per dimension of its value.
// expected-error @+1 {{argument 0: sharding has 1 dimensions, but the value has type 'tensor<4x4xf32>'}}
func.func private @rank_mismatch(tensor<4x4xf32> {ppc.sharding = #ppc.sharding<@mesh, [[dp]]>})

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that a result's sharding is checked against the result type.
// expected-error @+1 {{result 0: sharding has 3 dimensions, but the value has type 'tensor<4x4xf32>'}}
func.func private @result_rank_mismatch() -> (tensor<4x4xf32> {ppc.sharding = #ppc.sharding<@mesh, [[], [], []]>})

// -----

// Tests that a sharding names an existing mesh.
// expected-error @+1 {{argument 0: sharding names @nowhere, which is not a ppc.mesh}}
func.func private @unknown_mesh(tensor<4xf32> {ppc.sharding = #ppc.sharding<@nowhere, [[dp]]>})

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that a sharding only uses axes of its mesh.
// expected-error @+1 {{argument 0: sharding uses axis 'pp', which mesh @mesh does not have}}
func.func private @unknown_axis(tensor<4xf32> {ppc.sharding = #ppc.sharding<@mesh, [[pp]]>})

// -----

// Tests that `ppc.sharding` holds a sharding attribute.
// expected-error @+1 {{'ppc.sharding' must be a #ppc.sharding}}
func.func private @not_a_sharding(tensor<4xf32> {ppc.sharding = "dp"})

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that an op's `ppc.shardings` has one sharding per result.
func.func @shardings_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ppc.neg' op 'ppc.shardings' has 2 shardings for 1 results}}
  %0 = ppc.neg %x {ppc.shardings = [#ppc.sharding<@mesh, [[dp]]>, #ppc.sharding<@mesh, [[dp]]>]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that `ppc.shardings` holds sharding attributes only.
func.func @shardings_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ppc.neg' op 'ppc.shardings' must be an array of #ppc.sharding}}
  %0 = ppc.neg %x {ppc.shardings = ["dp"]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that an op's sharding is checked against its result type.
func.func @shardings_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ppc.neg' op result 0: sharding has 2 dimensions, but the value has type 'tensor<4xf32>'}}
  %0 = ppc.neg %x {ppc.shardings = [#ppc.sharding<@mesh, [[dp], []]>]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a collective names an existing mesh.
func.func @collective_unknown_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ppc.all_reduce' op names @mesh, which is not a ppc.mesh}}
  %0 = ppc.all_reduce %x on @mesh["tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a collective's mesh symbol must be a ppc.mesh, not another
// symbol.
func.func @collective_not_a_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ppc.all_reduce' op names @collective_not_a_mesh, which is not a ppc.mesh}}
  %0 = ppc.all_reduce %x on @collective_not_a_mesh["tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that a collective's axes are axes of its mesh.
func.func @collective_unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ppc.all_reduce' op axis 'pp' is not an axis of mesh @mesh (["dp", "tp"])}}
  %0 = ppc.all_reduce %x on @mesh["pp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that a collective lists each axis once.
func.func @collective_axis_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ppc.all_reduce' op lists axis 'tp' twice}}
  %0 = ppc.all_reduce %x on @mesh["tp", "tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that all_reduce keeps its operand's type.
func.func @all_reduce_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.all_reduce' op requires the same type for all operands and results}}
  %0 = "ppc.all_reduce"(%x) <{axes = ["tp"], mesh = @mesh, reduction = 0 : i32}> : (tensor<4xf32>) -> tensor<4xf64>
  return
}

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that all_reduce does not reduce booleans.
func.func @all_reduce_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{'ppc.all_reduce' op operand #0 must be statically shaped tensor of}}
  %0 = ppc.all_reduce %x on @mesh["tp"] max : tensor<4xi1>
  return
}

// -----

ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// Tests that the reduction is sum or max.
func.func @unknown_reduction(%x: tensor<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'reduction' [sum, max]}}
  %0 = ppc.all_reduce %x on @mesh["tp"] min : tensor<4xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that all_gather multiplies its dimension by the group size.
func.func @all_gather_size(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{'ppc.all_gather' op result dimension 1 is 4, expected 8 (operand dimension times the group size 4)}}
  %0 = ppc.all_gather %x on @mesh["tp"] dim = 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that all_gather leaves the other dimensions alone.
func.func @all_gather_other_dim(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{'ppc.all_gather' op operand and result differ in dimension 0 (4 vs 2)}}
  %0 = ppc.all_gather %x on @mesh["tp"] dim = 1 : tensor<4x2xf32> -> tensor<2x8xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that the gathered dimension exists.
func.func @all_gather_dim_range(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{'ppc.all_gather' op dim = 2 is out of range for rank 2}}
  %0 = ppc.all_gather %x on @mesh["tp"] dim = 2 : tensor<4x2xf32> -> tensor<4x2xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that all_gather keeps the rank.
func.func @all_gather_rank(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{'ppc.all_gather' op operand has rank 2 but result has rank 1}}
  %0 = ppc.all_gather %x on @mesh["tp"] dim = 0 : tensor<4x2xf32> -> tensor<32xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that reduce_scatter's dimension divides by the group size.
func.func @reduce_scatter_divisible(%x: tensor<6x4xf32>) {
  // expected-error @+1 {{'ppc.reduce_scatter' op operand dimension 0 (6) does not divide by the group size 4}}
  %0 = ppc.reduce_scatter %x on @mesh["tp"] dim = 0 sum : tensor<6x4xf32> -> tensor<1x4xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that reduce_scatter divides its dimension by the group size of
// all its axes.
func.func @reduce_scatter_size(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.reduce_scatter' op result dimension 0 is 4, expected 1 (operand dimension divided by the group size 8)}}
  %0 = ppc.reduce_scatter %x on @mesh["dp", "tp"] dim = 0 sum : tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that all_to_all's split dimension divides by the group size.
func.func @all_to_all_divisible(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'ppc.all_to_all' op operand dimension 1 (6) does not divide by the group size 4}}
  %0 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 0 : tensor<2x6xf32> -> tensor<8x2xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that all_to_all multiplies its concat dimension by the group size.
func.func @all_to_all_concat(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.all_to_all' op result dimension 0 is 2, expected 8 (split divides and concat multiplies by the group size 4)}}
  %0 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 0 : tensor<2x8xf32> -> tensor<2x2xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that all_to_all's concat dimension exists.
func.func @all_to_all_concat_range(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.all_to_all' op concat = -1 is out of range for rank 2}}
  %0 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = -1 : tensor<2x8xf32> -> tensor<2x2xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that all_slice divides its dimension by the group size.
func.func @all_slice_size(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'ppc.all_slice' op result dimension 1 is 4, expected 2 (operand dimension divided by the group size 4)}}
  %0 = ppc.all_slice %x on @mesh["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that axis_index returns a 0-d i64 tensor.
func.func @axis_index_type() {
  // expected-error @+1 {{'ppc.axis_index' op result #0 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  %0 = ppc.axis_index on @mesh["tp"] : tensor<i32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
// Tests that axis_index checks its axes against the mesh.
func.func @axis_index_axis() {
  // expected-error @+1 {{'ppc.axis_index' op axis 'x' is not an axis of mesh @mesh}}
  %0 = ppc.axis_index on @mesh["x"] : tensor<i64>
  return
}
