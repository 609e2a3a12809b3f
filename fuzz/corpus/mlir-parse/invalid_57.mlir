func.func @sqrt_integer(%x: tensor<4xi32>) {
  %0 = ppc.sqrt %x : tensor<4xi32>
  return
}
