func.func @expand_not_broadcastable(%x: tensor<3x16xi64>) {
  %0 = ppc.expand %x : tensor<3x16xi64> -> tensor<2x16xi64>
  return
}
