func.func @unknown_arg_attribute(%x: tensor<3xf32> {ppc.weight = "x"}) {
  return
}
