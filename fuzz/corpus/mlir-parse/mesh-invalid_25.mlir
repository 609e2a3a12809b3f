ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
func.func @reduce_scatter_divisible(%x: tensor<6x4xf32>) {
  %0 = ppc.reduce_scatter %x on @mesh["tp"] dim = 0 sum : tensor<6x4xf32> -> tensor<1x4xf32>
  return
}
