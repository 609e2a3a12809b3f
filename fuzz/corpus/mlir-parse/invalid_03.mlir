func.func @less_non_bool_result(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %0 = ppc.less %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}
