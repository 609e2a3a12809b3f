func.func @forward(%x: tensor<4x3xf32> {ppc.input = "x"}, %w: tensor<3x5xf32> {ppc.param = "w"},
                   %b: tensor<5xf32> {ppc.param = "b"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %y = ppc.add %h, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %t = ppc.tanh %y : tensor<4x5xf32>
  %l = ppc.reduce_mean %t axes = [0, 1] keepdims = false : (tensor<4x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
