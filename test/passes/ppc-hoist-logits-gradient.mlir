// RUN: ppc-opt %s -split-input-file -ppc-hoist-logits-gradient | FileCheck %s

// Tests ppc-hoist-logits-gradient: the elementwise chain that reads a
// log_sum_exp and has the logits' rows moves, with what it reads that comes
// later, to just after the log_sum_exp; nothing moves when the chain
// depends on the loss, on a collective, on a recomputed clone or on
// another micro-batch's op.

// A padded head's loss and its gradient: the gradient (and the target mask
// it reads, computed after the loss) moves before the loss, in order.
// The loss's own difference, which reads the log_sum_exp too but only the
// nll_loss reads, stays with the loss, after the gradient.
// CHECK-LABEL: func.func @loss
// CHECK:         %[[L:.*]] = ppc.log_sum_exp
// CHECK-NEXT:    %[[T:.*]] = ppc.reshape %arg1 : tensor<6xi64> -> tensor<2x3x1xi64>
// CHECK-NEXT:    %[[EQ:.*]] = ppc.equal %[[T]], %arg2
// CHECK-NEXT:    ppc.constant
// CHECK-NEXT:    ppc.constant
// CHECK-NEXT:    %[[HOT:.*]] = ppc.where %[[EQ]]
// CHECK-NEXT:    %[[XF:.*]] = ppc.cast %arg0 : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[D:.*]] = ppc.sub %[[XF]], %[[L]]
// CHECK-NEXT:    %[[E:.*]] = ppc.exp %[[D]]
// CHECK-NEXT:    %[[G:.*]] = ppc.sub %[[E]], %[[HOT]]
// CHECK-NEXT:    %[[GB:.*]] = ppc.cast %[[G]] : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
// CHECK-NEXT:    ppc.slice %arg0
// CHECK-NEXT:    ppc.cast
// CHECK-NEXT:    %[[S:.*]] = ppc.sub {{.*}}, %[[L]] : (tensor<2x3x5xf32>
// CHECK-NEXT:    %[[R:.*]] = ppc.reshape %[[S]]
// CHECK-NEXT:    %[[LOSS:.*]] = ppc.nll_loss %[[R]]
// CHECK-NEXT:    %[[DW:.*]] = ppc.matmul %[[GB]], %arg3
// CHECK-NEXT:    return %[[LOSS]], %[[DW]]
func.func @loss(%x: tensor<2x3x8xbf16>, %t: tensor<6xi64>, %iota: tensor<1x1x8xi64>, %w: tensor<8x4xbf16>) -> (tensor<f32>, tensor<2x3x4xbf16>) {
  %w0 = ppc.slice %x starts = [0, 0, 0] limits = [2, 3, 5] steps = [1, 1, 1] : (tensor<2x3x8xbf16>) -> tensor<2x3x5xbf16>
  %c0 = ppc.cast %w0 : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
  %l = ppc.log_sum_exp %c0 axis = 2 : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
  %w1 = ppc.slice %x starts = [0, 0, 0] limits = [2, 3, 5] steps = [1, 1, 1] : (tensor<2x3x8xbf16>) -> tensor<2x3x5xbf16>
  %c1 = ppc.cast %w1 : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
  %s = ppc.sub %c1, %l : (tensor<2x3x5xf32>, tensor<2x3x1xf32>) -> tensor<2x3x5xf32>
  %r = ppc.reshape %s : tensor<2x3x5xf32> -> tensor<6x5xf32>
  %loss = ppc.nll_loss %r, %t mean : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  %t3 = ppc.reshape %t : tensor<6xi64> -> tensor<2x3x1xi64>
  %eq = ppc.equal %t3, %iota : (tensor<2x3x1xi64>, tensor<1x1x8xi64>) -> tensor<2x3x8xi1>
  %one = ppc.constant dense<1.0> : tensor<f32>
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %hot = ppc.where %eq, %one, %zero : (tensor<2x3x8xi1>, tensor<f32>, tensor<f32>) -> tensor<2x3x8xf32>
  %xf = ppc.cast %x : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
  %d = ppc.sub %xf, %l : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %e = ppc.exp %d : tensor<2x3x8xf32>
  %g = ppc.sub %e, %hot : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %gb = ppc.cast %g : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
  %dw = ppc.matmul %gb, %w : (tensor<2x3x8xbf16>, tensor<8x4xbf16>) -> tensor<2x3x4xbf16>
  return %loss, %dw : tensor<f32>, tensor<2x3x4xbf16>
}

