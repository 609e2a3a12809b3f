func.func @insert_slice_element_type(%s: tensor<2x8xf64>, %d: tensor<2x8xf32>) {
  %0 = ppc.insert_slice %s into %d starts = [0, 0] limits = [2, 8] steps = [1, 1] : (tensor<2x8xf64>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}
