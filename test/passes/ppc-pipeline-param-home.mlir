// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=1" "-ppc-partition=pp=4" "-ppc-pipeline=schedule=1f1b" | FileCheck %s --check-prefix=HOME

// Tests that with four stages each rank holds and updates exactly its own
// weight: the backward of the last layer (a constant loss gradient times w4)
// stays on the last stage instead of being recomputed where it is used.
// HOME: func.func @train_step_pp0(%arg0: tensor<4x8xf32> {ppc.param = "w1"
// HOME-NOT: ppc.param = "w{{[234]}}"
// HOME: func.func @train_step_pp1(%arg0: tensor<8x8xf32> {ppc.param = "w2"
// HOME-NOT: ppc.param = "w{{[134]}}"
// HOME: func.func @train_step_pp2(%arg0: tensor<8x8xf32> {ppc.param = "w3"
// HOME-NOT: ppc.param = "w{{[124]}}"
// HOME: func.func @train_step_pp3(%arg0: tensor<8x2xf32> {ppc.param = "w4"

func.func @forward(%x: tensor<8x4xf32> {ppc.input = "x"}, %w1: tensor<4x8xf32> {ppc.param = "w1"},
                   %w2: tensor<8x8xf32> {ppc.param = "w2"}, %w3: tensor<8x8xf32> {ppc.param = "w3"},
                   %w4: tensor<8x2xf32> {ppc.param = "w4"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h1 = ppc.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %a1 = ppc.tanh %h1 : tensor<8x8xf32>
  %h2 = ppc.matmul %a1, %w2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %a2 = ppc.tanh %h2 : tensor<8x8xf32>
  %h3 = ppc.matmul %a2, %w3 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %a3 = ppc.tanh %h3 : tensor<8x8xf32>
  %h4 = ppc.matmul %a3, %w4 : (tensor<8x8xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  %l = ppc.reduce_mean %h4 axes = [0, 1] keepdims = false : (tensor<8x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
