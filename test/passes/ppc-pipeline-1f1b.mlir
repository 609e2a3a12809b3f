// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=1f1b" \
// RUN:   | grep -o 'func.func @train_step_pp[0-9]*\|ppc.slot = "[FB][0-9]*@s[0-9]*"' | uniq | FileCheck %s --check-prefix=ORDER

// Tests the 1F1B order (p = 2, m = 4): rank 0 warms up with p - 1 = 1
// extra forward, then alternates, then drains; the last rank alternates
// from the start.
// ORDER:      func.func @train_step_pp0
// ORDER-NEXT: ppc.slot = "F0@s0"
// ORDER-NEXT: ppc.slot = "F1@s0"
// ORDER-NEXT: ppc.slot = "B0@s0"
// ORDER-NEXT: ppc.slot = "F2@s0"
// ORDER-NEXT: ppc.slot = "B1@s0"
// ORDER-NEXT: ppc.slot = "F3@s0"
// ORDER-NEXT: ppc.slot = "B2@s0"
// ORDER-NEXT: ppc.slot = "B3@s0"
// ORDER-NEXT: func.func @train_step_pp1
// ORDER-NEXT: ppc.slot = "F0@s1"
// ORDER-NEXT: ppc.slot = "B0@s1"
// ORDER-NEXT: ppc.slot = "F1@s1"
// ORDER-NEXT: ppc.slot = "B1@s1"
// ORDER-NEXT: ppc.slot = "F2@s1"
// ORDER-NEXT: ppc.slot = "B2@s1"
// ORDER-NEXT: ppc.slot = "F3@s1"
// ORDER-NEXT: ppc.slot = "B3@s1"
// ORDER-NOT:  ppc.slot

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
