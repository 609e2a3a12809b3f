func.func @matmul_contraction_mismatch(%a: tensor<2x16x64xf32>, %b: tensor<32x8xf32>) {
  %0 = ppc.matmul %a, %b : (tensor<2x16x64xf32>, tensor<32x8xf32>) -> tensor<2x16x8xf32>
  return
}
