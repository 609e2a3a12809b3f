ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @all_reduce_type(%x: tensor<4xf32>) {
  %0 = "ppc.all_reduce"(%x) <{axes = ["tp"], mesh = @mesh, reduction = 0 : i32}> : (tensor<4xf32>) -> tensor<4xf64>
  return
}
