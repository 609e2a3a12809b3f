func.func @scatter_add_element_type(%g: tensor<2x64xf64>, %ids: tensor<2xi64>) {
  %0 = ppc.scatter_add %g[%ids] axis = 0 : (tensor<2x64xf64>, tensor<2xi64>) -> tensor<256x64xf32>
  return
}
