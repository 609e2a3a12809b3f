func.func @einsum_implicit(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  %0 = ppc.einsum "ij,jk" (%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return
}
