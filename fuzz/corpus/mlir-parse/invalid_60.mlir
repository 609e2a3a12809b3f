func.func @param_not_string(%w: tensor<3xf32> {ppc.param = 3 : i64}) {
  return
}
