func.func @where_not_broadcastable(%c: tensor<4xi1>, %a: tensor<3xf32>, %b: tensor<f32>) {
  %0 = ppc.where %c, %a, %b : (tensor<4xi1>, tensor<3xf32>, tensor<f32>) -> tensor<4xf32>
  return
}
