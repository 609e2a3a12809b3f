func.func @input_empty(%x: tensor<3xf32> {ppc.input = ""}) {
  return
}
