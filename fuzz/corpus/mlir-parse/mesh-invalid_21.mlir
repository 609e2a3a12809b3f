ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
func.func @all_gather_size(%x: tensor<4x2xf32>) {
  %0 = ppc.all_gather %x on @mesh["tp"] dim = 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  return
}
