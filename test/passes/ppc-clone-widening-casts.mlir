// RUN: ppc-opt %s -split-input-file -ppc-clone-widening-casts | FileCheck %s

// Tests ppc-clone-widening-casts: each elementwise reader of a widening
// float cast after the first gets its own cast, just before it, with the
// reader's attributes, so that the cast fuses into the reader's kernel and
// the wide copy is never stored.

// A bf16 weight gradient read by the gradient norm's square and by AdamW's
// two moments: the first reader keeps the cast, the optimizer's two ops
// (one reading it twice) each get their own.
// CHECK-LABEL: func.func @gradient
// CHECK:         %[[G:.*]] = ppc.cast %arg0 {ppc.bwd = 2 : i64, ppc.mb = 0 : i64} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[N:.*]] = ppc.mul %[[G]], %[[G]] :
// CHECK-NEXT:    ppc.reduce_sum %[[N]]
// CHECK-NEXT:    %[[G1:.*]] = ppc.cast %arg0 {ppc.optimizer = "w"} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    ppc.mul %[[G1]], %arg1 {ppc.optimizer = "w"}
// CHECK-NEXT:    %[[G2:.*]] = ppc.cast %arg0 {ppc.optimizer = "w"} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    ppc.mul %[[G2]], %[[G2]] {ppc.optimizer = "w"}
// CHECK-NOT:     ppc.cast
func.func @gradient(%b: tensor<4x8xbf16>, %s: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %g = ppc.cast %b {ppc.bwd = 2 : i64, ppc.mb = 0 : i64} : tensor<4x8xbf16> -> tensor<4x8xf32>
  %n = ppc.mul %g, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = ppc.reduce_sum %n axes = [0, 1] keepdims = false : (tensor<4x8xf32>) -> tensor<f32>
  %m = ppc.mul %g, %s {ppc.optimizer = "w"} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v = ppc.mul %g, %g {ppc.optimizer = "w"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %sum, %m, %v : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A LayerNorm's output gradient: its scale's gradient sums dy * xhat over
// the rows, its bias's sums dy; each sum reads its own cast (a reduction
// ends its operand's fused kernel).
// CHECK-LABEL: func.func @norm
// CHECK:         %[[DY:.*]] = ppc.cast %arg0 {ppc.bwd = 7 : i64} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[P:.*]] = ppc.mul %[[DY]], %arg1 {ppc.bwd = 7 : i64}
// CHECK-NEXT:    ppc.reduce_sum %[[P]]
// CHECK-NEXT:    %[[DY1:.*]] = ppc.cast %arg0 {ppc.bwd = 8 : i64} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    ppc.reduce_sum %[[DY1]] axes = [0] keepdims = false {ppc.bwd = 8 : i64}
func.func @norm(%dy: tensor<4x8xbf16>, %xhat: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %g = ppc.cast %dy {ppc.bwd = 7 : i64} : tensor<4x8xbf16> -> tensor<4x8xf32>
  %p = ppc.mul %g, %xhat {ppc.bwd = 7 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %scale = ppc.reduce_sum %p axes = [0] keepdims = false {ppc.bwd = 7 : i64} : (tensor<4x8xf32>) -> tensor<8xf32>
  %bias = ppc.reduce_sum %g axes = [0] keepdims = false {ppc.bwd = 8 : i64} : (tensor<4x8xf32>) -> tensor<8xf32>
  return %scale, %bias : tensor<8xf32>, tensor<8xf32>
}

// -----

// A reader that does not fuse with its operands (a GEMM, a collective)
// needs the wide copy anyway: nothing changes. Nor for a cast read once, or
// a narrowing one.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: ppc.cast
// CHECK-NOT:     ppc.cast
func.func @kept(%b: tensor<4x8xbf16>, %w: tensor<8x2xf32>, %x: tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %g = ppc.cast %b : tensor<4x8xbf16> -> tensor<4x8xf32>
  %p = ppc.matmul %g, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %e = ppc.exp %g : tensor<4x8xf32>
  %once = ppc.cast %b : tensor<4x8xbf16> -> tensor<4x8xf32>
  %f = ppc.exp %once : tensor<4x8xf32>
  %narrow = ppc.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %a = ppc.neg %narrow : tensor<4x8xbf16>
  %c = ppc.abs %narrow : tensor<4x8xbf16>
  return %p, %e, %f, %a, %c : tensor<4x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xbf16>
}
