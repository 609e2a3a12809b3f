ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @unknown_reduction(%x: tensor<4xf32>) {
  %0 = ppc.all_reduce %x on @mesh["tp"] min : tensor<4xf32>
  return
}
