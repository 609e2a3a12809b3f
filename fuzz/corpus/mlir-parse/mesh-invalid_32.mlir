ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
func.func @axis_index_axis() {
  %0 = ppc.axis_index on @mesh["x"] : tensor<i64>
  return
}
