func.func @nll_loss_spatial_target_shape(%lp: tensor<4x10x7xf32>, %t: tensor<4x10xi64>) {
  %0 = ppc.nll_loss %lp, %t none : (tensor<4x10x7xf32>, tensor<4x10xi64>) -> tensor<4x10xf32>
  return
}
