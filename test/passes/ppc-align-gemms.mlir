// RUN: ppc-opt %s -split-input-file -ppc-align-gemms | FileCheck %s
// RUN: ppc-opt %s -split-input-file -ppc-align-gemms=flops-per-byte=1e9 | FileCheck %s --check-prefix=NONE

// Tests ppc-align-gemms: a float matmul whose m, k or n is not a multiple of
// 16 bytes gets operands padded with zeros to multiples of 64 elements and
// a sliced result, where its FLOPs are at least flops-per-byte (48) times
// the bytes the copies move.

// The LM head (n = vocabulary 1001): the tied weight is padded before its
// transpose, so the product still reads it transposed.
// CHECK-LABEL: func.func @head
// CHECK:         %[[Z:.*]] = ppc.constant dense<0.000000e+00> : tensor<23x256xf32>
// CHECK:         %[[W:.*]] = ppc.concat %arg1, %[[Z]] axis = 0 : (tensor<1001x256xf32>, tensor<23x256xf32>) -> tensor<1024x256xf32>
// CHECK:         %[[T:.*]] = ppc.transpose %[[W]] perm = [1, 0] : (tensor<1024x256xf32>) -> tensor<256x1024xf32>
// CHECK:         %[[P:.*]] = ppc.matmul %arg0, %[[T]] {ppc.fwd = 7 : i64} : (tensor<8x128x256xf32>, tensor<256x1024xf32>) -> tensor<8x128x1024xf32>
// CHECK:         %[[S:.*]] = ppc.slice %[[P]] starts = [0, 0, 0] limits = [8, 128, 1001] steps = [1, 1, 1]
// CHECK:         return %[[S]]
// NONE-LABEL: func.func @head
// NONE-NOT:     ppc.concat
func.func @head(%x: tensor<8x128x256xf32>, %w: tensor<1001x256xf32>) -> tensor<8x128x1001xf32> {
  %t = ppc.transpose %w perm = [1, 0] : (tensor<1001x256xf32>) -> tensor<256x1001xf32>
  %l = ppc.matmul %x, %t {ppc.fwd = 7 : i64} : (tensor<8x128x256xf32>, tensor<256x1001xf32>) -> tensor<8x128x1001xf32>
  return %l : tensor<8x128x1001xf32>
}

// -----

// Its backward: k = 1001 pads both operands; m = 1001 of the weight's
// gradient (the logits' gradient transposed) pads the same value, which is
// padded once.
// CHECK-LABEL: func.func @head_grad
// CHECK-COUNT-1: ppc.concat %arg0
// CHECK-NOT:     ppc.concat %arg0
// CHECK:         ppc.matmul {{.*}} : (tensor<1024x1024xf32>, tensor<1024x256xf32>) -> tensor<1024x256xf32>
// CHECK:         %[[G:.*]] = ppc.matmul {{.*}} : (tensor<1024x1024xf32>, tensor<1024x256xf32>) -> tensor<1024x256xf32>
// CHECK:         ppc.slice %[[G]] starts = [0, 0] limits = [1001, 256]
func.func @head_grad(%g: tensor<1024x1001xf32>, %w: tensor<1001x256xf32>, %x: tensor<1024x256xf32>) -> (tensor<1024x256xf32>, tensor<1001x256xf32>) {
  %dx = ppc.matmul %g, %w : (tensor<1024x1001xf32>, tensor<1001x256xf32>) -> tensor<1024x256xf32>
  %gt = ppc.transpose %g perm = [1, 0] : (tensor<1024x1001xf32>) -> tensor<1001x1024xf32>
  %dw = ppc.matmul %gt, %x : (tensor<1001x1024xf32>, tensor<1024x256xf32>) -> tensor<1001x256xf32>
  return %dx, %dw : tensor<1024x256xf32>, tensor<1001x256xf32>
}

// -----

// The same with a batch (the weight's gradient folded over it by
// ppc-fold-into-gemms reads the logits' gradient through a reshape): the
// padding is made before the reshape, once for both products.
// CHECK-LABEL: func.func @head_grad_batched
// CHECK-COUNT-1: ppc.concat %arg0
// CHECK-NOT:     ppc.concat %arg0
// CHECK:         %[[P:.*]] = ppc.reshape %{{.*}} : tensor<8x128x1024xf32> -> tensor<1024x1024xf32>
// CHECK:         ppc.transpose %[[P]] perm = [1, 0] : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
// CHECK-NOT:     ppc.reshape %arg0
func.func @head_grad_batched(%g: tensor<8x128x1001xf32>, %w: tensor<1001x256xf32>, %x: tensor<1024x256xf32>) -> (tensor<8x128x256xf32>, tensor<1001x256xf32>) {
  %dx = ppc.matmul %g, %w : (tensor<8x128x1001xf32>, tensor<1001x256xf32>) -> tensor<8x128x256xf32>
  %rows = ppc.reshape %g : tensor<8x128x1001xf32> -> tensor<1024x1001xf32>
  %gt = ppc.transpose %rows perm = [1, 0] : (tensor<1024x1001xf32>) -> tensor<1001x1024xf32>
  %dw = ppc.matmul %gt, %x : (tensor<1001x1024xf32>, tensor<1024x256xf32>) -> tensor<1001x256xf32>
  return %dx, %dw : tensor<8x128x256xf32>, tensor<1001x256xf32>
}

// -----

// Alignment is 16 bytes of the element type: 1004 is aligned for f32 (4
// elements), not for bf16 (8).
// CHECK-LABEL: func.func @widths
// CHECK:         ppc.matmul %arg0, %arg1 : (tensor<512x256xf32>, tensor<256x1004xf32>) -> tensor<512x1004xf32>
// CHECK:         ppc.concat %arg3, {{.*}} axis = 1 : (tensor<256x1004xbf16>, tensor<256x20xbf16>) -> tensor<256x1024xbf16>
func.func @widths(%a: tensor<512x256xf32>, %b: tensor<256x1004xf32>, %c: tensor<512x256xbf16>, %d: tensor<256x1004xbf16>) -> (tensor<512x1004xf32>, tensor<512x1004xbf16>) {
  %0 = ppc.matmul %a, %b : (tensor<512x256xf32>, tensor<256x1004xf32>) -> tensor<512x1004xf32>
  %1 = ppc.matmul %c, %d : (tensor<512x256xbf16>, tensor<256x1004xbf16>) -> tensor<512x1004xbf16>
  return %0, %1 : tensor<512x1004xf32>, tensor<512x1004xbf16>
}

// -----

// Small products stay (the copies would cost more than the unaligned
// kernel), and so do integer ones.
// CHECK-LABEL: func.func @small
// CHECK-NOT:     ppc.concat
func.func @small(%a: tensor<16x64xf32>, %b: tensor<64x1001xf32>, %c: tensor<512x256xi32>, %d: tensor<256x1001xi32>) -> (tensor<16x1001xf32>, tensor<512x1001xi32>) {
  %0 = ppc.matmul %a, %b : (tensor<16x64xf32>, tensor<64x1001xf32>) -> tensor<16x1001xf32>
  %1 = ppc.matmul %c, %d : (tensor<512x256xi32>, tensor<256x1001xi32>) -> tensor<512x1001xi32>
  return %0, %1 : tensor<16x1001xf32>, tensor<512x1001xi32>
}
