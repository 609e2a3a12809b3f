func.func @unranked_unary(%x: tensor<*xf32>) {
  %0 = "ppc.exp"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return
}
