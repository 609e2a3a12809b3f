func.func @cast_shape(%x: tensor<2x3xi64>) {
  %0 = ppc.cast %x : tensor<2x3xi64> -> tensor<3x2xf32>
  return
}
