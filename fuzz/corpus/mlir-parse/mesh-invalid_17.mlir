ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @collective_axis_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ppc.all_reduce %x on @mesh["tp", "tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}
