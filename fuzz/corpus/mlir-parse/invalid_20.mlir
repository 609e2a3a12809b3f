func.func @reduce_axis_negative(%x: tensor<2x3x4xi64>) {
  %0 = ppc.reduce_prod %x axes = [-1] keepdims = false : (tensor<2x3x4xi64>) -> tensor<2x3xi64>
  return
}
