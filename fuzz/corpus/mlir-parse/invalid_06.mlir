func.func @matmul_rank1(%a: tensor<64xf32>, %b: tensor<64x8xf32>) {
  %0 = ppc.matmul %a, %b : (tensor<64xf32>, tensor<64x8xf32>) -> tensor<8xf32>
  return
}
