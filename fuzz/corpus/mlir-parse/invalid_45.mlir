func.func @trilu_rank1(%x: tensor<16xf32>) {
  %0 = ppc.trilu %x upper = false k = 0 : tensor<16xf32>
  return
}
