ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
func.func @all_gather_dim_range(%x: tensor<4x2xf32>) {
  %0 = ppc.all_gather %x on @mesh["tp"] dim = 2 : tensor<4x2xf32> -> tensor<4x2xf32>
  return
}
