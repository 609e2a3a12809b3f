func.func @slice_entry_count(%x: tensor<2x8xf32>) {
  %0 = ppc.slice %x starts = [0] limits = [2] steps = [1] : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}
