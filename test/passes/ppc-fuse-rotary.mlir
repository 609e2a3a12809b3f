// RUN: ppc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(ppc-fuse-rotary))' | FileCheck %s
// RUN: ppc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(ppc-fuse-rotary))' --ppc-validate-passes -o /dev/null 2>&1 | FileCheck %s --check-prefix=VALID

// The fused op computes what the composition did, on random inputs, within
// f32's rounding (it rounds once where the composition rounded the products
// and the sum); in f64 exactly.
// VALID:      ppc-validate: after ppc-fuse-rotary: @llama: max abs diff {{.*}}, max relative diff {{[0-9.]+e-0[78]}}
// VALID-NEXT: ppc-validate: after ppc-fuse-rotary: @swapped_operands_q_and_k: max abs diff 0.00e+00, max relative diff 0.00e+00
// VALID-NEXT: ppc-validate: after ppc-fuse-rotary: @partial: max abs diff {{.*}}, max relative diff {{[0-9.]+e-0[78]}}
// VALID-NEXT: ppc-validate: after ppc-fuse-rotary: @other_reader: max abs diff {{.*}}, max relative diff {{[0-9.]+e-0[78]}}
// VALID-NEXT: ppc-validate: after ppc-fuse-rotary: @not_rotary: max abs diff 0.00e+00, max relative diff 0.00e+00
// VALID-NEXT: ppc-validate: after ppc-fuse-rotary: @three_runs: max abs diff 0.00e+00, max relative diff 0.00e+00

