ppc.mesh @mesh axes = ["pp", "dp"] shape = [2, 1]
func.func @recv_peer_out_of_range() -> tensor<4xf32> {
  %y = ppc.recv from @mesh["pp"] 2 : tensor<4xf32>
  return %y : tensor<4xf32>
}
