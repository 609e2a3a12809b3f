func.func @slice_out_of_bounds(%x: tensor<2x8xf32>) {
  %0 = ppc.slice %x starts = [0, 4] limits = [2, 9] steps = [1, 1] : (tensor<2x8xf32>) -> tensor<2x5xf32>
  return
}
