func.func @nll_loss_target_shape(%lp: tensor<32x256xf32>, %t: tensor<256xi64>) {
  %0 = ppc.nll_loss %lp, %t mean : (tensor<32x256xf32>, tensor<256xi64>) -> tensor<f32>
  return
}
