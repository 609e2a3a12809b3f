func.func @reduce_min_keepdims_mismatch(%x: tensor<2x3xf32>) {
  %0 = ppc.reduce_min %x axes = [1] keepdims = true : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}
