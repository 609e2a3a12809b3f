func.func @forward(%ids: tensor<2x3xi64> {ppc.input = "ids"}, %wte: tensor<5x4xf32> {ppc.param = "wte"},
                   %unused: tensor<4xf32> {ppc.param = "unused"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %e = ppc.gather %wte[%ids] axis = 0 : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %l = ppc.reduce_mean %e axes = [0, 1, 2] keepdims = false : (tensor<2x3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
