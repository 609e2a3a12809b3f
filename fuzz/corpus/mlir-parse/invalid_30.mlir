func.func @transpose_perm_repeats(%x: tensor<2x3x4xf32>) {
  %0 = ppc.transpose %x perm = [0, 2, 2] : (tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
  return
}
