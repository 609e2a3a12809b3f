func.func @dynamic_shape_binary(%a: tensor<?x3xf32>, %b: tensor<3xf32>) {
  %0 = ppc.add %a, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}
