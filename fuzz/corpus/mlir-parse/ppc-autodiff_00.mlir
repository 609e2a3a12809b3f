func.func @forward(%x: tensor<2x3xf32> {ppc.input = "x"}, %w: tensor<3x3xf32> {ppc.param = "w"},
                   %b: tensor<3xf32> {ppc.param = "b"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %h2 = ppc.matmul %h, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %y = ppc.add %h2, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = ppc.reduce_sum %y axes = [0, 1] keepdims = false : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
