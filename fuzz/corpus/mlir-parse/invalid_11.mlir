func.func @einsum_term_rank(%a: tensor<2x3xf32>) {
  %0 = ppc.einsum "ijk->i" (%a) : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}
