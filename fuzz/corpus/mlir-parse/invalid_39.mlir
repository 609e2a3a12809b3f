func.func @slice_zero_step(%x: tensor<8xf32>) {
  %0 = ppc.slice %x starts = [0] limits = [8] steps = [0] : (tensor<8xf32>) -> tensor<8xf32>
  return
}
