func.func @layer_norm_axis_out_of_range(%x: tensor<2x64xf32>, %g: tensor<64xf32>) {
  %0 = ppc.layer_norm %x, %g axis = 2 epsilon = 1.0e-5 : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  return
}
