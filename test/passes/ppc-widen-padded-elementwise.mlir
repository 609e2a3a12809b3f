// RUN: ppc-opt %s -split-input-file -ppc-widen-padded-elementwise | FileCheck %s

// Tests ppc-widen-padded-elementwise: a concat that pads an elementwise
// value with zeros, the value computed from windows [0, n) of tensors of the
// padded size, from values broadcast along the axis and from constants,
// becomes that value computed on the padded shape with zeros selected in
// the padding.

// The loss's gradient over a padded vocabulary (8 classes of 5 used): the
// one-hot's class indices get zeros in the padding.
// CHECK-LABEL: func.func @loss_gradient
// CHECK-DAG:     %[[I:.*]] = ppc.constant dense<[{{\[}}[0, 1, 2, 3, 4, 0, 0, 0]]]> : tensor<1x1x8xi64>
// CHECK:         %[[EQ:.*]] = ppc.equal %arg1, %[[I]] : (tensor<2x3x1xi64>, tensor<1x1x8xi64>) -> tensor<2x3x8xi1>
// CHECK:         %[[X:.*]] = ppc.cast %arg0 : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
// CHECK:         %[[D:.*]] = ppc.sub %[[X]], %arg2 : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
// CHECK:         %[[G:.*]] = ppc.cast {{.*}} : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
// CHECK:         %[[M:.*]] = ppc.constant dense<[{{\[}}[true, true, true, true, true, false, false, false]]]> : tensor<1x1x8xi1>
// CHECK:         %[[Z:.*]] = ppc.constant dense<0.000000e+00> : tensor<bf16>
// CHECK:         %[[W:.*]] = ppc.where %[[M]], %[[G]], %[[Z]] : (tensor<1x1x8xi1>, tensor<2x3x8xbf16>, tensor<bf16>) -> tensor<2x3x8xbf16>
// CHECK:         return %[[W]]
// CHECK-NOT:     ppc.concat
// CHECK-NOT:     ppc.slice
func.func @loss_gradient(%p: tensor<2x3x8xbf16>, %t: tensor<2x3x1xi64>, %lse: tensor<2x3x1xf32>) -> tensor<2x3x8xbf16> {
  %classes = ppc.constant dense<[[[0, 1, 2, 3, 4]]]> : tensor<1x1x5xi64>
  %eq = ppc.equal %t, %classes : (tensor<2x3x1xi64>, tensor<1x1x5xi64>) -> tensor<2x3x5xi1>
  %one = ppc.constant dense<-1.0> : tensor<f32>
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %hot = ppc.where %eq, %one, %zero : (tensor<2x3x5xi1>, tensor<f32>, tensor<f32>) -> tensor<2x3x5xf32>
  %w = ppc.slice %p starts = [0, 0, 0] limits = [2, 3, 5] steps = [1, 1, 1] : (tensor<2x3x8xbf16>) -> tensor<2x3x5xbf16>
  %x = ppc.cast %w : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
  %d = ppc.sub %x, %lse : (tensor<2x3x5xf32>, tensor<2x3x1xf32>) -> tensor<2x3x5xf32>
  %e = ppc.exp %d : tensor<2x3x5xf32>
  %s = ppc.sub %hot, %e : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %g = ppc.cast %s : tensor<2x3x5xf32> -> tensor<2x3x5xbf16>
  %pad = ppc.constant dense<0.0> : tensor<2x3x3xbf16>
  %c = ppc.concat %g, %pad axis = 2 : (tensor<2x3x5xbf16>, tensor<2x3x3xbf16>) -> tensor<2x3x8xbf16>
  return %c : tensor<2x3x8xbf16>
}

// -----

// Along the first axis, with a rank-1 operand broadcast from the right.
// CHECK-LABEL: func.func @first_axis
// CHECK:         %[[A:.*]] = ppc.add %arg0, %arg1 : (tensor<6x4xf32>, tensor<4xf32>) -> tensor<6x4xf32>
// CHECK:         ppc.where %{{.*}}, %[[A]], %{{.*}} : (tensor<6x1xi1>, tensor<6x4xf32>, tensor<f32>) -> tensor<6x4xf32>
func.func @first_axis(%p: tensor<6x4xf32>, %b: tensor<4xf32>) -> tensor<6x4xf32> {
  %w = ppc.slice %p starts = [0, 0] limits = [5, 4] steps = [1, 1] : (tensor<6x4xf32>) -> tensor<5x4xf32>
  %a = ppc.add %w, %b : (tensor<5x4xf32>, tensor<4xf32>) -> tensor<5x4xf32>
  %pad = ppc.constant dense<0.0> : tensor<1x4xf32>
  %c = ppc.concat %a, %pad axis = 0 : (tensor<5x4xf32>, tensor<1x4xf32>) -> tensor<6x4xf32>
  return %c : tensor<6x4xf32>
}

// -----

// Left alone: a piece that reads a tensor of the unpadded size (not a
// window), a window that does not start at 0, padding that is not zero, a
// piece that is not elementwise, a piece whose tree fails after an op of it
// was copied, and one with an op read elsewhere too; nothing is left behind
// (one exp of the window is the original's).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     %arg0 : tensor<2x8xf32>
// CHECK-NOT:     ppc.where
// CHECK:         return
func.func @left_alone(%p: tensor<2x8xf32>, %q: tensor<2x5xf32>, %m: tensor<5x5xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2xf32>) {
  %w = ppc.slice %p starts = [0, 0] limits = [2, 5] steps = [1, 1] : (tensor<2x8xf32>) -> tensor<2x5xf32>
  %a = ppc.add %w, %q : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %pad = ppc.constant dense<0.0> : tensor<2x3xf32>
  %c1 = ppc.concat %a, %pad axis = 1 : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  %v = ppc.slice %p starts = [0, 1] limits = [2, 6] steps = [1, 1] : (tensor<2x8xf32>) -> tensor<2x5xf32>
  %e = ppc.exp %v : tensor<2x5xf32>
  %c2 = ppc.concat %e, %pad axis = 1 : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  %e2 = ppc.exp %w : tensor<2x5xf32>
  %ones = ppc.constant dense<1.0> : tensor<2x3xf32>
  %c3 = ppc.concat %e2, %ones axis = 1 : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  %mm = ppc.matmul %w, %m : (tensor<2x5xf32>, tensor<5x5xf32>) -> tensor<2x5xf32>
  %c4 = ppc.concat %mm, %pad axis = 1 : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  %e3 = ppc.neg %w : tensor<2x5xf32>
  %a3 = ppc.add %e3, %q : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %c5 = ppc.concat %a3, %pad axis = 1 : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  %e4 = ppc.tanh %w : tensor<2x5xf32>
  %c6 = ppc.concat %e4, %pad axis = 1 : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x8xf32>
  %s4 = ppc.reduce_sum %e4 axes = [1] keepdims = false : (tensor<2x5xf32>) -> tensor<2xf32>
  return %c1, %c2, %c3, %c4, %c5, %c6, %s4 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2xf32>
}