// -----

// A gradient scaled by the loss itself cannot run before it: nothing moves
// (the exp of %y stays between the loss and the gradient).
// CHECK-LABEL: func.func @reads_the_loss
// CHECK:         ppc.log_sum_exp
// CHECK-NEXT:    ppc.sub
// CHECK-NEXT:    %[[LOSS:.*]] = ppc.nll_loss
// CHECK-NEXT:    ppc.exp %arg2
// CHECK-NEXT:    ppc.sub
// CHECK-NEXT:    ppc.exp
// CHECK-NEXT:    ppc.mul {{.*}}, %[[LOSS]]
func.func @reads_the_loss(%x: tensor<4x6xf32>, %t: tensor<4xi64>, %y: tensor<4x6xf32>) -> (tensor<f32>, tensor<4x6xf32>, tensor<4x6xf32>) {
  %l = ppc.log_sum_exp %x axis = 1 : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %s = ppc.sub %x, %l : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  %loss = ppc.nll_loss %s, %t mean : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  %z = ppc.exp %y : tensor<4x6xf32>
  %d = ppc.sub %x, %l : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  %e = ppc.exp %d : tensor<4x6xf32>
  %g = ppc.mul %e, %loss : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  return %loss, %g, %z : tensor<f32>, tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// Nor when the chain reads a collective's result (the mesh's other ranks
// take part in it in program order).
// CHECK-LABEL: func.func @reads_a_collective
// CHECK:         ppc.log_sum_exp
// CHECK-NEXT:    ppc.nll_loss
// CHECK-NEXT:    ppc.exp %arg2
// CHECK-NEXT:    ppc.all_reduce
// CHECK-NEXT:    ppc.sub
ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 1]
func.func @reads_a_collective(%x: tensor<4x6xf32>, %t: tensor<4xi64>, %y: tensor<4x6xf32>) -> (tensor<f32>, tensor<4x6xf32>) {
  %l = ppc.log_sum_exp %x axis = 1 : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %loss = ppc.nll_loss %x, %t mean : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  %z = ppc.exp %y : tensor<4x6xf32>
  %a = ppc.all_reduce %z on @mesh["dp"] sum : tensor<4x6xf32>
  %d = ppc.sub %a, %l : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  return %loss, %d : tensor<f32>, tensor<4x6xf32>
}

// -----

// Nor when what the chain reads is another micro-batch's, or a clone that
// ppc-recompute placed before its reader.
// CHECK-LABEL: func.func @other_micro_batch
// CHECK:         ppc.log_sum_exp
// CHECK-NEXT:    ppc.nll_loss
// CHECK-NEXT:    ppc.exp %arg2 {ppc.mb = 1 : i64}
// CHECK-NEXT:    ppc.sub
// CHECK-LABEL: func.func @recomputed
// CHECK:         ppc.log_sum_exp
// CHECK-NEXT:    ppc.nll_loss
// CHECK-NEXT:    ppc.exp %arg2 {ppc.recomputed
// CHECK-NEXT:    ppc.sub
func.func @other_micro_batch(%x: tensor<4x6xf32>, %t: tensor<4xi64>, %y: tensor<4x6xf32>) -> (tensor<f32>, tensor<4x6xf32>) {
  %l = ppc.log_sum_exp %x axis = 1 {ppc.mb = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %loss = ppc.nll_loss %x, %t mean {ppc.mb = 0 : i64} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  %z = ppc.exp %y {ppc.mb = 1 : i64} : tensor<4x6xf32>
  %d = ppc.sub %z, %l {ppc.mb = 0 : i64} : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  return %loss, %d : tensor<f32>, tensor<4x6xf32>
}
func.func @recomputed(%x: tensor<4x6xf32>, %t: tensor<4xi64>, %y: tensor<4x6xf32>) -> (tensor<f32>, tensor<4x6xf32>) {
  %l = ppc.log_sum_exp %x axis = 1 : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %loss = ppc.nll_loss %x, %t mean : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  %z = ppc.exp %y {ppc.recomputed = "blocks.0"} : tensor<4x6xf32>
  %d = ppc.sub %z, %l : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  return %loss, %d : tensor<f32>, tensor<4x6xf32>
}
