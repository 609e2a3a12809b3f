func.func @layer_norm_scale_rank(%x: tensor<2x16x64xf32>, %g: tensor<16x64xf32>) {
  %0 = ppc.layer_norm %x, %g axis = 2 epsilon = 1.0e-5 : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  return
}
