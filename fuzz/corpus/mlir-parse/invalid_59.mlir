func.func @constant_type_mismatch() {
  %0 = "ppc.constant"() <{value = dense<[1, 2]> : tensor<2xi64>}> : () -> tensor<2xi32>
  return
}
