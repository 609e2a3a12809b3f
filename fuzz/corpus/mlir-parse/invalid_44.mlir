func.func @expand_lower_rank(%x: tensor<1x16xi64>) {
  %0 = ppc.expand %x : tensor<1x16xi64> -> tensor<16xi64>
  return
}
