ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
func.func @all_slice_size(%x: tensor<4x8xf32>) {
  %0 = ppc.all_slice %x on @mesh["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}
