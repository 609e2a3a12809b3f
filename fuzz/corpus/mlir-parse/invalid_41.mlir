func.func @gather_axis_out_of_range(%w: tensor<256x64xf32>, %ids: tensor<2x16xi64>) {
  %0 = ppc.gather %w[%ids] axis = 2 : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<256x64x2x16xf32>
  return
}
