func.func @einsum_repeated_output_label(%a: tensor<2x2xf32>) {
  %0 = ppc.einsum "ij->ii" (%a) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return
}
