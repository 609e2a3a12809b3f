// RUN: ppc-opt %s -split-input-file -verify-diagnostics

// Ops that implement InferTypeOpInterface report a shape-rule violation twice
// at the op: the rule's own message, then the interface's summary.

// Tests that a broadcast op rejects operand shapes that do not broadcast.
func.func @add_not_broadcastable(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{shapes [2,3] and [4] do not broadcast}}
  // expected-error @+1 {{'ppc.add' op failed to infer returned types}}
  %0 = ppc.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that broadcasting checks every dimension, not only the last one.
func.func @mul_not_broadcastable_inner(%a: tensor<2x3x4xi64>, %b: tensor<5x1xi64>) {
  // expected-error @+2 {{shapes [2,3,4] and [5,1] do not broadcast}}
  // expected-error @+1 {{'ppc.mul' op failed to infer returned types}}
  %0 = ppc.mul %a, %b : (tensor<2x3x4xi64>, tensor<5x1xi64>) -> tensor<2x5x4xi64>
  return
}

// -----

// Tests that the declared result shape of a broadcast op must be the
// inferred one.
func.func @add_wrong_result_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'ppc.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x3xf32>'}}
  // expected-error @+1 {{'ppc.add' op failed to infer returned types}}
  %0 = ppc.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

// Tests that a comparison must be declared to return i1, not the operands'
// element type.
func.func @less_non_bool_result(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{'ppc.less' op inferred type(s) 'tensor<4xi1>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'ppc.less' op failed to infer returned types}}
  %0 = ppc.less %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that where rejects operands that do not broadcast together.
func.func @where_not_broadcastable(%c: tensor<4xi1>, %a: tensor<3xf32>, %b: tensor<f32>) {
  // expected-error @+2 {{shapes [4] and [3] and [] do not broadcast}}
  // expected-error @+1 {{'ppc.where' op failed to infer returned types}}
  %0 = ppc.where %c, %a, %b : (tensor<4xi1>, tensor<3xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

// Tests that matmul rejects differing contraction sizes.
func.func @matmul_contraction_mismatch(%a: tensor<2x16x64xf32>, %b: tensor<32x8xf32>) {
  // expected-error @+2 {{matmul contraction sizes differ: [2,16,64] @ [32,8]}}
  // expected-error @+1 {{'ppc.matmul' op failed to infer returned types}}
  %0 = ppc.matmul %a, %b : (tensor<2x16x64xf32>, tensor<32x8xf32>) -> tensor<2x16x8xf32>
  return
}

// -----

// Tests that matmul rejects a rank-1 operand (the importer reshapes those).
func.func @matmul_rank1(%a: tensor<64xf32>, %b: tensor<64x8xf32>) {
  // expected-error @+2 {{matmul operands need rank >= 2, got [64] and [64,8]}}
  // expected-error @+1 {{'ppc.matmul' op failed to infer returned types}}
  %0 = ppc.matmul %a, %b : (tensor<64xf32>, tensor<64x8xf32>) -> tensor<8xf32>
  return
}

// -----

// Tests that matmul rejects batch dimensions that do not broadcast.
func.func @matmul_batch_mismatch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x5xf32>) {
  // expected-error @+2 {{shapes [2] and [3] do not broadcast}}
  // expected-error @+1 {{'ppc.matmul' op failed to infer returned types}}
  %0 = ppc.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x4x5xf32>
  return
}

// -----

// Tests that einsum rejects an implicit equation (without '->').
func.func @einsum_implicit(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{einsum equation 'ij,jk' must be explicit (contain '->')}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "ij,jk" (%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that einsum rejects a label bound to two different sizes.
func.func @einsum_label_size_conflict(%a: tensor<2x3xf32>, %b: tensor<5x4xf32>) {
  // expected-error @+2 {{einsum label 'j' has sizes 3 and 5}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "ij,jk->ik" (%a, %b) : (tensor<2x3xf32>, tensor<5x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that einsum rejects an ellipsis, which the importer expands.
func.func @einsum_ellipsis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{einsum term '...ij' must consist of letters only}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "...ij->...ji" (%a) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

// Tests that einsum rejects a term whose length is not the operand's rank.
func.func @einsum_term_rank(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{einsum term 'ijk' does not match operand shape [2,3]}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "ijk->i" (%a) : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

// Tests that einsum rejects an equation with more terms than operands.
func.func @einsum_term_count(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{einsum has 2 terms but 1 operands}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "ij,jk->ik" (%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that einsum rejects an output label that no input has.
func.func @einsum_unknown_output_label(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{einsum output label 'k' is in no input}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "ij->ik" (%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that einsum rejects an output label given twice.
func.func @einsum_repeated_output_label(%a: tensor<2x2xf32>) {
  // expected-error @+2 {{einsum output label 'i' repeats}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "ij->ii" (%a) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return
}

// -----

// Tests that einsum rejects operands of different element types.
func.func @einsum_element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) {
  // expected-error @+2 {{einsum operands differ in element type}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "ij,jk->ik" (%a, %b) : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that einsum needs at least one operand.
func.func @einsum_no_operands() {
  // expected-error @+2 {{einsum needs at least one operand}}
  // expected-error @+1 {{'ppc.einsum' op failed to infer returned types}}
  %0 = ppc.einsum "->" () : () -> tensor<f32>
  return
}

// -----

// Tests that reduction axes must be sorted.
func.func @reduce_axes_unsorted(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduction axes must be sorted, unique and in [0, 3), got [2,0]}}
  // expected-error @+1 {{'ppc.reduce_sum' op failed to infer returned types}}
  %0 = ppc.reduce_sum %x axes = [2, 0] keepdims = false : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return
}

// -----

// Tests that reduction axes must be unique.
func.func @reduce_axes_repeated(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduction axes must be sorted, unique and in [0, 3), got [1,1]}}
  // expected-error @+1 {{'ppc.reduce_max' op failed to infer returned types}}
  %0 = ppc.reduce_max %x axes = [1, 1] keepdims = true : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return
}

// -----

// Tests that a reduction axis must be below the rank.
func.func @reduce_axis_out_of_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduction axes must be sorted, unique and in [0, 3), got [3]}}
  // expected-error @+1 {{'ppc.reduce_mean' op failed to infer returned types}}
  %0 = ppc.reduce_mean %x axes = [3] keepdims = true : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

// Tests that a reduction axis must be non-negative (the importer normalizes
// ONNX's negative axes).
func.func @reduce_axis_negative(%x: tensor<2x3x4xi64>) {
  // expected-error @+2 {{reduction axes must be sorted, unique and in [0, 3), got [-1]}}
  // expected-error @+1 {{'ppc.reduce_prod' op failed to infer returned types}}
  %0 = ppc.reduce_prod %x axes = [-1] keepdims = false : (tensor<2x3x4xi64>) -> tensor<2x3xi64>
  return
}

// -----

// Tests that a reduction's declared result must match keepdims.
func.func @reduce_min_keepdims_mismatch(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'ppc.reduce_min' op inferred type(s) 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{'ppc.reduce_min' op failed to infer returned types}}
  %0 = ppc.reduce_min %x axes = [1] keepdims = true : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

// Tests that the softmax axis must be below the rank.
func.func @softmax_axis_out_of_range(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.softmax' op axis 2 out of range for rank 2}}
  %0 = ppc.softmax %x axis = 2 : tensor<2x8xf32>
  return
}

// -----

// Tests that the log_softmax axis must be non-negative.
func.func @log_softmax_axis_negative(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.log_softmax' op axis -1 out of range for rank 2}}
  %0 = ppc.log_softmax %x axis = -1 : tensor<2x8xf32>
  return
}

// -----

// Tests that the log_sum_exp axis must be in range.
func.func @log_sum_exp_axis_out_of_range(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{axis 2 out of range for rank 2}}
  // expected-error @+1 {{'ppc.log_sum_exp' op failed to infer returned types}}
  %0 = ppc.log_sum_exp %x axis = 2 : (tensor<2x8xf32>) -> tensor<2x1xf32>
  return
}

// -----

// Tests that log_sum_exp's result keeps the reduced axis with size 1.
func.func @log_sum_exp_axis_dropped(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{'ppc.log_sum_exp' op inferred type(s) 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{'ppc.log_sum_exp' op failed to infer returned types}}
  %0 = ppc.log_sum_exp %x axis = 1 : (tensor<2x8xf32>) -> tensor<2xf32>
  return
}

// -----

// Tests that rotary needs an even last dimension.
func.func @rotary_odd(%x: tensor<2x7xf32>, %c: tensor<7xf32>) {
  // expected-error @+2 {{rotary's input needs an even last dimension}}
  // expected-error @+1 {{'ppc.rotary' op failed to infer returned types}}
  %0 = ppc.rotary %x, %c, %c : (tensor<2x7xf32>, tensor<7xf32>, tensor<7xf32>) -> tensor<2x7xf32>
  return
}

// -----

// Tests that rotary's tables must have the input's last dimension (a table
// of one column would broadcast, but is no rotation's).
func.func @rotary_table_broadcast_along_the_pairs(%x: tensor<2x8xf32>, %c: tensor<2x1xf32>) {
  // expected-error @+2 {{cos and sin must broadcast to the input's shape with its last dimension and share its element type}}
  // expected-error @+1 {{'ppc.rotary' op failed to infer returned types}}
  %0 = ppc.rotary %x, %c, %c : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that rotary's tables share the input's element type.
func.func @rotary_table_type(%x: tensor<2x8xbf16>, %c: tensor<8xf32>) {
  // expected-error @+2 {{cos and sin must broadcast to the input's shape with its last dimension and share its element type}}
  // expected-error @+1 {{'ppc.rotary' op failed to infer returned types}}
  %0 = ppc.rotary %x, %c, %c : (tensor<2x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xbf16>
  return
}

// -----

// Tests that rotary's tables must broadcast to the input's shape.
func.func @rotary_table_shape(%x: tensor<2x3x8xf32>, %c: tensor<4x8xf32>) {
  // expected-error @+2 {{cos and sin must broadcast to the input's shape with its last dimension and share its element type}}
  // expected-error @+1 {{'ppc.rotary' op failed to infer returned types}}
  %0 = ppc.rotary %x, %c, %c : (tensor<2x3x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  return
}

// -----

// Tests that layer_norm rejects a scale that does not broadcast to the
// normalized shape.
func.func @layer_norm_scale_not_broadcastable(%x: tensor<2x16x64xf32>, %g: tensor<32xf32>) {
  // expected-error @+2 {{scale and bias must broadcast to the normalized shape and share the input's element type}}
  // expected-error @+1 {{'ppc.layer_norm' op failed to infer returned types}}
  %0 = ppc.layer_norm %x, %g axis = 2 epsilon = 1.0e-5 : (tensor<2x16x64xf32>, tensor<32xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that layer_norm rejects a bias of another element type.
func.func @layer_norm_bias_element_type(%x: tensor<2x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf16>) {
  // expected-error @+2 {{scale and bias must broadcast to the normalized shape and share the input's element type}}
  // expected-error @+1 {{'ppc.layer_norm' op failed to infer returned types}}
  %0 = ppc.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-5 : (tensor<2x64xf32>, tensor<64xf32>, tensor<64xf16>) -> tensor<2x64xf32>
  return
}

// -----

// Tests that layer_norm rejects a scale of higher rank than the normalized
// dimensions.
func.func @layer_norm_scale_rank(%x: tensor<2x16x64xf32>, %g: tensor<16x64xf32>) {
  // expected-error @+2 {{scale and bias must broadcast to the normalized shape and share the input's element type}}
  // expected-error @+1 {{'ppc.layer_norm' op failed to infer returned types}}
  %0 = ppc.layer_norm %x, %g axis = 2 epsilon = 1.0e-5 : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that the layer_norm axis must be below the rank.
func.func @layer_norm_axis_out_of_range(%x: tensor<2x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+2 {{axis 2 out of range for rank 2}}
  // expected-error @+1 {{'ppc.layer_norm' op failed to infer returned types}}
  %0 = ppc.layer_norm %x, %g axis = 2 epsilon = 1.0e-5 : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  return
}

// -----

// Tests that layer_norm_grad takes the result's adjoint of the input's type.
func.func @layer_norm_grad_adjoint_type(%x: tensor<2x64xbf16>, %g: tensor<64xbf16>, %dy: tensor<2x64xf32>) {
  // expected-error @+2 {{result_grad must have the input's type}}
  // expected-error @+1 {{'ppc.layer_norm_grad' op failed to infer returned types}}
  %0:3 = ppc.layer_norm_grad %x, %g, %dy axis = 1 epsilon = 1.0e-5 : (tensor<2x64xbf16>, tensor<64xbf16>, tensor<2x64xf32>) -> (tensor<2x64xbf16>, tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

// Tests that layer_norm_grad's statistics are f32 for bf16 inputs, with the
// normalized dimensions 1.
func.func @layer_norm_grad_statistics(%x: tensor<2x64xbf16>, %g: tensor<64xbf16>, %dy: tensor<2x64xbf16>) {
  // expected-error @+2 {{'ppc.layer_norm_grad' op inferred type(s) 'tensor<2x64xbf16>', 'tensor<2x1xf32>', 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2x64xbf16>', 'tensor<2x1xbf16>', 'tensor<2x1xbf16>'}}
  // expected-error @+1 {{'ppc.layer_norm_grad' op failed to infer returned types}}
  %0:3 = ppc.layer_norm_grad %x, %g, %dy axis = 1 epsilon = 1.0e-5 : (tensor<2x64xbf16>, tensor<64xbf16>, tensor<2x64xbf16>) -> (tensor<2x64xbf16>, tensor<2x1xbf16>, tensor<2x1xbf16>)
  return
}

// -----

// Tests that layer_norm_grad's scale broadcasts to the normalized shape.
func.func @layer_norm_grad_scale(%x: tensor<2x8x64xf32>, %g: tensor<8xf32>, %dy: tensor<2x8x64xf32>) {
  // expected-error @+2 {{scale must broadcast to the normalized shape and share the input's element type}}
  // expected-error @+1 {{'ppc.layer_norm_grad' op failed to infer returned types}}
  %0:3 = ppc.layer_norm_grad %x, %g, %dy axis = 1 epsilon = 1.0e-5 : (tensor<2x8x64xf32>, tensor<8xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  return
}

// -----

// Tests that rms_norm rejects a scale that does not broadcast to the
// normalized shape.
func.func @rms_norm_scale_not_broadcastable(%x: tensor<2x16x64xf32>, %g: tensor<16x64xf32>) {
  // expected-error @+2 {{scale and bias must broadcast to the normalized shape and share the input's element type}}
  // expected-error @+1 {{'ppc.rms_norm' op failed to infer returned types}}
  %0 = ppc.rms_norm %x, %g axis = 2 epsilon = 1.0e-6 : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that the rms_norm axis must be below the rank.
func.func @rms_norm_axis_out_of_range(%x: tensor<2x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+2 {{axis -1 out of range for rank 2}}
  // expected-error @+1 {{'ppc.rms_norm' op failed to infer returned types}}
  %0 = ppc.rms_norm %x, %g axis = -1 epsilon = 1.0e-6 : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  return
}

// -----

// Tests that rms_norm_grad's statistic (rstd) is f32 for bf16 inputs.
func.func @rms_norm_grad_statistics(%x: tensor<2x64xbf16>, %g: tensor<64xbf16>, %dy: tensor<2x64xbf16>) {
  // expected-error @+2 {{'ppc.rms_norm_grad' op inferred type(s) 'tensor<2x64xbf16>', 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2x64xbf16>', 'tensor<2x1xbf16>'}}
  // expected-error @+1 {{'ppc.rms_norm_grad' op failed to infer returned types}}
  %0:2 = ppc.rms_norm_grad %x, %g, %dy axis = 1 epsilon = 1.0e-6 : (tensor<2x64xbf16>, tensor<64xbf16>, tensor<2x64xbf16>) -> (tensor<2x64xbf16>, tensor<2x1xbf16>)
  return
}

// -----

// Tests that rms_norm_grad takes the result's adjoint of the input's type.
func.func @rms_norm_grad_adjoint_type(%x: tensor<2x64xbf16>, %g: tensor<64xbf16>, %dy: tensor<2x64xf32>) {
  // expected-error @+2 {{result_grad must have the input's type}}
  // expected-error @+1 {{'ppc.rms_norm_grad' op failed to infer returned types}}
  %0:2 = ppc.rms_norm_grad %x, %g, %dy axis = 1 epsilon = 1.0e-6 : (tensor<2x64xbf16>, tensor<64xbf16>, tensor<2x64xf32>) -> (tensor<2x64xbf16>, tensor<2x1xf32>)
  return
}

// -----

// Tests that reshape keeps the number of elements.
func.func @reshape_element_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ppc.reshape' op cannot reshape 'tensor<2x3xf32>' (6 elements) to 'tensor<4x2xf32>' (8 elements)}}
  %0 = ppc.reshape %x : tensor<2x3xf32> -> tensor<4x2xf32>
  return
}

// -----

// Tests that reshape keeps the element type.
func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ppc.reshape' op requires the same element type for all operands and results}}
  %0 = ppc.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return
}

// -----

// Tests that transpose rejects a perm that repeats a dimension.
func.func @transpose_perm_repeats(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{perm is not a permutation of [0, 3)}}
  // expected-error @+1 {{'ppc.transpose' op failed to infer returned types}}
  %0 = ppc.transpose %x perm = [0, 2, 2] : (tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

// Tests that transpose rejects a perm entry out of range.
func.func @transpose_perm_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{perm is not a permutation of [0, 2)}}
  // expected-error @+1 {{'ppc.transpose' op failed to infer returned types}}
  %0 = ppc.transpose %x perm = [2, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

// Tests that transpose needs one perm entry per dimension.
func.func @transpose_perm_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{perm has 2 entries for rank 3}}
  // expected-error @+1 {{'ppc.transpose' op failed to infer returned types}}
  %0 = ppc.transpose %x perm = [1, 0] : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

// Tests that concat operands must agree outside the concatenation axis.
func.func @concat_dimension_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{concat operands differ in dimension 0 (2 vs 4)}}
  // expected-error @+1 {{'ppc.concat' op failed to infer returned types}}
  %0 = ppc.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that concat operands must have the same rank.
func.func @concat_rank_mismatch(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) {
  // expected-error @+2 {{concat operands differ in rank}}
  // expected-error @+1 {{'ppc.concat' op failed to infer returned types}}
  %0 = ppc.concat %a, %b axis = 0 : (tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<4x3xf32>
  return
}

// -----

// Tests that the concat axis must be below the rank.
func.func @concat_axis_out_of_range(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 out of range for rank 2}}
  // expected-error @+1 {{'ppc.concat' op failed to infer returned types}}
  %0 = ppc.concat %a, %a axis = 2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that concat needs at least one operand.
func.func @concat_no_operands() {
  // expected-error @+1 {{'ppc.concat' op expected 1 or more operands, but found 0}}
  %0 = ppc.concat axis = 0 : () -> tensor<0xf32>
  return
}

// -----

// Tests that a forward slice may not end past the dimension.
func.func @slice_out_of_bounds(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice start 4 limit 9 step 1 out of bounds for a dimension of size 8}}
  // expected-error @+1 {{'ppc.slice' op failed to infer returned types}}
  %0 = ppc.slice %x starts = [0, 4] limits = [2, 9] steps = [1, 1] : (tensor<2x8xf32>) -> tensor<2x5xf32>
  return
}

// -----

// Tests that a backward slice may not start at the dimension's size.
func.func @slice_backward_out_of_bounds(%x: tensor<8xf32>) {
  // expected-error @+2 {{slice start 8 limit -1 step -1 out of bounds for a dimension of size 8}}
  // expected-error @+1 {{'ppc.slice' op failed to infer returned types}}
  %0 = ppc.slice %x starts = [8] limits = [-1] steps = [-1] : (tensor<8xf32>) -> tensor<9xf32>
  return
}

// -----

// Tests that a slice step may not be zero.
func.func @slice_zero_step(%x: tensor<8xf32>) {
  // expected-error @+2 {{slice step must be non-zero}}
  // expected-error @+1 {{'ppc.slice' op failed to infer returned types}}
  %0 = ppc.slice %x starts = [0] limits = [8] steps = [0] : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

// Tests that a slice needs one start, limit and step per dimension.
func.func @slice_entry_count(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{starts, limits and steps need one entry per dimension (rank 2)}}
  // expected-error @+1 {{'ppc.slice' op failed to infer returned types}}
  %0 = ppc.slice %x starts = [0] limits = [2] steps = [1] : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that the gather axis must be below the data rank.
func.func @gather_axis_out_of_range(%w: tensor<256x64xf32>, %ids: tensor<2x16xi64>) {
  // expected-error @+2 {{axis 2 out of range for rank 2}}
  // expected-error @+1 {{'ppc.gather' op failed to infer returned types}}
  %0 = ppc.gather %w[%ids] axis = 2 : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<256x64x2x16xf32>
  return
}

// -----

// Tests that gather indices must be i32 or i64.
func.func @gather_float_indices(%w: tensor<256x64xf32>, %ids: tensor<2xf32>) {
  // expected-error @+1 {{'ppc.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
  %0 = ppc.gather %w[%ids] axis = 0 : (tensor<256x64xf32>, tensor<2xf32>) -> tensor<2x64xf32>
  return
}

// -----

// Tests that expand rejects a result the input does not broadcast to.
func.func @expand_not_broadcastable(%x: tensor<3x16xi64>) {
  // expected-error @+1 {{'ppc.expand' op 'tensor<3x16xi64>' does not broadcast to 'tensor<2x16xi64>'}}
  %0 = ppc.expand %x : tensor<3x16xi64> -> tensor<2x16xi64>
  return
}

// -----

// Tests that expand cannot lower the rank.
func.func @expand_lower_rank(%x: tensor<1x16xi64>) {
  // expected-error @+1 {{'ppc.expand' op 'tensor<1x16xi64>' does not broadcast to 'tensor<16xi64>'}}
  %0 = ppc.expand %x : tensor<1x16xi64> -> tensor<16xi64>
  return
}

// -----

// Tests that trilu needs a matrix.
func.func @trilu_rank1(%x: tensor<16xf32>) {
  // expected-error @+1 {{'ppc.trilu' op needs rank >= 2, got 'tensor<16xf32>'}}
  %0 = ppc.trilu %x upper = false k = 0 : tensor<16xf32>
  return
}

// -----

// Tests that arg_max needs an axis with elements.
func.func @arg_max_empty(%x: tensor<4x0xf32>) {
  // expected-error @+2 {{axis 1 is empty}}
  // expected-error @+1 {{'ppc.arg_max' op failed to infer returned types}}
  %0 = ppc.arg_max %x axis = 1 largest = true last = false : tensor<4x0xf32> -> tensor<4x1xi64>
  return
}

// -----

// Tests that top_k_indices takes at most the whole axis.
func.func @top_k_indices_k(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{k = 4 is not in [0, 3]}}
  // expected-error @+1 {{'ppc.top_k_indices' op failed to infer returned types}}
  %0 = ppc.top_k_indices %x axis = 1 k = 4 largest = true : tensor<4x3xf32> -> tensor<4x4xi64>
  return
}

// -----

// Tests that cumsum's axis is one of the operand's dimensions.
func.func @cumsum_axis(%x: tensor<4x16xi64>) {
  // expected-error @+1 {{'ppc.cumsum' op axis 2 is out of range for rank 2}}
  %0 = ppc.cumsum %x axis = 2 exclusive = false reverse = false : tensor<4x16xi64>
  return
}

// -----

// Tests that the nll_loss target is the input shape without the class
// dimension.
func.func @nll_loss_target_shape(%lp: tensor<32x256xf32>, %t: tensor<256xi64>) {
  // expected-error @+2 {{nll_loss target shape must be the input shape without its class dimension}}
  // expected-error @+1 {{'ppc.nll_loss' op failed to infer returned types}}
  %0 = ppc.nll_loss %lp, %t mean : (tensor<32x256xf32>, tensor<256xi64>) -> tensor<f32>
  return
}

// -----

// Tests that the nll_loss target drops dimension 1, not the last one.
func.func @nll_loss_spatial_target_shape(%lp: tensor<4x10x7xf32>, %t: tensor<4x10xi64>) {
  // expected-error @+2 {{nll_loss target shape must be the input shape without its class dimension}}
  // expected-error @+1 {{'ppc.nll_loss' op failed to infer returned types}}
  %0 = ppc.nll_loss %lp, %t none : (tensor<4x10x7xf32>, tensor<4x10xi64>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that the nll_loss weight has one entry per class.
func.func @nll_loss_weight_shape(%lp: tensor<32x256xf32>, %t: tensor<32xi64>, %w: tensor<32xf32>) {
  // expected-error @+2 {{nll_loss weight must have shape [C]}}
  // expected-error @+1 {{'ppc.nll_loss' op failed to infer returned types}}
  %0 = ppc.nll_loss %lp, %t, %w sum : (tensor<32x256xf32>, tensor<32xi64>, tensor<32xf32>) -> tensor<f32>
  return
}

// -----

// Tests that the nll_loss weight is a vector.
func.func @nll_loss_weight_rank(%lp: tensor<32x256xf32>, %t: tensor<32xi64>, %w: tensor<1x256xf32>) {
  // expected-error @+2 {{nll_loss weight must have shape [C]}}
  // expected-error @+1 {{'ppc.nll_loss' op failed to infer returned types}}
  %0 = ppc.nll_loss %lp, %t, %w sum : (tensor<32x256xf32>, tensor<32xi64>, tensor<1x256xf32>) -> tensor<f32>
  return
}

// -----

// Tests that nll_loss needs a class dimension.
func.func @nll_loss_input_rank(%lp: tensor<256xf32>, %t: tensor<i64>) {
  // expected-error @+2 {{nll_loss input needs rank >= 2 [N, C, ...]}}
  // expected-error @+1 {{'ppc.nll_loss' op failed to infer returned types}}
  %0 = ppc.nll_loss %lp, %t sum : (tensor<256xf32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

// Tests that nll_loss without reduction must be declared per element.
func.func @nll_loss_none_result(%lp: tensor<32x256xf32>, %t: tensor<32xi64>) {
  // expected-error @+2 {{'ppc.nll_loss' op inferred type(s) 'tensor<32xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{'ppc.nll_loss' op failed to infer returned types}}
  %0 = ppc.nll_loss %lp, %t none : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
  return
}

// -----

// Tests that a dynamically shaped operand is rejected by a broadcast op.
func.func @dynamic_shape_binary(%a: tensor<?x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'ppc.add' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 8-bit signless integer or 16-bit signless integer or 32-bit signless integer or 64-bit signless integer or 8-bit unsigned integer or 16-bit unsigned integer or 32-bit unsigned integer or 64-bit unsigned integer values, but got 'tensor<?x3xf32>'}}
  %0 = ppc.add %a, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that a dynamically shaped result is rejected.
func.func @dynamic_shape_reshape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ppc.reshape' op result #0 must be statically shaped tensor of}}
  %0 = ppc.reshape %x : tensor<2x3xf32> -> tensor<?xf32>
  return
}

// -----

// Tests that an unranked tensor is rejected (in generic form: the custom form
// only parses ranked tensor types).
func.func @unranked_unary(%x: tensor<*xf32>) {
  // expected-error @+1 {{'ppc.exp' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<*xf32>'}}
  %0 = "ppc.exp"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

// Tests that float-only unary ops reject integers.
func.func @sqrt_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{'ppc.sqrt' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = ppc.sqrt %x : tensor<4xi32>
  return
}

// -----

// Tests that cast keeps the shape.
func.func @cast_shape(%x: tensor<2x3xi64>) {
  // expected-error @+1 {{'ppc.cast' op requires the same shape for all operands and results}}
  %0 = ppc.cast %x : tensor<2x3xi64> -> tensor<3x2xf32>
  return
}

// -----

// Tests that a constant's value has the result type.
func.func @constant_type_mismatch() {
  // expected-error @+1 {{'ppc.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "ppc.constant"() <{value = dense<[1, 2]> : tensor<2xi64>}> : () -> tensor<2xi32>
  return
}

// -----

// Tests that ppc.param must name the initializer with a string.
// expected-error @+1 {{'ppc.param' must be a non-empty string}}
func.func @param_not_string(%w: tensor<3xf32> {ppc.param = 3 : i64}) {
  return
}

// -----

// Tests that ppc.input may not be an empty string.
// expected-error @+1 {{'ppc.input' must be a non-empty string}}
func.func @input_empty(%x: tensor<3xf32> {ppc.input = ""}) {
  return
}

// -----

// Tests that unknown ppc.* argument attributes are rejected.
// expected-error @+1 {{unknown ppc attribute 'ppc.weight' here}}
func.func @unknown_arg_attribute(%x: tensor<3xf32> {ppc.weight = "x"}) {
  return
}

// -----

// Tests that ppc.output is a result attribute, not an argument attribute.
// expected-error @+1 {{unknown ppc attribute 'ppc.output' here}}
func.func @output_on_argument(%x: tensor<3xf32> {ppc.output = "y"}) {
  return
}

// -----

// Tests that ppc.input is an argument attribute, not a result attribute.
// expected-error @+1 {{unknown ppc attribute 'ppc.input' here}}
func.func @input_on_result(%x: tensor<3xf32>) -> (tensor<3xf32> {ppc.input = "x"}) {
  return %x : tensor<3xf32>
}

// -----

// Tests that insert_slice needs a source of the slice's shape.
func.func @insert_slice_wrong_source_shape(%s: tensor<2x32xf32>, %d: tensor<2x192xf32>) {
  // expected-error @+1 {{'ppc.insert_slice' op source 'tensor<2x32xf32>' does not have the slice's shape 'tensor<2x64xf32>'}}
  %0 = ppc.insert_slice %s into %d starts = [0, 64] limits = [2, 128] steps = [1, 1] : (tensor<2x32xf32>, tensor<2x192xf32>) -> tensor<2x192xf32>
  return
}

// -----

// Tests that insert_slice checks its region against the destination.
func.func @insert_slice_out_of_bounds(%s: tensor<2x5xf32>, %d: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.insert_slice' op slice start 4 limit 9 step 1 out of bounds for a dimension of size 8}}
  %0 = ppc.insert_slice %s into %d starts = [0, 4] limits = [2, 9] steps = [1, 1] : (tensor<2x5xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that insert_slice needs one start, limit and step per dimension.
func.func @insert_slice_entry_count(%s: tensor<2x8xf32>, %d: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.insert_slice' op starts, limits and steps need one entry per dimension (rank 2)}}
  %0 = ppc.insert_slice %s into %d starts = [0] limits = [2] steps = [1] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that insert_slice's result has the destination's type.
func.func @insert_slice_result_type(%s: tensor<2x8xf32>, %d: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.insert_slice' op failed to verify that all of {dest, result} have same type}}
  %0 = ppc.insert_slice %s into %d starts = [0, 0] limits = [2, 8] steps = [1, 1] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf64>
  return
}

// -----

// Tests that insert_slice's source and destination share their element type.
func.func @insert_slice_element_type(%s: tensor<2x8xf64>, %d: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.insert_slice' op failed to verify that all of {source, dest} have same element type}}
  %0 = ppc.insert_slice %s into %d starts = [0, 0] limits = [2, 8] steps = [1, 1] : (tensor<2x8xf64>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that scatter_add's updates have the gather shape of indices into the
// result.
func.func @scatter_add_wrong_updates_shape(%g: tensor<2x16x32xf32>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'ppc.scatter_add' op updates 'tensor<2x16x32xf32>' do not match the gather shape 'tensor<2x16x64xf32>' of indices 'tensor<2x16xi64>' into 'tensor<256x64xf32>' along axis 0}}
  %0 = ppc.scatter_add %g[%ids] axis = 0 : (tensor<2x16x32xf32>, tensor<2x16xi64>) -> tensor<256x64xf32>
  return
}

// -----

// Tests that the scatter_add axis must be below the result rank.
func.func @scatter_add_axis_out_of_range(%g: tensor<256x64x2xf32>, %ids: tensor<2xi64>) {
  // expected-error @+1 {{'ppc.scatter_add' op axis 2 out of range for rank 2}}
  %0 = ppc.scatter_add %g[%ids] axis = 2 : (tensor<256x64x2xf32>, tensor<2xi64>) -> tensor<256x64xf32>
  return
}

// -----

// Tests that scatter_add's updates and result share their element type.
func.func @scatter_add_element_type(%g: tensor<2x64xf64>, %ids: tensor<2xi64>) {
  // expected-error @+1 {{'ppc.scatter_add' op failed to verify that all of {updates, result} have same element type}}
  %0 = ppc.scatter_add %g[%ids] axis = 0 : (tensor<2x64xf64>, tensor<2xi64>) -> tensor<256x64xf32>
  return
}

// -----

// Tests that scatter_add indices must be i32 or i64.
func.func @scatter_add_float_indices(%g: tensor<2x64xf32>, %ids: tensor<2xf32>) {
  // expected-error @+1 {{'ppc.scatter_add' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
  %0 = ppc.scatter_add %g[%ids] axis = 0 : (tensor<2x64xf32>, tensor<2xf32>) -> tensor<256x64xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp"] shape = [2, 1]
// Tests that a send names an axis of its mesh.
func.func @send_unknown_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.send' op axis 'tp' is not an axis of mesh @mesh (["pp", "dp"])}}
  ppc.send %x to @mesh["tp"] 1 : tensor<4xf32>
  return
}

// -----

ppc.mesh @mesh axes = ["pp", "dp"] shape = [2, 1]
// Tests that a recv's peer is a coordinate on its axis.
func.func @recv_peer_out_of_range() -> tensor<4xf32> {
  // expected-error @+1 {{'ppc.recv' op peer 2 is out of range [0, 2) of axis 'pp'}}
  %y = ppc.recv from @mesh["pp"] 2 : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

ppc.mesh @mesh axes = ["pp", "dp"] shape = [2, 1]
// Tests that a negative peer is out of range too.
func.func @send_negative_peer(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.send' op peer -1 is out of range [0, 2) of axis 'pp'}}
  ppc.send %x to @mesh["pp"] -1 : tensor<4xf32>
  return
}

// -----

// Tests that an op's result must fit the size limit: its element count in an
// int64 (here it would wrap to 0), its bytes within 2^40.
func.func @expand_overflows(%x: tensor<1xf32>) {
  // expected-error @+1 {{result 0: shape [4611686018427387904,4] has more elements than an int64 holds}}
  %0 = ppc.expand %x : tensor<1xf32> -> tensor<4611686018427387904x4xf32>
  return
}

// -----

// Tests that the limit counts bytes: 2^38 f32 elements fit, 2^38 f64 do not.
func.func @cast_too_big(%x: tensor<274877906944xf32>) {
  // expected-error @+1 {{result 0: shape [274877906944] of f64 (274877906944 elements) takes 2199023255552 bytes; ppc allows one tensor at most 2^40 (1 TiB)}}
  %0 = ppc.cast %x : tensor<274877906944xf32> -> tensor<274877906944xf64>
  return
}

// -----

// Tests that a function argument named by a ppc attribute is checked too.
// expected-error @+1 {{argument 0: shape [4611686018427387904,4] has more elements than an int64 holds}}
func.func @param_overflows(%w: tensor<4611686018427387904x4xf32> {ppc.param = "w"}) {
  return
}

// -----

// Tests that attention checks its operands' shapes and its results.
func.func @attention_head_size(%q: tensor<2x8x16xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'ppc.attention' op q and k must have the same head size, not 'tensor<2x8x16xf32>' and 'tensor<2x8x8xf32>'}}
  %o, %l = ppc.attention %q, %k, %v scale = 1.0 : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @attention_batch(%q: tensor<2x8x16xf32>, %k: tensor<3x8x16xf32>, %v: tensor<3x8x16xf32>) {
  // expected-error @+1 {{'ppc.attention' op q, k and v must have the same batch dimensions}}
  %o, %l = ppc.attention %q, %k, %v scale = 1.0 : (tensor<2x8x16xf32>, tensor<3x8x16xf32>, tensor<3x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @attention_lse_type(%q: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{'ppc.attention' op results must be 'tensor<2x8x16xbf16>' and 'tensor<2x8xf32>'}}
  %o, %l = ppc.attention %q, %q, %q scale = 1.0 : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x8xbf16>)
  return
}

// -----

func.func @attention_bias(%q: tensor<2x8x16xf32>, %b: tensor<8x7xf32>) {
  // expected-error @+1 {{'ppc.attention' op bias 'tensor<8x7xf32>' must broadcast to the scores' shape 'tensor<2x8x8xf32>'}}
  %o, %l = ppc.attention %q, %q, %q bias %b scale = 1.0 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<8x7xf32>) -> (tensor<2x8x16xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @attention_grad_types(%q: tensor<2x8x16xf32>, %l: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.attention_grad' op d_q, d_k and d_v must have the types of q, k and v}}
  %a, %b, %c = ppc.attention_grad %q, %q, %q, %q, %l, %q scale = 1.0 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x16xf32>)
  return
}
