func.func @dynamic_shape_reshape(%x: tensor<2x3xf32>) {
  %0 = ppc.reshape %x : tensor<2x3xf32> -> tensor<?xf32>
  return
}
