// RUN: ppc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(ppc-fuse-rms-norm))' | FileCheck %s

// Tests transformers' LLaMA form: pow(x, 2), the mean over the last axis,
// + epsilon, 1 / sqrt, x * that, weight * the result. Nothing of the
// composition is left.
// CHECK-LABEL: func.func @llama
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = ppc.rms_norm %[[X]], %[[W]] axis = 2 epsilon = 9.99999997{{[0-9]*}}E-7 : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @llama(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %one = ppc.constant dense<1.0> : tensor<f32>
  %eps = ppc.constant dense<9.99999997E-7> : tensor<f32>
  %two = ppc.constant dense<2.0> : tensor<f32>
  %sq = ppc.pow %x, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %ms = ppc.reduce_mean %sq axes = [2] keepdims = true : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %v = ppc.add %ms, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s = ppc.sqrt %v : tensor<2x3x1xf32>
  %r = ppc.div %one, %s : (tensor<f32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %y = ppc.mul %x, %r : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %o = ppc.mul %w, %y : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// -----

// Tests x * x, epsilon first, reciprocal, the weight on the right.
// CHECK-LABEL: func.func @reciprocal
// CHECK-SAME:    (%[[X:.*]]: tensor<4x6xf64>, %[[W:.*]]: tensor<6xf64>)
// CHECK-NEXT:    %[[Y:.*]] = ppc.rms_norm %[[X]], %[[W]] axis = 1 epsilon = 1.000000e-05
// CHECK-NEXT:    return %[[Y]]
func.func @reciprocal(%x: tensor<4x6xf64>, %w: tensor<6xf64>) -> tensor<4x6xf64> {
  %eps = ppc.constant dense<1.0e-5> : tensor<1xf64>
  %sq = ppc.mul %x, %x : (tensor<4x6xf64>, tensor<4x6xf64>) -> tensor<4x6xf64>
  %ms = ppc.reduce_mean %sq axes = [1] keepdims = true : (tensor<4x6xf64>) -> tensor<4x1xf64>
  %v = ppc.add %eps, %ms : (tensor<1xf64>, tensor<4x1xf64>) -> tensor<4x1xf64>
  %s = ppc.sqrt %v : tensor<4x1xf64>
  %r = ppc.reciprocal %s : tensor<4x1xf64>
  %y = ppc.mul %r, %x : (tensor<4x1xf64>, tensor<4x6xf64>) -> tensor<4x6xf64>
  %o = ppc.mul %y, %w : (tensor<4x6xf64>, tensor<6xf64>) -> tensor<4x6xf64>
  return %o : tensor<4x6xf64>
}

// -----

// Tests x / sqrt(.) over two trailing axes without a weight: the scale is
// a constant one.
// CHECK-LABEL: func.func @divide_two_axes
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    %[[ONE:.*]] = ppc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[Y:.*]] = ppc.rms_norm %[[X]], %[[ONE]] axis = 1 epsilon = 0.0099999997{{[0-9]*}}
// CHECK-NEXT:    return %[[Y]]
func.func @divide_two_axes(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %eps = ppc.constant dense<0.01> : tensor<f32>
  %sq = ppc.mul %x, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %ms = ppc.reduce_mean %sq axes = [1, 2] keepdims = true : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %v = ppc.add %ms, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %s = ppc.sqrt %v : tensor<2x1x1xf32>
  %y = ppc.div %x, %s : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests that an intermediate with another reader stays (the mean square is
// returned too), and that the normalized value read by two ops keeps its
// own weight multiplication out of the fused op (scale of ones).
// CHECK-LABEL: func.func @shared
// CHECK-SAME:    (%[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK:         %[[MS:.*]] = ppc.reduce_mean
// CHECK:         %[[Y:.*]] = ppc.rms_norm %[[X]], %{{.*}} axis = 1
// CHECK-NEXT:    %[[O:.*]] = ppc.mul %[[W]], %[[Y]]
// CHECK-NEXT:    %[[P:.*]] = ppc.add %[[O]], %[[Y]]
// CHECK-NEXT:    return %[[P]], %[[MS]]
func.func @shared(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>) {
  %eps = ppc.constant dense<1.0e-6> : tensor<f32>
  %two = ppc.constant dense<2.0> : tensor<f32>
  %sq = ppc.pow %x, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %ms = ppc.reduce_mean %sq axes = [1] keepdims = true : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %v = ppc.add %ms, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = ppc.sqrt %v : tensor<2x1xf32>
  %y = ppc.div %x, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %o = ppc.mul %w, %y : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %p = ppc.add %o, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %p, %ms : tensor<2x8xf32>, tensor<2x1xf32>
}

// -----

// Tests what is not RMSNorm and stays: a mean over a leading axis, a square
// of another value than the one normalized, a power other than 2, an
// epsilon that is not a constant.
// CHECK-LABEL: func.func @not_rms_norm
// CHECK-NOT:     ppc.rms_norm
// CHECK:         return
func.func @not_rms_norm(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>, %e: tensor<f32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %eps = ppc.constant dense<1.0e-6> : tensor<f32>
  %two = ppc.constant dense<2.0> : tensor<f32>
  %three = ppc.constant dense<3.0> : tensor<f32>
  %sq = ppc.pow %x, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %ms0 = ppc.reduce_mean %sq axes = [0] keepdims = true : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %v0 = ppc.add %ms0, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s0 = ppc.sqrt %v0 : tensor<1x8xf32>
  %y0 = ppc.div %x, %s0 : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %ms1 = ppc.reduce_mean %sq axes = [1] keepdims = true : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %v1 = ppc.add %ms1, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s1 = ppc.sqrt %v1 : tensor<2x1xf32>
  %y1 = ppc.div %z, %s1 : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %cube = ppc.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %ms2 = ppc.reduce_mean %cube axes = [1] keepdims = true : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %v2 = ppc.add %ms2, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s2 = ppc.sqrt %v2 : tensor<2x1xf32>
  %y2 = ppc.div %x, %s2 : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %v3 = ppc.add %ms1, %e : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s3 = ppc.sqrt %v3 : tensor<2x1xf32>
  %y3 = ppc.div %x, %s3 : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return %y0, %y1, %y2, %y3 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
