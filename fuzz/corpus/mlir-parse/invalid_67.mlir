func.func @insert_slice_entry_count(%s: tensor<2x8xf32>, %d: tensor<2x8xf32>) {
  %0 = ppc.insert_slice %s into %d starts = [0] limits = [2] steps = [1] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}
