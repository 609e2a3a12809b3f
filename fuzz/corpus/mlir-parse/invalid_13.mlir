func.func @einsum_unknown_output_label(%a: tensor<2x3xf32>) {
  %0 = ppc.einsum "ij->ik" (%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
