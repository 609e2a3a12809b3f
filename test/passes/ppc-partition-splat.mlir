// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 data-parallel=2" "-ppc-partition=dp=2 tp=1" | FileCheck %s

// Tests that a splat constant a rank wants split is made split, where it
// is wanted: no constant of the global batch's shape stays on every rank,
// and no all_slice cuts one (the QKV gradient's zeros of [batch, T, 3d]
// were held whole by every data-parallel rank through the forward).
// CHECK-LABEL: func.func @train_step
// CHECK-NOT:     tensor<4x5xf32>
// CHECK-NOT:     ppc.all_slice
// CHECK:         %[[H:.*]] = ppc.matmul {{.*}} -> tensor<2x5xf32>
// CHECK-NOT:     ppc.all_slice
// CHECK:         %[[TWO:.*]] = ppc.constant {ppc.value = "{{[^"]*}}"} dense<2.000000e+00> : tensor<2x5xf32>
// CHECK-NEXT:    ppc.mul %[[H]], %[[TWO]] {{.*}} -> tensor<2x5xf32>
// CHECK-NOT:     tensor<4x5xf32>
// CHECK-NOT:     ppc.all_slice
func.func @forward(%x: tensor<4x3xf32> {ppc.input = "x"}, %w: tensor<3x5xf32> {ppc.param = "w"})
    -> (tensor<f32> {ppc.output = "loss"}) {
  %two = ppc.constant dense<2.0> : tensor<4x5xf32>
  %h = ppc.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %y = ppc.mul %h, %two : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %t = ppc.tanh %y : tensor<4x5xf32>
  %l = ppc.reduce_mean %t axes = [0, 1] keepdims = false : (tensor<4x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
