func.func @forward(%w: tensor<4xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %zero = ppc.constant dense<0.0> : tensor<f32>
  %pos = ppc.greater %w, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %r = ppc.where %pos, %w, %zero : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %l = ppc.reduce_sum %r axes = [0] keepdims = false : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
