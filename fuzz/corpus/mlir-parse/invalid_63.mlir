func.func @output_on_argument(%x: tensor<3xf32> {ppc.output = "y"}) {
  return
}
