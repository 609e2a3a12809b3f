// RUN: ppc-opt %s -split-input-file -ppc-autodiff | FileCheck %s

// Tests that a parameter used twice (a tied weight) gets the sum of both
// uses' gradients, and that the gradients come back in argument order,
// tagged with the parameters' names.
// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME:    -> (tensor<f32> {ppc.output = "loss"}, tensor<3x3xf32> {ppc.grad = "w"}, tensor<3xf32> {ppc.grad = "b"})
// CHECK:         %[[H:.*]] = ppc.matmul %arg0, %arg1 {ppc.fwd = 0 : i64}
// CHECK:         %[[H2:.*]] = ppc.matmul %[[H]], %arg1 {ppc.fwd = 1 : i64}
// CHECK:         %[[DH2:.*]] = ppc.expand
// CHECK-DAG:     %[[HT:.*]] = ppc.transpose %[[H]] perm = [1, 0]
// CHECK-DAG:     %[[FROM2:.*]] = ppc.matmul %[[HT]], %[[DH2]] {ppc.bwd = 1 : i64}
// CHECK-DAG:     %[[XT:.*]] = ppc.transpose %arg0 perm = [1, 0]
// CHECK-DAG:     %[[FROM1:.*]] = ppc.matmul %[[XT]], %{{.*}} {ppc.bwd = 0 : i64}
// CHECK:         %[[DW:.*]] = ppc.add %[[FROM2]], %[[FROM1]] {ppc.bwd = 0 : i64} : (tensor<3x3xf32>, tensor<3x3xf32>)
// CHECK:         return %{{.*}}, %[[DW]], %{{.*}} : tensor<f32>, tensor<3x3xf32>, tensor<3xf32>
func.func @forward(%x: tensor<2x3xf32> {ppc.input = "x"}, %w: tensor<3x3xf32> {ppc.param = "w"},
                   %b: tensor<3xf32> {ppc.param = "b"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %h2 = ppc.matmul %h, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %y = ppc.add %h2, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = ppc.reduce_sum %y axes = [0, 1] keepdims = false : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an embedding lookup's gradient is a scatter-add into the table,
// that integer ids get none, and that a parameter that does not reach the
// loss gets zeros.
// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME:    -> (tensor<f32> {ppc.output = "loss"}, tensor<5x4xf32> {ppc.grad = "wte"}, tensor<4xf32> {ppc.grad = "unused"})
// CHECK-DAG:     %[[ZERO:.*]] = ppc.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-DAG:     %[[D:.*]] = ppc.scatter_add %{{.*}}[%arg0] axis = 0 {{{.*}}} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<5x4xf32>
// CHECK:         return %{{.*}}, %[[D]], %[[ZERO]]
func.func @forward(%ids: tensor<2x3xi64> {ppc.input = "ids"}, %wte: tensor<5x4xf32> {ppc.param = "wte"},
                   %unused: tensor<4xf32> {ppc.param = "unused"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %e = ppc.gather %wte[%ids] axis = 0 : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %l = ppc.reduce_mean %e axes = [0, 1, 2] keepdims = false : (tensor<2x3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that gradients stop at non-differentiable ops: the comparison feeds
// only a condition, so the where passes the adjoint to its value operands.
// CHECK-LABEL: func.func @forward_grad
// CHECK-NOT:     ppc.greater{{.*}}ppc.greater
// CHECK:         ppc.where
// CHECK:         return
func.func @forward(%w: tensor<4xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %pos = ppc.greater %w, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %r = ppc.where %pos, %w, %zero : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %l = ppc.reduce_sum %r axes = [0] keepdims = false : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a bf16 softmax's gradient is computed in f32 and rounded once,
// as fused backward kernels compute it: the rule reads the softmax's own
// (rounded) result and the result's gradient as f32, and its answer is cast
// back to bf16.
// CHECK-LABEL: func.func @forward_grad
// CHECK:         %[[P:.*]] = ppc.softmax %{{.*}} axis = 1 {ppc.fwd = 3 : i64} : tensor<2x4xbf16>
// CHECK:         %[[DP:.*]] = ppc.cast %{{.*}} {ppc.bwd = 4 : i64} : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK:         %[[PF:.*]] = ppc.cast %[[P]] {ppc.bwd = 3 : i64} : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK:         %[[DPF:.*]] = ppc.cast %[[DP]] {ppc.bwd = 3 : i64} : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK:         %[[T:.*]] = ppc.mul %[[DPF]], %[[PF]] {ppc.bwd = 3 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK:         %[[DH:.*]] = ppc.sub %[[T]], %{{.*}} {ppc.bwd = 3 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK:         ppc.cast %[[DH]] {ppc.bwd = 3 : i64} : tensor<2x4xf32> -> tensor<2x4xbf16>
func.func @forward(%x: tensor<2x4xf32> {ppc.input = "x"}, %w: tensor<4x4xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %xb = ppc.cast %x : tensor<2x4xf32> -> tensor<2x4xbf16>
  %wb = ppc.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
  %h = ppc.matmul %xb, %wb : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
  %p = ppc.softmax %h axis = 1 : tensor<2x4xbf16>
  %pf = ppc.cast %p : tensor<2x4xbf16> -> tensor<2x4xf32>
  %s = ppc.reduce_sum %pf axes = [0, 1] keepdims = false : (tensor<2x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that a constant factor of a bf16 gradient that bf16 cannot hold is
// applied in f32 and rounded once, as MixedPrecision applies an inexact f32
// scalar in the forward: erf's 2/sqrt(pi) (1.125 as a bf16 constant, which
// shrank every exported GELU's gradient by 0.3%) and a mean's 1/3. An exact
// factor (a mean's 1/4) stays a bf16 constant.
// CHECK-LABEL: func.func @forward_grad
// CHECK:         %[[QUARTER:.*]] = ppc.constant {{.*}}dense<2.500000e-01> : tensor<bf16>
// CHECK:         ppc.mul %{{.*}}, %[[QUARTER]] {ppc.bwd = 5 : i64} : (tensor<3x1xbf16>, tensor<bf16>) -> tensor<3x1xbf16>
// CHECK:         %[[M:.*]] = ppc.cast %{{.*}} {ppc.bwd = 4 : i64} : tensor<1x4xbf16> -> tensor<1x4xf32>
// CHECK:         %[[THIRD:.*]] = ppc.constant {{.*}}dense<0.333333343> : tensor<f32>
// CHECK:         %[[MS:.*]] = ppc.mul %[[M]], %[[THIRD]] {ppc.bwd = 4 : i64} : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
// CHECK:         ppc.cast %[[MS]] {ppc.bwd = 4 : i64} : tensor<1x4xf32> -> tensor<1x4xbf16>
// CHECK:         %[[G:.*]] = ppc.exp %{{.*}} {ppc.bwd = 3 : i64} : tensor<3x4xbf16>
// CHECK:         %[[GF:.*]] = ppc.cast %[[G]] {ppc.bwd = 3 : i64} : tensor<3x4xbf16> -> tensor<3x4xf32>
// CHECK:         %[[TWO:.*]] = ppc.constant {{.*}}dense<1.12837923> : tensor<f32>
// CHECK:         %[[D:.*]] = ppc.mul %[[GF]], %[[TWO]] {ppc.bwd = 3 : i64} : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
// CHECK:         %[[DB:.*]] = ppc.cast %[[D]] {ppc.bwd = 3 : i64} : tensor<3x4xf32> -> tensor<3x4xbf16>
// CHECK:         ppc.mul %{{.*}}, %[[DB]] {ppc.bwd = 3 : i64} : (tensor<3x4xbf16>, tensor<3x4xbf16>) -> tensor<3x4xbf16>
func.func @forward(%x: tensor<3x4xf32> {ppc.input = "x"}, %w: tensor<4x4xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %xb = ppc.cast %x : tensor<3x4xf32> -> tensor<3x4xbf16>
  %wb = ppc.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
  %h = ppc.matmul %xb, %wb : (tensor<3x4xbf16>, tensor<4x4xbf16>) -> tensor<3x4xbf16>
  %e = ppc.erf %h : tensor<3x4xbf16>
  %m = ppc.reduce_mean %e axes = [0] keepdims = true : (tensor<3x4xbf16>) -> tensor<1x4xbf16>
  %q = ppc.reduce_mean %e axes = [1] keepdims = true : (tensor<3x4xbf16>) -> tensor<3x1xbf16>
  %mf = ppc.cast %m : tensor<1x4xbf16> -> tensor<1x4xf32>
  %qf = ppc.cast %q : tensor<3x1xbf16> -> tensor<3x1xf32>
  %s = ppc.reduce_sum %mf axes = [0, 1] keepdims = false : (tensor<1x4xf32>) -> tensor<f32>
  %t = ppc.reduce_sum %qf axes = [0, 1] keepdims = false : (tensor<3x1xf32>) -> tensor<f32>
  %l = ppc.add %s, %t : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
