func.func @reduce_axes_unsorted(%x: tensor<2x3x4xf32>) {
  %0 = ppc.reduce_sum %x axes = [2, 0] keepdims = false : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return
}
