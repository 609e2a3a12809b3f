func.func @reduce_axes_repeated(%x: tensor<2x3x4xf32>) {
  %0 = ppc.reduce_max %x axes = [1, 1] keepdims = true : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return
}
