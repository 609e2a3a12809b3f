// RUN: ppc-opt %s -ppc-import-pipeline --ppc-validate-passes -o /dev/null 2>&1 | FileCheck %s

// Tests that --ppc-validate-passes runs the function before and after every
// pass of the pipeline on random inputs and reports the difference.
// CHECK:      ppc-validate: after ppc-fold-constants: @mask_and_scale: max abs diff 0.00e+00, max relative diff 0.00e+00
// CHECK-NEXT: ppc-validate: after canonicalize: @mask_and_scale: max abs diff 0.00e+00
// CHECK-NEXT: ppc-validate: after cse: @mask_and_scale: max abs diff 0.00e+00
func.func @mask_and_scale(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %ones = ppc.constant dense<1.0> : tensor<4x4xf32>
  %tri = ppc.trilu %ones upper = false k = 0 : tensor<4x4xf32>
  %half = ppc.constant dense<0.5> : tensor<f32>
  %scaled = ppc.mul %tri, %half : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %y = ppc.mul %x, %scaled : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %z = ppc.mul %x, %scaled : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = ppc.add %y, %z : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
