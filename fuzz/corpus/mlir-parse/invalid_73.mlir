func.func @scatter_add_float_indices(%g: tensor<2x64xf32>, %ids: tensor<2xf32>) {
  %0 = ppc.scatter_add %g[%ids] axis = 0 : (tensor<2x64xf32>, tensor<2xf32>) -> tensor<256x64xf32>
  return
}
