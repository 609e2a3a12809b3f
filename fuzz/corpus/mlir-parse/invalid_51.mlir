func.func @nll_loss_weight_rank(%lp: tensor<32x256xf32>, %t: tensor<32xi64>, %w: tensor<1x256xf32>) {
  %0 = ppc.nll_loss %lp, %t, %w sum : (tensor<32x256xf32>, tensor<32xi64>, tensor<1x256xf32>) -> tensor<f32>
  return
}
