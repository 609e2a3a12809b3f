// RUN: ppc-opt %s -ppc-autodiff "-ppc-build-train-step=optimizer=adamw weight-decay=0.1" -canonicalize -cse | FileCheck %s

// Tests that AdamW's step-dependent factors (bias corrections, step size,
// 1 - beta, the decay) are computed once per step and cast once to the
// parameters' type, before the updates, without a parameter's name: every
// update reads the same values, so that a step of many parameters does not
// compute (and launch) them once per parameter. Each update's own ops name
// their parameter (ppc.optimizer), which ppc-offload moves to the host.
// CHECK-LABEL: func.func @train_step
// CHECK-COUNT-2: ppc.pow
// CHECK:         %[[DECAY:.*]] = ppc.cast %{{.*}} : tensor<f64> -> tensor<f32>
// CHECK-NOT:     ppc.optimizer
// CHECK:         ppc.mul %{{.*}}, %[[DECAY]] {ppc.optimizer = "a"}
// CHECK-NOT:     ppc.pow
// CHECK:         ppc.mul %{{.*}}, %[[DECAY]] {ppc.optimizer = "b"}
// CHECK-NOT:     ppc.pow
// CHECK:         return
func.func @forward(%x: tensor<2x3xf32> {ppc.input = "x"}, %a: tensor<3x3xf32> {ppc.param = "a"}, %b: tensor<3xf32> {ppc.param = "b"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %a : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %y = ppc.add %h, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = ppc.reduce_mean %y axes = [0, 1] keepdims = false : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
