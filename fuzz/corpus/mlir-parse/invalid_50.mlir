func.func @nll_loss_weight_shape(%lp: tensor<32x256xf32>, %t: tensor<32xi64>, %w: tensor<32xf32>) {
  %0 = ppc.nll_loss %lp, %t, %w sum : (tensor<32x256xf32>, tensor<32xi64>, tensor<32xf32>) -> tensor<f32>
  return
}
