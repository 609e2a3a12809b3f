// RUN: ppc-opt %s -split-input-file -ppc-append-loss -verify-diagnostics | FileCheck %s

// Tests that logits [B, T, V] from one integer input get a `labels` argument
// after it and mean token cross-entropy as the result.
// CHECK-LABEL: func.func @forward
// CHECK-SAME:    (%[[IDS:arg[0-9]+]]: tensor<2x4xi64> {ppc.input = "ids"}, %[[LABELS:arg[0-9]+]]: tensor<2x4xi64> {ppc.input = "labels"}, %{{arg[0-9]+}}: tensor<8x16xf32> {ppc.param = "wte"})
// CHECK-SAME:    -> (tensor<f32> {ppc.output = "loss"})
// CHECK:         ppc.matmul
// CHECK:         %[[LOGITS:.*]] = ppc.matmul
// CHECK:         %[[LP:.*]] = ppc.log_softmax %[[LOGITS]] axis = 2 : tensor<2x4x16xf32>
// CHECK:         %[[FLAT:.*]] = ppc.reshape %[[LP]] : tensor<2x4x16xf32> -> tensor<8x16xf32>
// CHECK:         %[[FLATL:.*]] = ppc.reshape %[[LABELS]] : tensor<2x4xi64> -> tensor<8xi64>
// CHECK:         %[[LOSS:.*]] = ppc.nll_loss %[[FLAT]], %[[FLATL]] mean : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK:         return %[[LOSS]] : tensor<f32>
func.func @forward(%ids: tensor<2x4xi64> {ppc.input = "ids"}, %wte: tensor<8x16xf32> {ppc.param = "wte"}) -> (tensor<2x4x16xf32> {ppc.output = "logits"}) {
  %e = ppc.gather %wte[%ids] axis = 0 : (tensor<8x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
  %t = ppc.transpose %wte perm = [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %h = ppc.matmul %e, %t : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %logits = ppc.matmul %h, %wte : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  return %logits : tensor<2x4x16xf32>
}

// -----

// Tests that a model returning a scalar is trained on it as it is.
// CHECK-LABEL: func.func @forward
// CHECK-SAME:    -> (tensor<f32> {ppc.output = "my_loss"})
// CHECK-NOT:     ppc.nll_loss
func.func @forward(%w: tensor<4xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "my_loss"}) {
  %l = ppc.reduce_sum %w axes = [0] keepdims = false : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an output that is neither a loss nor logits is refused by name.
// expected-error @+1 {{graph output 'probs' ('tensor<2x4xf32>') is neither a scalar loss nor logits [B, T, V] computed from one integer input [B, T]}}
func.func @forward(%w: tensor<2x4xf32> {ppc.param = "w"}) -> (tensor<2x4xf32> {ppc.output = "probs"}) {
  return %w : tensor<2x4xf32>
}
