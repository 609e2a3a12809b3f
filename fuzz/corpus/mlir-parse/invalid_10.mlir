func.func @einsum_ellipsis(%a: tensor<2x3xf32>) {
  %0 = ppc.einsum "...ij->...ji" (%a) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}
