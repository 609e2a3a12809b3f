// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=1" "-ppc-partition=pp=8" "-ppc-pipeline=schedule=1f1b" | FileCheck %s --check-prefix=LAST

// Tests that with one stage per forward op the last stage, which holds no
// parameter and so runs no optimizer, still returns the step's outputs:
// the learning rate it reports is computed there from the lr argument,
// which that rank now takes.
// LAST-LABEL: func.func @train_step_pp7
// LAST-SAME:    (%[[LR:arg[0-9]+]]: tensor<f64> {ppc.hyper = "lr"
// LAST-SAME:    -> (tensor<f32> {ppc.output = "loss"{{.*}}}, tensor<f32> {ppc.output = "grad_norm"{{.*}}}, tensor<f32> {ppc.output = "lr"
// LAST:         %[[OUT:.*]] = ppc.cast %[[LR]] {{{.*}}ppc.slot = "step"} : tensor<f64> -> tensor<f32>
// LAST:         return %{{.*}}, %{{.*}}, %[[OUT]] :

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
