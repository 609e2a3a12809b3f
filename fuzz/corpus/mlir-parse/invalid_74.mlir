ppc.mesh @mesh axes = ["pp", "dp"] shape = [2, 1]
func.func @send_unknown_axis(%x: tensor<4xf32>) {
  ppc.send %x to @mesh["tp"] 1 : tensor<4xf32>
  return
}
