// RUN: ppc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(ppc-simplify-one-hots))' | FileCheck %s

// Tests nll_loss's gradient summed by log_softmax's: the sum over the
// classes becomes where(0 <= t < C, s, 0) from the targets [N, 1]; the
// one-hot stays for its other reader.
// CHECK-LABEL: func.func @loss
// CHECK-SAME:    (%[[T:.*]]: tensor<6x1xi64>, %[[S:.*]]: tensor<f32>, %[[LP:.*]]: tensor<6x5xf32>)
// CHECK-DAG:     %[[ZERO:.*]] = ppc.constant dense<0.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[IOTA:.*]] = ppc.constant dense<{{\[\[}}0, 1, 2, 3, 4]]> : tensor<1x5xi64>
// CHECK:         %[[HOT:.*]] = ppc.equal %[[T]], %[[IOTA]]
// CHECK:         %[[G:.*]] = ppc.where %[[HOT]], %[[S]], %[[ZERO]]
// CHECK:         %[[C0:.*]] = ppc.constant {ppc.mb = 0 : i64} dense<0> : tensor<i64>
// CHECK:         %[[NEG:.*]] = ppc.less %[[T]], %[[C0]] {ppc.mb = 0 : i64}
// CHECK:         %[[NN:.*]] = ppc.not %[[NEG]]
// CHECK:         %[[C5:.*]] = ppc.constant {ppc.mb = 0 : i64} dense<5> : tensor<i64>
// CHECK:         %[[BELOW:.*]] = ppc.less %[[T]], %[[C5]]
// CHECK:         %[[IN:.*]] = ppc.and %[[NN]], %[[BELOW]]
// CHECK:         %[[SUM:.*]] = ppc.where %[[IN]], %[[S]], %[[ZERO]] {ppc.mb = 0 : i64} : (tensor<6x1xi1>, tensor<f32>, tensor<f32>) -> tensor<6x1xf32>
// CHECK-NOT:     ppc.reduce_sum
// CHECK:         %[[E:.*]] = ppc.exp %[[LP]]
// CHECK:         ppc.mul %[[E]], %[[SUM]]
func.func @loss(%t: tensor<6x1xi64>, %s: tensor<f32>, %lp: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %iota = ppc.constant dense<[[0, 1, 2, 3, 4]]> : tensor<1x5xi64>
  %hot = ppc.equal %t, %iota : (tensor<6x1xi64>, tensor<1x5xi64>) -> tensor<6x5xi1>
  %g = ppc.where %hot, %s, %zero : (tensor<6x5xi1>, tensor<f32>, tensor<f32>) -> tensor<6x5xf32>
  %sum = ppc.reduce_sum %g axes = [1] keepdims = true {ppc.mb = 0 : i64} : (tensor<6x5xf32>) -> tensor<6x1xf32>
  %e = ppc.exp %lp : tensor<6x5xf32>
  %m = ppc.mul %e, %sum : (tensor<6x5xf32>, tensor<6x1xf32>) -> tensor<6x5xf32>
  %dx = ppc.sub %g, %m : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  return %dx : tensor<6x5xf32>
}

// -----

// Tests the iota on the left, per-row scales [N, 1] (weights, ignored
// targets) and a sum without keepdims: the folded rows are reshaped.
// CHECK-LABEL: func.func @rows
// CHECK-SAME:    (%[[T:.*]]: tensor<4x1xi32>, %[[S:.*]]: tensor<4x1xf32>)
// CHECK:         %[[W:.*]] = ppc.where %{{.*}}, %[[S]], %{{.*}} : (tensor<4x1xi1>, tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK-NEXT:    %[[R:.*]] = ppc.reshape %[[W]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK-NEXT:    return %[[R]]
func.func @rows(%t: tensor<4x1xi32>, %s: tensor<4x1xf32>) -> tensor<4xf32> {
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %iota = ppc.constant dense<[[0, 1, 2]]> : tensor<1x3xi32>
  %hot = ppc.equal %iota, %t : (tensor<1x3xi32>, tensor<4x1xi32>) -> tensor<4x3xi1>
  %g = ppc.where %hot, %s, %zero : (tensor<4x3xi1>, tensor<4x1xf32>, tensor<f32>) -> tensor<4x3xf32>
  %sum = ppc.reduce_sum %g axes = [1] keepdims = false : (tensor<4x3xf32>) -> tensor<4xf32>
  return %sum : tensor<4xf32>
}

