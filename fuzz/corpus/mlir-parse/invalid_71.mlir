func.func @scatter_add_axis_out_of_range(%g: tensor<256x64x2xf32>, %ids: tensor<2xi64>) {
  %0 = ppc.scatter_add %g[%ids] axis = 2 : (tensor<256x64x2xf32>, tensor<2xi64>) -> tensor<256x64xf32>
  return
}
