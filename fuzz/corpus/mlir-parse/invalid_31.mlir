func.func @transpose_perm_out_of_range(%x: tensor<2x3xf32>) {
  %0 = ppc.transpose %x perm = [2, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}
