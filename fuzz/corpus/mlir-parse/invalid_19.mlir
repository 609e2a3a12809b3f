func.func @reduce_axis_out_of_range(%x: tensor<2x3x4xf32>) {
  %0 = ppc.reduce_mean %x axes = [3] keepdims = true : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}
