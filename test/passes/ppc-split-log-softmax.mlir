// RUN: ppc-opt %s -split-input-file -ppc-split-log-softmax | FileCheck %s

// Tests ppc-split-log-softmax: a log-softmax read only by nll_losses
// (through reshapes) and elementwise ops becomes log_sum_exp of its input,
// each reader reading x - log_sum_exp(x), each through its own copy of the
// widening cast and window its logits come through.

// A padded language-model head's loss and its gradient's exp, in bf16.
// CHECK-LABEL: func.func @loss
// CHECK:         %[[W0:.*]] = ppc.slice %arg0 starts = [0, 0, 0] limits = [2, 3, 5] steps = [1, 1, 1] {ppc.fwd = 3 : i64, ppc.mb = 0 : i64}
// CHECK-NEXT:    %[[X0:.*]] = ppc.cast %[[W0]] {ppc.fwd = 3 : i64, ppc.mb = 0 : i64}
// CHECK-NEXT:    %[[L:.*]] = ppc.log_sum_exp %[[X0]] axis = 2 {ppc.fwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
// CHECK-NEXT:    %[[W1:.*]] = ppc.slice %arg0 {{.*}} {ppc.fwd = 4 : i64, ppc.mb = 0 : i64}
// CHECK-NEXT:    %[[X1:.*]] = ppc.cast %[[W1]] {ppc.fwd = 4 : i64, ppc.mb = 0 : i64}
// CHECK-NEXT:    %[[D1:.*]] = ppc.sub %[[X1]], %[[L]] {ppc.fwd = 4 : i64, ppc.mb = 0 : i64}
// CHECK-NEXT:    %[[R:.*]] = ppc.reshape %[[D1]]
// CHECK-NEXT:    ppc.nll_loss %[[R]], %arg1 mean
// CHECK:         %[[W2:.*]] = ppc.slice %arg0 {{.*}} {ppc.bwd = 3 : i64, ppc.mb = 0 : i64}
// CHECK-NEXT:    %[[X2:.*]] = ppc.cast %[[W2]] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64}
// CHECK-NEXT:    %[[D2:.*]] = ppc.sub %[[X2]], %[[L]] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64}
// CHECK-NEXT:    ppc.exp %[[D2]] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64}
// CHECK-NOT:     ppc.log_softmax
func.func @loss(%logits: tensor<2x3x8xbf16>, %t: tensor<6xi64>, %g: tensor<2x3x1xf32>) -> (tensor<f32>, tensor<2x3x5xf32>) {
  %w = ppc.slice %logits starts = [0, 0, 0] limits = [2, 3, 5] steps = [1, 1, 1] : (tensor<2x3x8xbf16>) -> tensor<2x3x5xbf16>
  %x = ppc.cast %w {ppc.fwd = 2 : i64, ppc.mb = 0 : i64} : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
  %y = ppc.log_softmax %x axis = 2 {ppc.fwd = 3 : i64, ppc.mb = 0 : i64} : tensor<2x3x5xf32>
  %r = ppc.reshape %y {ppc.fwd = 4 : i64, ppc.mb = 0 : i64} : tensor<2x3x5xf32> -> tensor<6x5xf32>
  %loss = ppc.nll_loss %r, %t mean {ppc.fwd = 5 : i64, ppc.mb = 0 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  %e = ppc.exp %y {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : tensor<2x3x5xf32>
  %m = ppc.mul %e, %g {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<2x3x5xf32>, tensor<2x3x1xf32>) -> tensor<2x3x5xf32>
  return %loss, %m : tensor<f32>, tensor<2x3x5xf32>
}

// -----

// An f32 program's: no view chain to copy, the input read by all; two
// elementwise readers share one difference.
// CHECK-LABEL: func.func @dense
// CHECK:         %[[L:.*]] = ppc.log_sum_exp %arg0 axis = 1
// CHECK-NEXT:    %[[D1:.*]] = ppc.sub %arg0, %[[L]]
// CHECK-NEXT:    ppc.nll_loss %[[D1]], %arg1 sum
// CHECK-NEXT:    %[[D2:.*]] = ppc.sub %arg0, %[[L]]
// CHECK-NEXT:    ppc.exp %[[D2]]
// CHECK-NEXT:    ppc.neg %[[D2]]
// CHECK-NOT:     ppc.sub
func.func @dense(%x: tensor<4x6xf32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x6xf32>, tensor<4x6xf32>) {
  %y = ppc.log_softmax %x axis = 1 : tensor<4x6xf32>
  %loss = ppc.nll_loss %y, %t sum : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  %e = ppc.exp %y : tensor<4x6xf32>
  %n = ppc.neg %y : tensor<4x6xf32>
  return %loss, %e, %n : tensor<f32>, tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// Left alone: a log-softmax that is returned, one read by a reduction, one
// read by no loss (nothing to spare), and one in bf16 (its shift would be
// rounded by up to 0.03).
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-4: ppc.log_softmax
// CHECK-NOT:     ppc.log_sum_exp
func.func @left_alone(%x: tensor<4x6xf32>, %t: tensor<4xi64>) -> (tensor<4x6xf32>, tensor<f32>, tensor<4x1xf32>, tensor<4x6xf32>, tensor<bf16>) {
  %y = ppc.log_softmax %x axis = 1 : tensor<4x6xf32>
  %loss = ppc.nll_loss %y, %t sum : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  %z = ppc.log_softmax %x axis = 1 : tensor<4x6xf32>
  %loss2 = ppc.nll_loss %z, %t sum : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  %s = ppc.reduce_sum %z axes = [1] keepdims = true : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %w = ppc.log_softmax %x axis = 1 : tensor<4x6xf32>
  %e = ppc.exp %w : tensor<4x6xf32>
  %sum = ppc.add %loss, %loss2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %xb = ppc.cast %x : tensor<4x6xf32> -> tensor<4x6xbf16>
  %yb = ppc.log_softmax %xb axis = 1 : tensor<4x6xbf16>
  %lossb = ppc.nll_loss %yb, %t sum : (tensor<4x6xbf16>, tensor<4xi64>) -> tensor<bf16>
  return %y, %sum, %s, %e, %lossb : tensor<4x6xf32>, tensor<f32>, tensor<4x1xf32>, tensor<4x6xf32>, tensor<bf16>
}
