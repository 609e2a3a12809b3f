ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
func.func @axis_index_type() {
  %0 = ppc.axis_index on @mesh["tp"] : tensor<i32>
  return
}
