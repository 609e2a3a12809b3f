func.func @einsum_no_operands() {
  %0 = ppc.einsum "->" () : () -> tensor<f32>
  return
}
