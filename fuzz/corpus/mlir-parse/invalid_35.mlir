func.func @concat_axis_out_of_range(%a: tensor<2x3xf32>) {
  %0 = ppc.concat %a, %a axis = 2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}
