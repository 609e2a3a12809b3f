func.func @transpose_perm_length(%x: tensor<2x3x4xf32>) {
  %0 = ppc.transpose %x perm = [1, 0] : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  return
}
