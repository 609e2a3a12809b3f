func.func @insert_slice_out_of_bounds(%s: tensor<2x5xf32>, %d: tensor<2x8xf32>) {
  %0 = ppc.insert_slice %s into %d starts = [0, 4] limits = [2, 9] steps = [1, 1] : (tensor<2x5xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}
