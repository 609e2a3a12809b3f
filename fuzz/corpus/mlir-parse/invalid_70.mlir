func.func @scatter_add_wrong_updates_shape(%g: tensor<2x16x32xf32>, %ids: tensor<2x16xi64>) {
  %0 = ppc.scatter_add %g[%ids] axis = 0 : (tensor<2x16x32xf32>, tensor<2x16xi64>) -> tensor<256x64xf32>
  return
}
