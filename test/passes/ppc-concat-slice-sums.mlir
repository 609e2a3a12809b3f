// RUN: ppc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(ppc-concat-slice-sums))' | FileCheck %s

// Tests the fused QKV projection's gradient as autodiff writes it: three
// slices' gradients inserted into zeros (one constant) and added, in any
// order of the windows. One concat in the windows' order; nothing else left.
// CHECK-LABEL: func.func @qkv
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x3x4xbf16>, %[[K:.*]]: tensor<2x3x4xbf16>, %[[V:.*]]: tensor<2x3x4xbf16>)
// CHECK-NEXT:    %[[C:.*]] = ppc.concat %[[Q]], %[[K]], %[[V]] axis = 2 {ppc.bwd = 7 : i64} : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3x4xbf16>) -> tensor<2x3x12xbf16>
// CHECK-NEXT:    return %[[C]]
func.func @qkv(%q: tensor<2x3x4xbf16>, %k: tensor<2x3x4xbf16>, %v: tensor<2x3x4xbf16>) -> tensor<2x3x12xbf16> {
  %zeros = ppc.constant dense<0.0> : tensor<2x3x12xbf16>
  %iv = ppc.insert_slice %v into %zeros starts = [0, 0, 8] limits = [2, 3, 12] steps = [1, 1, 1] : (tensor<2x3x4xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  %ik = ppc.insert_slice %k into %zeros starts = [0, 0, 4] limits = [2, 3, 8] steps = [1, 1, 1] : (tensor<2x3x4xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  %s = ppc.add %iv, %ik : (tensor<2x3x12xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  %iq = ppc.insert_slice %q into %zeros starts = [0, 0, 0] limits = [2, 3, 4] steps = [1, 1, 1] : (tensor<2x3x4xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  %r = ppc.add %s, %iq {ppc.bwd = 7 : i64} : (tensor<2x3x12xbf16>, tensor<2x3x12xbf16>) -> tensor<2x3x12xbf16>
  return %r : tensor<2x3x12xbf16>
}

// -----

// Tests two pieces of unequal sizes along the first axis, each added on
// either side.
// CHECK-LABEL: func.func @rows
// CHECK-SAME:    (%[[A:.*]]: tensor<1x5xf32>, %[[B:.*]]: tensor<3x5xf32>)
// CHECK-NEXT:    %[[C:.*]] = ppc.concat %[[A]], %[[B]] axis = 0
// CHECK-NEXT:    return %[[C]]
func.func @rows(%a: tensor<1x5xf32>, %b: tensor<3x5xf32>) -> tensor<4x5xf32> {
  %z1 = ppc.constant dense<0.0> : tensor<4x5xf32>
  %z2 = ppc.constant dense<0.0> : tensor<4x5xf32>
  %ib = ppc.insert_slice %b into %z1 starts = [1, 0] limits = [4, 5] steps = [1, 1] : (tensor<3x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %ia = ppc.insert_slice %a into %z2 starts = [0, 0] limits = [1, 5] steps = [1, 1] : (tensor<1x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = ppc.add %ib, %ia : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %r : tensor<4x5xf32>
}

// -----

// Tests sums that are not a concat, which stay: windows leaving a gap, two
// overlapping, windows along two axes, a step of 2, a destination other than
// zeros, a piece read elsewhere.
// CHECK-LABEL: func.func @not_concats
// CHECK-NOT:     ppc.concat
// CHECK:         return
func.func @not_concats(%a: tensor<2x2xf32>, %b: tensor<2x3xf32>, %c: tensor<2x6xf32>,
                       %e: tensor<1x6xf32>)
    -> (tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>,
        tensor<2x6xf32>, tensor<2x6xf32>) {
  %z = ppc.constant dense<0.0> : tensor<2x6xf32>
  %one = ppc.constant dense<1.0> : tensor<2x6xf32>
  // A gap: [0, 2) and [3, 6).
  %g1 = ppc.insert_slice %a into %z starts = [0, 0] limits = [2, 2] steps = [1, 1] : (tensor<2x2xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %g2 = ppc.insert_slice %b into %z starts = [0, 3] limits = [2, 6] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %gap = ppc.add %g1, %g2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  // Overlapping: [0, 3) and [2, 5) and [5, 6) would not tile.
  %o1 = ppc.insert_slice %b into %z starts = [0, 0] limits = [2, 3] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %o2 = ppc.insert_slice %b into %z starts = [0, 2] limits = [2, 5] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %overlap = ppc.add %o1, %o2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  // Two axes: a row and a column block.
  %t1 = ppc.insert_slice %e into %z starts = [0, 0] limits = [1, 6] steps = [1, 1] : (tensor<1x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %t2 = ppc.insert_slice %a into %z starts = [0, 4] limits = [2, 6] steps = [1, 1] : (tensor<2x2xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %axes = ppc.add %t1, %t2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  // A step of 2: the even and the odd columns.
  %s1 = ppc.insert_slice %b into %z starts = [0, 0] limits = [2, 6] steps = [1, 2] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %s2 = ppc.insert_slice %b into %z starts = [0, 1] limits = [2, 6] steps = [1, 2] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %strided = ppc.add %s1, %s2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  // Into ones.
  %n1 = ppc.insert_slice %b into %one starts = [0, 0] limits = [2, 3] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %n2 = ppc.insert_slice %b into %z starts = [0, 3] limits = [2, 6] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %ones = ppc.add %n1, %n2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  // A piece read elsewhere too (returned).
  %r1 = ppc.insert_slice %b into %z starts = [0, 0] limits = [2, 3] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %r2 = ppc.insert_slice %b into %z starts = [0, 3] limits = [2, 6] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %read = ppc.add %r1, %r2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  return %gap, %overlap, %axes, %strided, %ones, %read, %r1 : tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>
}

// -----

// Tests a tiling sum added to another value: the tiling becomes the
// concat, the add of the other value stays.
// CHECK-LABEL: func.func @plus
// CHECK-SAME:    (%[[B:.*]]: tensor<2x3xf32>, %[[H:.*]]: tensor<2x6xf32>)
// CHECK-NEXT:    %[[C:.*]] = ppc.concat %[[B]], %[[B]] axis = 1
// CHECK-NEXT:    %[[S:.*]] = ppc.add %[[C]], %[[H]]
// CHECK-NEXT:    return %[[S]]
func.func @plus(%b: tensor<2x3xf32>, %h: tensor<2x6xf32>) -> tensor<2x6xf32> {
  %z = ppc.constant dense<0.0> : tensor<2x6xf32>
  %p1 = ppc.insert_slice %b into %z starts = [0, 0] limits = [2, 3] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %p2 = ppc.insert_slice %b into %z starts = [0, 3] limits = [2, 6] steps = [1, 1] : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %p = ppc.add %p1, %p2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  %plus = ppc.add %p, %h : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  return %plus : tensor<2x6xf32>
}

// -----

// Tests rotary embedding's gradient: the term through the cosine plus the
// two halves through the sine, each inserted into zeros, is that term plus
// their concat (the same values: each element adds one piece, and zeros). With
// two terms besides the pieces, the outer add stays and the inner tree, one
// term and the pieces, is rewritten.
// CHECK-LABEL: func.func @rotary
// CHECK-SAME:    (%[[X:.*]]: tensor<2x6xbf16>, %[[A:.*]]: tensor<2x3xbf16>, %[[B:.*]]: tensor<2x3xbf16>, %[[Y:.*]]: tensor<2x6xbf16>)
// CHECK-NEXT:    %[[C:.*]] = ppc.concat %[[A]], %[[B]] axis = 1
// CHECK-NEXT:    %[[S:.*]] = ppc.add %[[X]], %[[C]] {ppc.bwd = 7 : i64}
// CHECK-NEXT:    %[[D:.*]] = ppc.concat %[[A]], %[[B]] axis = 1
// CHECK-NEXT:    %[[T:.*]] = ppc.add %[[X]], %[[D]]
// CHECK-NEXT:    %[[U:.*]] = ppc.add %[[T]], %[[Y]]
// CHECK-NEXT:    return %[[S]], %[[U]]
func.func @rotary(%x: tensor<2x6xbf16>, %a: tensor<2x3xbf16>, %b: tensor<2x3xbf16>, %y: tensor<2x6xbf16>)
    -> (tensor<2x6xbf16>, tensor<2x6xbf16>) {
  %z = ppc.constant dense<0.0> : tensor<2x6xbf16>
  %p1 = ppc.insert_slice %b into %z starts = [0, 3] limits = [2, 6] steps = [1, 1] : (tensor<2x3xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  %s1 = ppc.add %x, %p1 : (tensor<2x6xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  %p2 = ppc.insert_slice %a into %z starts = [0, 0] limits = [2, 3] steps = [1, 1] : (tensor<2x3xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  %s2 = ppc.add %s1, %p2 {ppc.bwd = 7 : i64} : (tensor<2x6xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  %q1 = ppc.insert_slice %b into %z starts = [0, 3] limits = [2, 6] steps = [1, 1] : (tensor<2x3xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  %t1 = ppc.add %x, %q1 : (tensor<2x6xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  %q2 = ppc.insert_slice %a into %z starts = [0, 0] limits = [2, 3] steps = [1, 1] : (tensor<2x3xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  %t2 = ppc.add %t1, %q2 : (tensor<2x6xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  %t3 = ppc.add %t2, %y : (tensor<2x6xbf16>, tensor<2x6xbf16>) -> tensor<2x6xbf16>
  return %s2, %t3 : tensor<2x6xbf16>, tensor<2x6xbf16>
}
