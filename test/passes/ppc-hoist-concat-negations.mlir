// RUN: ppc-opt %s -split-input-file -ppc-hoist-concat-negations | FileCheck %s

// Tests ppc-hoist-concat-negations: a concat some of whose operands are
// negations read by it alone, read only by elementwise ops, becomes the
// concat of the negations' operands times a vector of signs along its axis.

// Rotary embedding's rotate-half, x * cos + concat(-x2, x1) * sin.
// CHECK-LABEL: func.func @rotate_half
// CHECK:         %[[X2:.*]] = ppc.slice %arg0 starts = [0, 0, 2]
// CHECK:         %[[X1:.*]] = ppc.slice %arg0 starts = [0, 0, 0]
// CHECK:         %[[C:.*]] = ppc.concat %[[X2]], %[[X1]] axis = 2 {ppc.fwd = 4 : i64}
// CHECK:         %[[S:.*]] = ppc.constant dense<[{{\[}}[-1.000000e+00, -1.000000e+00, 1.000000e+00, 1.000000e+00]]]> : tensor<1x1x4xbf16>
// CHECK:         %[[R:.*]] = ppc.mul %[[C]], %[[S]] {ppc.fwd = 4 : i64}
// CHECK:         ppc.mul %[[R]], %arg2
// CHECK-NOT:     ppc.neg
func.func @rotate_half(%x: tensor<2x3x4xbf16>, %cos: tensor<3x4xbf16>, %sin: tensor<3x4xbf16>) -> tensor<2x3x4xbf16> {
  %x2 = ppc.slice %x starts = [0, 0, 2] limits = [2, 3, 4] steps = [1, 1, 1] : (tensor<2x3x4xbf16>) -> tensor<2x3x2xbf16>
  %n = ppc.neg %x2 : tensor<2x3x2xbf16>
  %x1 = ppc.slice %x starts = [0, 0, 0] limits = [2, 3, 2] steps = [1, 1, 1] : (tensor<2x3x4xbf16>) -> tensor<2x3x2xbf16>
  %r = ppc.concat %n, %x1 axis = 2 {ppc.fwd = 4 : i64} : (tensor<2x3x2xbf16>, tensor<2x3x2xbf16>) -> tensor<2x3x4xbf16>
  %a = ppc.mul %x, %cos : (tensor<2x3x4xbf16>, tensor<3x4xbf16>) -> tensor<2x3x4xbf16>
  %b = ppc.mul %r, %sin : (tensor<2x3x4xbf16>, tensor<3x4xbf16>) -> tensor<2x3x4xbf16>
  %y = ppc.add %a, %b : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>) -> tensor<2x3x4xbf16>
  return %y : tensor<2x3x4xbf16>
}

// -----

// Its gradient's form, the second piece negated, along the first of two
// axes and in f32; and unequal pieces.
// CHECK-LABEL: func.func @second_negated
// CHECK:         %[[C:.*]] = ppc.concat %arg0, %arg1 axis = 0
// CHECK:         ppc.constant dense<[{{\[}}1.000000e+00], [-1.000000e+00], [-1.000000e+00]]> : tensor<3x1xf32>
// CHECK-NOT:     ppc.neg
func.func @second_negated(%a: tensor<1x5xf32>, %b: tensor<2x5xf32>, %h: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %n = ppc.neg %b : tensor<2x5xf32>
  %c = ppc.concat %a, %n axis = 0 : (tensor<1x5xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
  %s = ppc.add %h, %c : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return %s : tensor<3x5xf32>
}

// -----

// Left alone: a concat read by a product (the signs would be a kernel of
// their own), one returned, a negation read elsewhere too, integers, and a
// concat with nothing negated.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-4: ppc.neg
// CHECK-NOT:     ppc.constant
func.func @left_alone(%a: tensor<2x2xf32>, %w: tensor<4x3xf32>, %i: tensor<2x2xi64>)
    -> (tensor<2x3xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x4xi64>, tensor<2x4xf32>) {
  %n1 = ppc.neg %a : tensor<2x2xf32>
  %c1 = ppc.concat %n1, %a axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %p = ppc.matmul %c1, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %n2 = ppc.neg %a : tensor<2x2xf32>
  %c2 = ppc.concat %n2, %a axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %n3 = ppc.neg %a : tensor<2x2xf32>
  %c3 = ppc.concat %n3, %a axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %e3 = ppc.exp %c3 : tensor<2x4xf32>
  %n4 = ppc.neg %i : tensor<2x2xi64>
  %c4 = ppc.concat %n4, %i axis = 1 : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x4xi64>
  %c5 = ppc.concat %a, %a axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %e5 = ppc.exp %c5 : tensor<2x4xf32>
  return %p, %c2, %e3, %n3, %c4, %e5 : tensor<2x3xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x4xi64>, tensor<2x4xf32>
}