// Tests transformers' LLaMA form: rotate_half(q) as two slices of the last
// dimension, the second negated, concatenated; q * cos + that * sin, the
// tables [B, 1, T, hd] (gathered by position ids). Nothing of the
// composition is left.
// CHECK-LABEL: func.func @llama
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8x16xf32>, %[[C:.*]]: tensor<2x1x8x16xf32>, %[[S:.*]]: tensor<2x1x8x16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = ppc.rotary %[[X]], %[[C]], %[[S]] : (tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @llama(%x: tensor<2x4x8x16xf32>, %cos: tensor<2x1x8x16xf32>, %sin: tensor<2x1x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %x1 = ppc.slice %x starts = [0, 0, 0, 0] limits = [2, 4, 8, 8] steps = [1, 1, 1, 1] : (tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %x2 = ppc.slice %x starts = [0, 0, 0, 8] limits = [2, 4, 8, 16] steps = [1, 1, 1, 1] : (tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %n = ppc.neg %x2 : tensor<2x4x8x8xf32>
  %r = ppc.concat %n, %x1 axis = 3 : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x16xf32>
  %a = ppc.mul %x, %cos : (tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %b = ppc.mul %r, %sin : (tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = ppc.add %a, %b : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %y : tensor<2x4x8x16xf32>
}

// -----

// Tests each product and the sum with their operands the other way round,
// tables [T, hd] shared by q and k: two rotaries, one concat each.
// CHECK-LABEL: func.func @swapped_operands_q_and_k
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x3x4xf64>, %[[K:.*]]: tensor<2x3x4xf64>, %[[C:.*]]: tensor<3x4xf64>, %[[S:.*]]: tensor<3x4xf64>)
// CHECK-NEXT:    %[[RQ:.*]] = ppc.rotary %[[Q]], %[[C]], %[[S]] :
// CHECK-NEXT:    %[[RK:.*]] = ppc.rotary %[[K]], %[[C]], %[[S]] :
// CHECK-NEXT:    return %[[RQ]], %[[RK]]
func.func @swapped_operands_q_and_k(%q: tensor<2x3x4xf64>, %k: tensor<2x3x4xf64>, %cos: tensor<3x4xf64>, %sin: tensor<3x4xf64>) -> (tensor<2x3x4xf64>, tensor<2x3x4xf64>) {
  %q1 = ppc.slice %q starts = [0, 0, 0] limits = [2, 3, 2] steps = [1, 1, 1] : (tensor<2x3x4xf64>) -> tensor<2x3x2xf64>
  %q2 = ppc.slice %q starts = [0, 0, 2] limits = [2, 3, 4] steps = [1, 1, 1] : (tensor<2x3x4xf64>) -> tensor<2x3x2xf64>
  %qn = ppc.neg %q2 : tensor<2x3x2xf64>
  %qr = ppc.concat %qn, %q1 axis = 2 : (tensor<2x3x2xf64>, tensor<2x3x2xf64>) -> tensor<2x3x4xf64>
  %qa = ppc.mul %cos, %q : (tensor<3x4xf64>, tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  %qb = ppc.mul %sin, %qr : (tensor<3x4xf64>, tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  %qy = ppc.add %qb, %qa : (tensor<2x3x4xf64>, tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  %k1 = ppc.slice %k starts = [0, 0, 0] limits = [2, 3, 2] steps = [1, 1, 1] : (tensor<2x3x4xf64>) -> tensor<2x3x2xf64>
  %k2 = ppc.slice %k starts = [0, 0, 2] limits = [2, 3, 4] steps = [1, 1, 1] : (tensor<2x3x4xf64>) -> tensor<2x3x2xf64>
  %kn = ppc.neg %k2 : tensor<2x3x2xf64>
  %kr = ppc.concat %kn, %k1 axis = 2 : (tensor<2x3x2xf64>, tensor<2x3x2xf64>) -> tensor<2x3x4xf64>
  %ka = ppc.mul %k, %cos : (tensor<2x3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
  %kb = ppc.mul %kr, %sin : (tensor<2x3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
  %ky = ppc.add %ka, %kb : (tensor<2x3x4xf64>, tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  return %qy, %ky : tensor<2x3x4xf64>, tensor<2x3x4xf64>
}

// -----

// Tests GPT-NeoX's partial rotation: the first half of each head rotated
// (a slice of it), the rest passed through; the slice and the concat with
// the rest stay.
// CHECK-LABEL: func.func @partial
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x8xf32>, %[[C:.*]]: tensor<3x4xf32>, %[[S:.*]]: tensor<3x4xf32>)
// CHECK-NEXT:    %[[ROT:.*]] = ppc.slice %[[X]] starts = [0, 0, 0] limits = [2, 3, 4]
// CHECK-NEXT:    %[[PASS:.*]] = ppc.slice %[[X]] starts = [0, 0, 4] limits = [2, 3, 8]
// CHECK-NEXT:    %[[Y:.*]] = ppc.rotary %[[ROT]], %[[C]], %[[S]] :
// CHECK-NEXT:    %[[O:.*]] = ppc.concat %[[Y]], %[[PASS]] axis = 2
// CHECK-NEXT:    return %[[O]]
func.func @partial(%x: tensor<2x3x8xf32>, %cos: tensor<3x4xf32>, %sin: tensor<3x4xf32>) -> tensor<2x3x8xf32> {
  %rot = ppc.slice %x starts = [0, 0, 0] limits = [2, 3, 4] steps = [1, 1, 1] : (tensor<2x3x8xf32>) -> tensor<2x3x4xf32>
  %pass = ppc.slice %x starts = [0, 0, 4] limits = [2, 3, 8] steps = [1, 1, 1] : (tensor<2x3x8xf32>) -> tensor<2x3x4xf32>
  %x1 = ppc.slice %rot starts = [0, 0, 0] limits = [2, 3, 2] steps = [1, 1, 1] : (tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
  %x2 = ppc.slice %rot starts = [0, 0, 2] limits = [2, 3, 4] steps = [1, 1, 1] : (tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
  %n = ppc.neg %x2 : tensor<2x3x2xf32>
  %r = ppc.concat %n, %x1 axis = 2 : (tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
  %a = ppc.mul %rot, %cos : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %b = ppc.mul %r, %sin : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %y = ppc.add %a, %b : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %o = ppc.concat %y, %pass axis = 2 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// -----

// Tests that an intermediate with another reader stays: the rotated halves
// are returned too.
// CHECK-LABEL: func.func @other_reader
// CHECK:         %[[R:.*]] = ppc.concat
// CHECK:         %[[Y:.*]] = ppc.rotary
// CHECK-NOT:     ppc.add
// CHECK:         return %[[Y]], %[[R]]
func.func @other_reader(%x: tensor<3x4xf32>, %cos: tensor<4xf32>, %sin: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %x1 = ppc.slice %x starts = [0, 0] limits = [3, 2] steps = [1, 1] : (tensor<3x4xf32>) -> tensor<3x2xf32>
  %x2 = ppc.slice %x starts = [0, 2] limits = [3, 4] steps = [1, 1] : (tensor<3x4xf32>) -> tensor<3x2xf32>
  %n = ppc.neg %x2 : tensor<3x2xf32>
  %r = ppc.concat %n, %x1 axis = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %a = ppc.mul %x, %cos : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %b = ppc.mul %r, %sin : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %y = ppc.add %a, %b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %y, %r : tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Tests what is not rotate-half and stays: the negation on the second
// piece (concat(x2, -x1), the transpose's rotation), the halves in their
// own order (concat(-x1, x2)), the cosine's product of another tensor, and
// a table broadcast along the pairs (one column).
// CHECK-LABEL: func.func @not_rotary
// CHECK-NOT:     ppc.rotary
func.func @not_rotary(%x: tensor<3x4xf32>, %z: tensor<3x4xf32>, %cos: tensor<4xf32>, %sin: tensor<4xf32>, %col: tensor<3x1xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %x1 = ppc.slice %x starts = [0, 0] limits = [3, 2] steps = [1, 1] : (tensor<3x4xf32>) -> tensor<3x2xf32>
  %x2 = ppc.slice %x starts = [0, 2] limits = [3, 4] steps = [1, 1] : (tensor<3x4xf32>) -> tensor<3x2xf32>
  %n1 = ppc.neg %x1 : tensor<3x2xf32>
  %n2 = ppc.neg %x2 : tensor<3x2xf32>
  %a = ppc.mul %x, %cos : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %r1 = ppc.concat %x2, %n1 axis = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %b1 = ppc.mul %r1, %sin : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %y1 = ppc.add %a, %b1 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %r2 = ppc.concat %n1, %x2 axis = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %b2 = ppc.mul %r2, %sin : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %y2 = ppc.add %a, %b2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %r3 = ppc.concat %n2, %x1 axis = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %b3 = ppc.mul %r3, %sin : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %za = ppc.mul %z, %cos : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %y3 = ppc.add %za, %b3 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %b4 = ppc.mul %r3, %col : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %y4 = ppc.add %a, %b4 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %y1, %y2, %y3, %y4 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Tests that tables broadcast along the middle one of three batch
// dimensions stay unfused: the kernels index the batch as two runs of
// strides (lines::AttentionRows), and this is three.
// CHECK-LABEL: func.func @three_runs
// CHECK-NOT:     ppc.rotary
func.func @three_runs(%x: tensor<2x3x2x5x4xf32>, %cos: tensor<2x1x2x5x4xf32>, %sin: tensor<2x1x2x5x4xf32>) -> tensor<2x3x2x5x4xf32> {
  %x1 = ppc.slice %x starts = [0, 0, 0, 0, 0] limits = [2, 3, 2, 5, 2] steps = [1, 1, 1, 1, 1] : (tensor<2x3x2x5x4xf32>) -> tensor<2x3x2x5x2xf32>
  %x2 = ppc.slice %x starts = [0, 0, 0, 0, 2] limits = [2, 3, 2, 5, 4] steps = [1, 1, 1, 1, 1] : (tensor<2x3x2x5x4xf32>) -> tensor<2x3x2x5x2xf32>
  %n = ppc.neg %x2 : tensor<2x3x2x5x2xf32>
  %r = ppc.concat %n, %x1 axis = 4 : (tensor<2x3x2x5x2xf32>, tensor<2x3x2x5x2xf32>) -> tensor<2x3x2x5x4xf32>
  %a = ppc.mul %x, %cos : (tensor<2x3x2x5x4xf32>, tensor<2x1x2x5x4xf32>) -> tensor<2x3x2x5x4xf32>
  %b = ppc.mul %r, %sin : (tensor<2x3x2x5x4xf32>, tensor<2x1x2x5x4xf32>) -> tensor<2x3x2x5x4xf32>
  %y = ppc.add %a, %b : (tensor<2x3x2x5x4xf32>, tensor<2x3x2x5x4xf32>) -> tensor<2x3x2x5x4xf32>
  return %y : tensor<2x3x2x5x4xf32>
}
