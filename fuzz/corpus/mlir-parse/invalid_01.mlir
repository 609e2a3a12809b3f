func.func @mul_not_broadcastable_inner(%a: tensor<2x3x4xi64>, %b: tensor<5x1xi64>) {
  %0 = ppc.mul %a, %b : (tensor<2x3x4xi64>, tensor<5x1xi64>) -> tensor<2x5x4xi64>
  return
}
