func.func @einsum_label_size_conflict(%a: tensor<2x3xf32>, %b: tensor<5x4xf32>) {
  %0 = ppc.einsum "ij,jk->ik" (%a, %b) : (tensor<2x3xf32>, tensor<5x4xf32>) -> tensor<2x4xf32>
  return
}
