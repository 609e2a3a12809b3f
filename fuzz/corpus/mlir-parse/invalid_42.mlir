func.func @gather_float_indices(%w: tensor<256x64xf32>, %ids: tensor<2xf32>) {
  %0 = ppc.gather %w[%ids] axis = 0 : (tensor<256x64xf32>, tensor<2xf32>) -> tensor<2x64xf32>
  return
}
