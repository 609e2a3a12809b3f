func.func @layer_norm_bias_element_type(%x: tensor<2x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf16>) {
  %0 = ppc.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-5 : (tensor<2x64xf32>, tensor<64xf32>, tensor<64xf16>) -> tensor<2x64xf32>
  return
}
