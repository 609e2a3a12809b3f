func.func @einsum_term_count(%a: tensor<2x3xf32>) {
  %0 = ppc.einsum "ij,jk->ik" (%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
