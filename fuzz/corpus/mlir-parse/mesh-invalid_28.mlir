ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
func.func @all_to_all_concat(%x: tensor<2x8xf32>) {
  %0 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 0 : tensor<2x8xf32> -> tensor<2x2xf32>
  return
}
