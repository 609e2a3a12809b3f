func.func @insert_slice_wrong_source_shape(%s: tensor<2x32xf32>, %d: tensor<2x192xf32>) {
  %0 = ppc.insert_slice %s into %d starts = [0, 64] limits = [2, 128] steps = [1, 1] : (tensor<2x32xf32>, tensor<2x192xf32>) -> tensor<2x192xf32>
  return
}
