func.func @slice_backward_out_of_bounds(%x: tensor<8xf32>) {
  %0 = ppc.slice %x starts = [8] limits = [-1] steps = [-1] : (tensor<8xf32>) -> tensor<9xf32>
  return
}
