func.func @concat_dimension_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  %0 = ppc.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x8xf32>
  return
}
