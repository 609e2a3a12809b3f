func.func @cumsum_axis(%x: tensor<4x16xi64>) {
  %0 = ppc.cumsum %x axis = 2 exclusive = false reverse = false : tensor<4x16xi64>
  return
}
