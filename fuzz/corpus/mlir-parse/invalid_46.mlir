func.func @top_k_indices_k(%x: tensor<4x3xf32>) {
  %0 = ppc.top_k_indices %x axis = 1 k = 4 largest = true : tensor<4x3xf32> -> tensor<4x4xi64>
  return
}
