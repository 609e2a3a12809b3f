ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
func.func @reduce_scatter_size(%x: tensor<8x4xf32>) {
  %0 = ppc.reduce_scatter %x on @mesh["dp", "tp"] dim = 0 sum : tensor<8x4xf32> -> tensor<4x4xf32>
  return
}
