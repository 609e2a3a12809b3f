func.func @concat_no_operands() {
  %0 = ppc.concat axis = 0 : () -> tensor<0xf32>
  return
}
