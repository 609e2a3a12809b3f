ppc.mesh @mesh axes = ["pp", "dp"] shape = [2, 1]
func.func @send_negative_peer(%x: tensor<4xf32>) {
  ppc.send %x to @mesh["pp"] -1 : tensor<4xf32>
  return
}
