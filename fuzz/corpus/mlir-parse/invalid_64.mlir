func.func @input_on_result(%x: tensor<3xf32>) -> (tensor<3xf32> {ppc.input = "x"}) {
  return %x : tensor<3xf32>
}
