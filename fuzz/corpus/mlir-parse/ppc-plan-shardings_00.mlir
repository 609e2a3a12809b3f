func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"},
                      %w1: tensor<32x128xf32> {ppc.param = "w1"},
                      %w2: tensor<128x32xf32> {ppc.param = "w2"})
    -> (tensor<64x32xf32> {ppc.output = "y"}) {
  %h = ppc.matmul %x, %w1 : (tensor<64x32xf32>, tensor<32x128xf32>) -> tensor<64x128xf32>
  %a = ppc.relu %h : tensor<64x128xf32>
  %y = ppc.matmul %a, %w2 : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
