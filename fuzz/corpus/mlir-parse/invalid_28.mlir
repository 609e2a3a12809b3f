func.func @reshape_element_count(%x: tensor<2x3xf32>) {
  %0 = ppc.reshape %x : tensor<2x3xf32> -> tensor<4x2xf32>
  return
}
