// RUN: ppc-opt %s -split-input-file -ppc-fold-into-gemms | FileCheck %s

// Tests ppc-fold-into-gemms: a batched product of a transposed operand,
// summed over its whole batch, becomes one product over the folded batch
// (a linear layer's weight gradient), and a matrix product that is only
// transposed is computed transposed; anything else is left as it is.

// The weight gradient of x : [B, T, d] @ w : [d, V]: B products of depth T
// and a sum over B become one product of depth B·T; the reshapes are views.
// The schedule's attributes move to the new ops, the layout does not.
// CHECK-LABEL: func.func @weight_grad
// CHECK:         %[[X:.*]] = ppc.reshape %arg0 {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : tensor<4x8x32xf32> -> tensor<32x32xf32>
// CHECK:         %[[T:.*]] = ppc.transpose %[[X]] perm = [1, 0] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64}
// CHECK:         %[[G:.*]] = ppc.reshape %arg1 {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : tensor<4x8x96xf32> -> tensor<32x96xf32>
// CHECK:         %[[P:.*]] = ppc.matmul %[[T]], %[[G]] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<32x32xf32>, tensor<32x96xf32>) -> tensor<32x96xf32>
// CHECK:         %[[S:.*]] = ppc.reshape %[[P]] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : tensor<32x96xf32> -> tensor<1x32x96xf32>
// CHECK:         %[[W:.*]] = ppc.reshape %[[S]] {ppc.step_grad = array<i64: 2>} : tensor<1x32x96xf32> -> tensor<32x96xf32>
// CHECK:         return %[[W]]
// CHECK-NOT:     ppc.shardings
// CHECK-NOT:     ppc.reduce_sum
ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 1]
func.func @weight_grad(%x: tensor<4x8x32xf32>, %g: tensor<4x8x96xf32>) -> tensor<32x96xf32> {
  %t = ppc.transpose %x perm = [0, 2, 1] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<4x8x32xf32>) -> tensor<4x32x8xf32>
  %p = ppc.matmul %t, %g {ppc.bwd = 3 : i64, ppc.mb = 0 : i64, ppc.shardings = [#ppc.sharding<@mesh, [[], [], []]>]} : (tensor<4x32x8xf32>, tensor<4x8x96xf32>) -> tensor<4x32x96xf32>
  %s = ppc.reduce_sum %p axes = [0] keepdims = true {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<4x32x96xf32>) -> tensor<1x32x96xf32>
  %w = ppc.reshape %s {ppc.step_grad = array<i64: 2>} : tensor<1x32x96xf32> -> tensor<32x96xf32>
  return %w : tensor<32x96xf32>
}

// -----

// Two batch dimensions, summed without keepdims; the transpose still read
// elsewhere stays.
// CHECK-LABEL: func.func @two_batch_dims
// CHECK:         %[[T:.*]] = ppc.transpose %arg0 perm = [0, 1, 3, 2]
// CHECK:         ppc.reshape %arg0 : tensor<2x3x5x7xf32> -> tensor<30x7xf32>
// CHECK:         ppc.transpose
// CHECK:         ppc.reshape %arg1 : tensor<2x3x5x4xf32> -> tensor<30x4xf32>
// CHECK:         %[[S:.*]] = ppc.matmul {{.*}} : (tensor<7x30xf32>, tensor<30x4xf32>) -> tensor<7x4xf32>
// CHECK-NEXT:    return %[[S]], %[[T]]
func.func @two_batch_dims(%x: tensor<2x3x5x7xf32>, %g: tensor<2x3x5x4xf32>) -> (tensor<7x4xf32>, tensor<2x3x7x5xf32>) {
  %t = ppc.transpose %x perm = [0, 1, 3, 2] : (tensor<2x3x5x7xf32>) -> tensor<2x3x7x5xf32>
  %p = ppc.matmul %t, %g : (tensor<2x3x7x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x7x4xf32>
  %s = ppc.reduce_sum %p axes = [0, 1] keepdims = false : (tensor<2x3x7x4xf32>) -> tensor<7x4xf32>
  return %s, %t : tensor<7x4xf32>, tensor<2x3x7x5xf32>
}

// -----

// Left alone: a left operand that is not transposed (its batch and rows are
// not contiguous), one broadcast over the batch, a sum over part of the
// batch, a product read twice, and a sum over a matrix dimension.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     tensor<{{[0-9]+}}x{{[0-9]+}}x{{bf16|f32}}>)
// CHECK-COUNT-5: ppc.reduce_sum
func.func @left_alone(%a: tensor<4x7x8xf32>, %x: tensor<4x8x7xf32>, %x1: tensor<1x8x7xf32>,
                      %g: tensor<4x8x5xf32>, %x4: tensor<2x4x8x7xf32>, %g4: tensor<2x4x8x5xf32>)
    -> (tensor<1x7x5xf32>, tensor<1x7x5xf32>, tensor<2x1x7x5xf32>, tensor<1x7x5xf32>, tensor<4x7x5xf32>, tensor<4x7x1xf32>) {
  %p0 = ppc.matmul %a, %g : (tensor<4x7x8xf32>, tensor<4x8x5xf32>) -> tensor<4x7x5xf32>
  %s0 = ppc.reduce_sum %p0 axes = [0] keepdims = true : (tensor<4x7x5xf32>) -> tensor<1x7x5xf32>
  %t1 = ppc.transpose %x1 perm = [0, 2, 1] : (tensor<1x8x7xf32>) -> tensor<1x7x8xf32>
  %p1 = ppc.matmul %t1, %g : (tensor<1x7x8xf32>, tensor<4x8x5xf32>) -> tensor<4x7x5xf32>
  %s1 = ppc.reduce_sum %p1 axes = [0] keepdims = true : (tensor<4x7x5xf32>) -> tensor<1x7x5xf32>
  %t2 = ppc.transpose %x4 perm = [0, 1, 3, 2] : (tensor<2x4x8x7xf32>) -> tensor<2x4x7x8xf32>
  %p2 = ppc.matmul %t2, %g4 : (tensor<2x4x7x8xf32>, tensor<2x4x8x5xf32>) -> tensor<2x4x7x5xf32>
  %s2 = ppc.reduce_sum %p2 axes = [1] keepdims = true : (tensor<2x4x7x5xf32>) -> tensor<2x1x7x5xf32>
  %t3 = ppc.transpose %x perm = [0, 2, 1] : (tensor<4x8x7xf32>) -> tensor<4x7x8xf32>
  %p3 = ppc.matmul %t3, %g : (tensor<4x7x8xf32>, tensor<4x8x5xf32>) -> tensor<4x7x5xf32>
  %s3 = ppc.reduce_sum %p3 axes = [0] keepdims = true : (tensor<4x7x5xf32>) -> tensor<1x7x5xf32>
  %s4 = ppc.reduce_sum %p3 axes = [2] keepdims = true : (tensor<4x7x5xf32>) -> tensor<4x7x1xf32>
  return %s0, %s1, %s2, %s3, %p3, %s4 : tensor<1x7x5xf32>, tensor<1x7x5xf32>, tensor<2x1x7x5xf32>, tensor<1x7x5xf32>, tensor<4x7x5xf32>, tensor<4x7x1xf32>
}

// -----

// A bf16 product folds too: one GEMM of depth B·T rounds the weight gradient
// once, as torch's linear backward does (docs/architecture.md).
// CHECK-LABEL: func.func @bf16
// CHECK:         %[[P:.*]] = ppc.matmul {{.*}} : (tensor<7x32xbf16>, tensor<32x5xbf16>) -> tensor<7x5xbf16>
// CHECK:         %[[S:.*]] = ppc.reshape %[[P]] : tensor<7x5xbf16> -> tensor<1x7x5xbf16>
// CHECK-NEXT:    return %[[S]]
// CHECK-NOT:     ppc.reduce_sum
func.func @bf16(%x: tensor<4x8x7xbf16>, %g: tensor<4x8x5xbf16>) -> tensor<1x7x5xbf16> {
  %t = ppc.transpose %x perm = [0, 2, 1] : (tensor<4x8x7xbf16>) -> tensor<4x7x8xbf16>
  %p = ppc.matmul %t, %g : (tensor<4x7x8xbf16>, tensor<4x8x5xbf16>) -> tensor<4x7x5xbf16>
  %s = ppc.reduce_sum %p axes = [0] keepdims = true : (tensor<4x7x5xbf16>) -> tensor<1x7x5xbf16>
  return %s : tensor<1x7x5xbf16>
}

// -----

// The gradient of a weight stored [out, in] (x @ transpose(w)): the folded
// product is only transposed, so it is computed transposed, its operands
// swapped and read transposed (the emitter's GEMM flags): no transpose runs.
// CHECK-LABEL: func.func @weight_grad_transposed
// CHECK:         %[[X:.*]] = ppc.reshape %arg0 : tensor<4x8x32xf32> -> tensor<32x32xf32>
// CHECK:         %[[G:.*]] = ppc.reshape %arg1 : tensor<4x8x96xf32> -> tensor<32x96xf32>
// CHECK:         %[[GT:.*]] = ppc.transpose %[[G]] perm = [1, 0] : (tensor<32x96xf32>) -> tensor<96x32xf32>
// CHECK:         %[[P:.*]] = ppc.matmul %[[GT]], %[[X]] : (tensor<96x32xf32>, tensor<32x32xf32>) -> tensor<96x32xf32>
// CHECK-NEXT:    return %[[P]]
func.func @weight_grad_transposed(%x: tensor<4x8x32xf32>, %g: tensor<4x8x96xf32>) -> tensor<96x32xf32> {
  %t = ppc.transpose %x perm = [0, 2, 1] : (tensor<4x8x32xf32>) -> tensor<4x32x8xf32>
  %p = ppc.matmul %t, %g : (tensor<4x32x8xf32>, tensor<4x8x96xf32>) -> tensor<4x32x96xf32>
  %s = ppc.reduce_sum %p axes = [0] keepdims = true : (tensor<4x32x96xf32>) -> tensor<1x32x96xf32>
  %r = ppc.reshape %s : tensor<1x32x96xf32> -> tensor<32x96xf32>
  %w = ppc.transpose %r perm = [1, 0] : (tensor<32x96xf32>) -> tensor<96x32xf32>
  return %w : tensor<96x32xf32>
}

// -----

// Left transposed: a product read besides its transpose, and a batched one.
// CHECK-LABEL: func.func @transposes_left_alone
// CHECK-COUNT-2: ppc.transpose %{{[0-9]+}} perm
func.func @transposes_left_alone(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<2x8x16xf32>)
    -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<2x4x8xf32>) {
  %p = ppc.matmul %a, %b : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %t = ppc.transpose %p perm = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %q = ppc.matmul %c, %b : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  %u = ppc.transpose %q perm = [0, 2, 1] : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  return %t, %p, %u : tensor<4x8xf32>, tensor<8x4xf32>, tensor<2x4x8xf32>
}
