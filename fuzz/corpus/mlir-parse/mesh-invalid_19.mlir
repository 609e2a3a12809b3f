ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @all_reduce_bool(%x: tensor<4xi1>) {
  %0 = ppc.all_reduce %x on @mesh["tp"] max : tensor<4xi1>
  return
}
