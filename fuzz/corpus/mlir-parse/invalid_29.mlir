func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  %0 = ppc.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return
}
