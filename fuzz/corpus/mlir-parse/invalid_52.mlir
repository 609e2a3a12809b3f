func.func @nll_loss_input_rank(%lp: tensor<256xf32>, %t: tensor<i64>) {
  %0 = ppc.nll_loss %lp, %t sum : (tensor<256xf32>, tensor<i64>) -> tensor<f32>
  return
}
