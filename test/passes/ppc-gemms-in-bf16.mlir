// RUN: ppc-opt %s -ppc-gemms-in-bf16 | FileCheck %s

// Tests --precision bf16: every f32 matmul reads bf16 copies of its operands,
// produces bf16, and hands an f32 copy to its users; other ops (the bias add,
// the f64 matmul) are left as they are.
// CHECK-LABEL: func.func @linear
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>, %[[D:.*]]: tensor<2x2xf64>)
// CHECK:         %[[XB:.*]] = ppc.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:         %[[WB:.*]] = ppc.cast %[[W]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK:         %[[P:.*]] = ppc.matmul %[[XB]], %[[WB]] : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
// CHECK:         %[[PF:.*]] = ppc.cast %[[P]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK:         %[[Y:.*]] = ppc.add %[[PF]], %[[B]] : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK:         ppc.matmul %[[D]], %[[D]] : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
// CHECK:         return %[[Y]]
// CHECK-LABEL: func.func @transposed
// CHECK:         %[[WB:.*]] = ppc.cast %{{.*}} : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK:         %[[WT:.*]] = ppc.transpose %[[WB]] perm = [1, 0] : (tensor<16x8xbf16>) -> tensor<8x16xbf16>
// CHECK:         ppc.matmul %{{.*}}, %[[WT]] : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %d: tensor<2x2xf64>) -> (tensor<4x16xf32>, tensor<2x2xf64>) {
  %p = ppc.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y = ppc.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %e = ppc.matmul %d, %d : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  return %y, %e : tensor<4x16xf32>, tensor<2x2xf64>
}

func.func @transposed(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %wt = ppc.transpose %w perm = [1, 0] : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %p = ppc.matmul %x, %wt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %p : tensor<4x16xf32>
}