// -----

// Tests sums that are not of one-hot rows, which stay: a constant that is
// not 0, 1, ..., C - 1, a sum over the other axis, a non-zero otherwise, a
// scale that varies along the classes.
// CHECK-LABEL: func.func @not_one_hot
// CHECK-COUNT-4: ppc.reduce_sum
func.func @not_one_hot(%t: tensor<4x1xi64>, %s: tensor<f32>, %v: tensor<1x3xf32>)
    -> (tensor<4x1xf32>, tensor<1x3xf32>, tensor<4x1xf32>, tensor<4x1xf32>) {
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %one = ppc.constant dense<1.0> : tensor<f32>
  %iota = ppc.constant dense<[[0, 1, 2]]> : tensor<1x3xi64>
  %odd = ppc.constant dense<[[0, 2, 1]]> : tensor<1x3xi64>
  %h1 = ppc.equal %t, %odd : (tensor<4x1xi64>, tensor<1x3xi64>) -> tensor<4x3xi1>
  %g1 = ppc.where %h1, %s, %zero : (tensor<4x3xi1>, tensor<f32>, tensor<f32>) -> tensor<4x3xf32>
  %r1 = ppc.reduce_sum %g1 axes = [1] keepdims = true : (tensor<4x3xf32>) -> tensor<4x1xf32>
  %h2 = ppc.equal %t, %iota : (tensor<4x1xi64>, tensor<1x3xi64>) -> tensor<4x3xi1>
  %g2 = ppc.where %h2, %s, %zero : (tensor<4x3xi1>, tensor<f32>, tensor<f32>) -> tensor<4x3xf32>
  %r2 = ppc.reduce_sum %g2 axes = [0] keepdims = true : (tensor<4x3xf32>) -> tensor<1x3xf32>
  %g3 = ppc.where %h2, %s, %one : (tensor<4x3xi1>, tensor<f32>, tensor<f32>) -> tensor<4x3xf32>
  %r3 = ppc.reduce_sum %g3 axes = [1] keepdims = true : (tensor<4x3xf32>) -> tensor<4x1xf32>
  %g4 = ppc.where %h2, %v, %zero : (tensor<4x3xi1>, tensor<1x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %r4 = ppc.reduce_sum %g4 axes = [1] keepdims = true : (tensor<4x3xf32>) -> tensor<4x1xf32>
  return %r1, %r2, %r3, %r4 : tensor<4x1xf32>, tensor<1x3xf32>, tensor<4x1xf32>, tensor<4x1xf32>
}

// -----

// Tests nll_loss's gradient as autodiff writes it: the one-hot over the
// rows [N, C], reshaped to the log-probabilities' [B, T, C] and summed over
// the classes there. The one-hot is built in [B, T, C] from the targets
// and scales reshaped to [B, T, 1], and the sum from the targets.
// CHECK-LABEL: func.func @reshaped
// CHECK-SAME:    (%[[T:.*]]: tensor<6xi64>, %[[S:.*]]: tensor<6xf32>, %[[LP:.*]]: tensor<2x3x5xf32>)
// CHECK:         %[[IOTA:.*]] = ppc.constant {ppc.bwd = 3 : i64} dense<{{\[\[\[}}0, 1, 2, 3, 4]]]> : tensor<1x1x5xi64>
// CHECK:         %[[TR:.*]] = ppc.reshape %{{.*}} {ppc.bwd = 3 : i64} : tensor<6x1xi64> -> tensor<2x3x1xi64>
// CHECK-NEXT:    %[[HOT:.*]] = ppc.equal %[[TR]], %[[IOTA]] {ppc.bwd = 3 : i64} : (tensor<2x3x1xi64>, tensor<1x1x5xi64>) -> tensor<2x3x5xi1>
// CHECK-NEXT:    %[[SR:.*]] = ppc.reshape %{{.*}} {ppc.bwd = 3 : i64} : tensor<6x1xf32> -> tensor<2x3x1xf32>
// CHECK-NEXT:    %[[G:.*]] = ppc.where %[[HOT]], %[[SR]], %{{.*}} {ppc.bwd = 3 : i64} : (tensor<2x3x5xi1>, tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x5xf32>
// CHECK-NOT:     ppc.reduce_sum
// CHECK:         %[[SUM:.*]] = ppc.where %{{.*}}, %[[SR]], %{{.*}} : (tensor<2x3x1xi1>, tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
// CHECK:         %[[M:.*]] = ppc.mul %{{.*}}, %[[SUM]]
// CHECK-NEXT:    ppc.sub %[[G]], %[[M]]
func.func @reshaped(%t: tensor<6xi64>, %s: tensor<6xf32>, %lp: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %iota = ppc.constant dense<[[0, 1, 2, 3, 4]]> : tensor<1x5xi64>
  %t1 = ppc.reshape %t : tensor<6xi64> -> tensor<6x1xi64>
  %s1 = ppc.reshape %s : tensor<6xf32> -> tensor<6x1xf32>
  %hot = ppc.equal %t1, %iota : (tensor<6x1xi64>, tensor<1x5xi64>) -> tensor<6x5xi1>
  %g = ppc.where %hot, %s1, %zero {ppc.bwd = 3 : i64} : (tensor<6x5xi1>, tensor<6x1xf32>, tensor<f32>) -> tensor<6x5xf32>
  %g3 = ppc.reshape %g : tensor<6x5xf32> -> tensor<2x3x5xf32>
  %sum = ppc.reduce_sum %g3 axes = [2] keepdims = true : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
  %e = ppc.exp %lp : tensor<2x3x5xf32>
  %m = ppc.mul %e, %sum : (tensor<2x3x5xf32>, tensor<2x3x1xf32>) -> tensor<2x3x5xf32>
  %dx = ppc.sub %g3, %m : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %dx : tensor<2x3x5xf32>
}

// -----

// Tests reshapes that stay: one that moves the classes' axis, one of a
// one-hot read elsewhere too.
// CHECK-LABEL: func.func @reshapes_kept
// CHECK-COUNT-2: ppc.reshape %{{.*}} : tensor<6x4xf32>
func.func @reshapes_kept(%t: tensor<6x1xi64>, %s: tensor<f32>) -> (tensor<3x8xf32>, tensor<2x3x4xf32>, tensor<6x4xf32>) {
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %iota = ppc.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %h1 = ppc.equal %t, %iota : (tensor<6x1xi64>, tensor<1x4xi64>) -> tensor<6x4xi1>
  %g1 = ppc.where %h1, %s, %zero : (tensor<6x4xi1>, tensor<f32>, tensor<f32>) -> tensor<6x4xf32>
  %r1 = ppc.reshape %g1 : tensor<6x4xf32> -> tensor<3x8xf32>
  %h2 = ppc.equal %t, %iota : (tensor<6x1xi64>, tensor<1x4xi64>) -> tensor<6x4xi1>
  %g2 = ppc.where %h2, %s, %zero : (tensor<6x4xi1>, tensor<f32>, tensor<f32>) -> tensor<6x4xf32>
  %r2 = ppc.reshape %g2 : tensor<6x4xf32> -> tensor<2x3x4xf32>
  return %r1, %r2, %g2 : tensor<3x8xf32>, tensor<2x3x4xf32>, tensor<6x4xf32>
}

// -----

// Tests targets of a type the number of classes overflows (i8, 128
// classes: the bound 128 would wrap to -128), which stay a sum.
// CHECK-LABEL: func.func @narrow
// CHECK:         ppc.reduce_sum
func.func @narrow(%t: tensor<4x1xi8>, %s: tensor<f32>) -> tensor<4x1xf32> {
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %iota = ppc.constant dense<[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]]> : tensor<1x128xi8>
  %hot = ppc.equal %t, %iota : (tensor<4x1xi8>, tensor<1x128xi8>) -> tensor<4x128xi1>
  %g = ppc.where %hot, %s, %zero : (tensor<4x128xi1>, tensor<f32>, tensor<f32>) -> tensor<4x128xf32>
  %sum = ppc.reduce_sum %g axes = [1] keepdims = true : (tensor<4x128xf32>) -> tensor<4x1xf32>
  return %sum : tensor<4x1xf32>
}
