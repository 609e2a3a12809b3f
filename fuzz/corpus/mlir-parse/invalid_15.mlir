func.func @einsum_element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) {
  %0 = ppc.einsum "ij,jk->ik" (%a, %b) : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return
}
